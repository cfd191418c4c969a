"""Start-up wall time of ``python -m loop --help``, ``emit`` and the tool commands (subprocesses).

The tool commands (``task list``, ``theme status``, ``experience list``) run in an empty
folder: what is timed is the start, the parser and one read of a missing file.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["PYDANTIC", "TOOL_COMMANDS", "measure_startup"]

# One read-only command per domain; each imports its own domain only.
TOOL_COMMANDS = ("task list", "theme status", "experience list")
# What every tool command imports first (its inputs and outputs are pydantic models).
PYDANTIC = "python -c 'from pydantic import BaseModel'"


def _time(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-500:]}"
        )
    return wall * 1e3


def measure_startup(python: str, runs: int) -> dict[str, Any]:
    """Median wall time (ms) over ``runs`` of each command, after one warm-up run each.

    The interpreter alone (``python -c pass``) and the import of ``loop`` are measured
    the same way, so the report can say where the time goes.
    """
    python = os.path.abspath(python)  # noqa: PTH100 - not resolve(): a venv python is a symlink
    with tempfile.TemporaryDirectory(prefix="hatloop-startup-") as tmp:
        folder = Path(tmp)
        env = dict(os.environ)
        env["LOOP_EVENTS_FILE"] = str(folder / "events.jsonl")
        env.pop("PYTHONPROFILEIMPORTTIME", None)
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "python -c 'import loop'": [python, "-c", "import loop"],
            "python -m loop --help": [python, "-m", "loop", "--help"],
            "python -m loop emit t.x p": [python, "-m", "loop", "emit", "t.x", "p"],
            PYDANTIC: [python, "-c", "from pydantic import BaseModel"],
            **{f"python -m loop {c}": [python, "-m", "loop", *c.split()] for c in TOOL_COMMANDS},
        }
        samples: dict[str, list[float]] = {k: [] for k in commands}
        for cmd in commands.values():
            _time(cmd, env, folder)  # warm the page cache and the bytecode
        for _ in range(runs):
            for name, cmd in commands.items():  # interleaved: load spikes hit all alike
                samples[name].append(_time(cmd, env, folder))
        emitted = (folder / "events.jsonl").read_text(encoding="utf-8").count("\n")
    return {
        "runs": runs,
        "emitted_lines": emitted,
        "ms": {
            k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
            for k, v in samples.items()
        },
    }
