"""A stand-in agent for Ralph's solo mode (a ``command`` backend), doing what the
converted ``ralph`` hat's instructions say, through hatloop's task commands.

First turn: it plans two tasks. Each turn: it starts the first open task, "does" it
(appends its name to ``work.txt``), completes it and publishes ``ralph.next``. With no
task open it publishes the completion event. ``SOLO_SILENT`` set: it publishes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LOOP = [os.environ.get("LOOP_PYTHON", sys.executable), "-m", "loop"]


def _loop(*args: str) -> str:
    return subprocess.run([*LOOP, *args], check=True, capture_output=True, text=True).stdout


def main() -> int:
    """One turn of the solo workflow."""
    prompt = sys.stdin.read()
    Path("prompts").mkdir(exist_ok=True)
    Path("prompts", f"{int(os.environ['LOOP_ITERATION']):03d}.txt").write_text(prompt)
    if os.environ.get("SOLO_SILENT"):
        return 0
    tasks = json.loads(_loop("task", "list", "--json"))["tasks"]
    if not tasks:
        for name in ("write the function", "write its tests"):
            _loop("task", "create", name)
        tasks = json.loads(_loop("task", "list", "--json"))["tasks"]
    todo = [t for t in tasks if t["status"] != "done"]
    if not todo:
        _loop("emit", "LOOP_COMPLETE", "all tasks done")
        return 0
    task = todo[0]
    _loop("task", "start", task["id"])
    with Path("work.txt").open("a", encoding="utf-8") as fh:
        fh.write(task["name"] + "\n")
    _loop("task", "complete", task["id"], f"did: {task['name']}")
    _loop("emit", "ralph.next", f"done {task['name']}; next: the rest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
