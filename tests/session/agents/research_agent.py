"""A research agent that keeps its plan in hatloop's tasks, through the CLI only.

Run by a ``command`` backend. Iteration 1 creates the research task and its three
steps; each later iteration starts the research (which starts the next step) and
completes that step, with ``python -m loop task ...``. At iteration 4 it believes it is
done and publishes ``RESEARCH_COMPLETE`` without working, while a step is still open:
the loop's completion gate must refuse it, as it did when the session was recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

STEPS = ["read the sources", "compare the findings", "write the summary"]


def task(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "loop", "task", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    reply: dict[str, Any] = json.loads(proc.stdout)
    return reply


def main() -> int:
    sys.stdin.read()
    iteration = int(os.environ["LOOP_ITERATION"])
    if iteration == 1:
        root = task("create", "--name", "Research the question")["task"]
        for step in STEPS:
            task("create", "--name", step, "--parent-id", root["id"])
        print(f'Planned {len(STEPS)} steps.\n<event topic="research.step">planned</event>')
        return 0
    if iteration == 4:
        print('I think I am done.\n<event topic="RESEARCH_COMPLETE">all found</event>')
        return 0
    root = next(t for t in task("list")["tasks"] if not t.get("parent_id"))
    step = task("start", root["id"])["subtask"]
    done = task("complete", "--id", step["id"], "--resolution", f"did: {step['name']}")
    if done.get("next_task_id") is None:
        print('<event topic="RESEARCH_COMPLETE">research done</event>')
    else:
        print(f'<event topic="research.step">{step["name"]}</event>')
    return 0


if __name__ == "__main__":
    sys.exit(main())
