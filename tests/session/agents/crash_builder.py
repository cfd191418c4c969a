"""The builder of the crash scenario: a real subprocess agent that calls hatloop's tools.

Iterations 2-5 publish build.step (with the iteration, so no stale loop), iteration 6
publishes build.done; each first creates a task "build N" through the CLI
(``python -m loop task create``). When CRASH_IN_BACKEND names this iteration and the
marker file does not exist yet, it SIGKILLs the loop process while the backend call is
under way. The agent runs in its own process group, so it survives; what it does then
depends on CRASH_ORPHAN:

* unset: it exits normally;
* ``agent``: it keeps running, emitting ``stale.tick`` and creating "stale" tasks;
* ``setsid``: it starts a child in a session of its own that does so, and exits;
* ``both``: it starts that child and keeps running too.

Each process that keeps running writes ``<pid> <start ticks>`` to ``orphans/`` once it
has emitted its first tick, so a test can wait for it and check that it was stopped.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STALE = """
import os, subprocess, sys, time
python, name = sys.argv[1], sys.argv[2]
if sys.argv[3] == "setsid":
    os.setsid()
def loop(*args):
    subprocess.run([python, "-m", "loop", *args], check=False, capture_output=True)
loop("emit", "stale.tick", name)
stat = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()
os.makedirs("orphans", exist_ok=True)
with open(f"orphans/{name}.tmp", "w") as f:
    f.write(f"{os.getpid()} {stat[19]}")
os.rename(f"orphans/{name}.tmp", f"orphans/{name}")
while True:
    loop("emit", "stale.tick", name)
    loop("task", "create", "stale")
    time.sleep(0.05)
"""

sys.stdin.read()
iteration = int(os.environ["LOOP_ITERATION"])
python = os.environ["LOOP_PYTHON"]
topic = "build.step" if iteration < 6 else "build.done"
subprocess.run([python, "-m", "loop", "task", "create", f"build {iteration}"], check=True)
subprocess.run([python, "-m", "loop", "emit", topic, f"step {iteration}"], check=True)
marker = Path(os.environ.get("CRASH_MARKER", "crash.marker"))
if os.environ.get("CRASH_IN_BACKEND") == str(iteration) and not marker.exists():
    marker.write_text("killed")
    orphan = os.environ.get("CRASH_ORPHAN", "")
    if orphan in ("setsid", "both"):
        subprocess.Popen([sys.executable, "-c", STALE, python, "child", "setsid"])
    os.kill(os.getppid(), signal.SIGKILL)
    if orphan in ("agent", "both"):
        os.execv(sys.executable, [sys.executable, "-c", STALE, python, "agent", "stay"])
    time.sleep(0.2)  # a little after the loop's death, still an orphan
print(f"built step {iteration}")
