"""A hat written in Python: run the project's tests and publish the verdict.

Real backpressure: the loop learns whether the tests pass from the tests themselves,
not from what an agent claims. Use it with ``hats/checks.toml``.
"""

from __future__ import annotations

import subprocess
import sys

from loop.backends.python_hat import HatContext


def run_tests(ctx: HatContext) -> str:
    """Run pytest; publish ``tests.passed`` or ``tests.failed`` with the summary line."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "--no-header"],
        cwd=ctx.workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    summary = lines[-1] if lines else f"pytest exited {proc.returncode} with no output"
    ctx.emit("tests.passed" if proc.returncode == 0 else "tests.failed", summary)
    return proc.stdout[-4000:]
