"""run_process with output files: what a child wrote before exiting is all there."""

from __future__ import annotations

import shutil
import sys

import pytest

from loop.backends._process import run_process

# Node queues a pipe write it cannot finish and drops the queue at process.exit.
NODE_WRITES_AND_EXITS = 'process.stdout.write("x".repeat(3e6) + "END"); process.exit(0)'


async def test_output_files_keep_what_node_wrote_just_before_exiting() -> None:
    """3 MB written, then process.exit: through a pipe most of it is lost; a file keeps it."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    proc = await run_process([node, "-e", NODE_WRITES_AND_EXITS], output_files=True)
    assert proc.returncode == 0
    assert len(proc.stdout) == 3_000_003 and proc.stdout.endswith(b"END")
    assert not proc.truncated


async def test_output_files_keep_the_cap_stdin_and_stderr() -> None:
    """The cap cuts each stream and says so; stdin still reaches the child."""
    code = "import sys; d = sys.stdin.read(); print(d * 50, end=''); print('oops', file=sys.stderr)"
    proc = await run_process(
        [sys.executable, "-c", code], stdin=b"abc", max_output_bytes=100, output_files=True
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"abc" * 33 + b"a", b"oops\n")
    assert proc.truncated


async def test_output_files_keep_the_output_of_a_timed_out_child() -> None:
    """At the timeout the group is stopped and what it wrote so far is returned."""
    proc = await run_process(
        ["sh", "-c", "echo partial; exec sleep 60"], timeout=3, output_files=True
    )
    assert (proc.timed_out, proc.stdout) == (True, b"partial\n")
