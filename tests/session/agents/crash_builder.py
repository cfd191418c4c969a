"""The builder of the crash scenario: a real subprocess agent.

Iterations 2-5 publish build.step (with the iteration, so no stale loop), iteration 6
publishes build.done. When CRASH_IN_BACKEND names this iteration and the marker file
does not exist yet, it SIGKILLs the loop process while the backend call is under way
(the agent runs in its own process group, so it survives and exits normally).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

sys.stdin.read()
iteration = int(os.environ["LOOP_ITERATION"])
python = os.environ["LOOP_PYTHON"]
topic = "build.step" if iteration < 6 else "build.done"
subprocess.run([python, "-m", "loop", "emit", topic, f"step {iteration}"], check=True)
marker = Path(os.environ.get("CRASH_MARKER", "crash.marker"))
if os.environ.get("CRASH_IN_BACKEND") == str(iteration) and not marker.exists():
    marker.write_text("killed")
    os.kill(os.getppid(), signal.SIGKILL)
print(f"built step {iteration}")
