"""kill -9 during a task write: temp files never pile up, the file is whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loop.tools.base import ToolContext
from loop.tools.registry import call_tool

# The child writes a task and stops just before the rename that publishes it (after
# its temp file is complete): it reports READY (the parent blocks on that line, no
# sleeps) and waits to be killed.
CHILD = r"""
import os, sys, time
from pathlib import Path
from loop.tools.base import ToolContext
from loop.tools.registry import call_tool

def stop(*args, **kwargs):
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    time.sleep(600)
os.replace = stop
call_tool(ToolContext(root=Path(sys.argv[1]), tasks_file=Path("tasks.json")), "createTask",
          {"name": "killed"})
"""


def _kill_a_writer(root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"the writer exited before its rename (rc {proc.wait()})")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _temps(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp"))


def test_killed_writes_leave_at_most_one_temp_file_and_the_next_write_removes_it(
    tmp_path: Path,
) -> None:
    """Three writers killed before their rename: one temp file, the tasks file whole;
    the next write publishes and leaves no temp file."""
    ctx = ToolContext(root=tmp_path, tasks_file=Path("tasks.json"))
    call_tool(ctx, "createTask", {"name": "kept"})
    for _ in range(3):
        _kill_a_writer(tmp_path)
        assert _temps(tmp_path) == [".tasks.json.tmp"]
        assert [t["name"] for t in json.loads((tmp_path / "tasks.json").read_text())] == ["kept"]
    call_tool(ctx, "createTask", {"name": "next"})
    assert _temps(tmp_path) == []
    names = [t["name"] for t in json.loads((tmp_path / "tasks.json").read_text())]
    assert names == ["kept", "next"]
