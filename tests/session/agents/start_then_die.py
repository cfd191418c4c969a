"""An agent whose first attempt starts a task and then kills its loop (SIGKILL).

Each attempt creates task "A" and starts it through the CLI; the first (no marker file
yet) then kills the loop process, its parent, and exits. The next attempt, after the
resume, completes the task and publishes LOOP_COMPLETE. The killed attempt's calls
changed the tasks file (the task is in progress), so the recording holds them.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.stdin.read()
python = os.environ["LOOP_PYTHON"]


def loop(*args: str) -> dict:
    done = subprocess.run(
        [python, "-m", "loop", *args, "--json"], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


task = loop("task", "create", "--name", "A")["task"]["id"]
loop("task", "start", task)
marker = Path("killed.marker")
if not marker.exists():
    marker.write_text("killed")
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(0)
loop("task", "complete", task, "done")
print('<event topic="LOOP_COMPLETE">done</event>')
