"""A real subprocess agent whose parallel activations call hatloop's task tool in an
order given across them: ``interleave_agent.py DIR``.

* ``coord`` fans out three ``work`` events (``emit --payloads a b c``);
* ``rev`` writes ``DIR/started-N`` (N its iteration), waits until the three reviewers have
  started, then takes its turns of :data:`PLAN` (the last started first, two calls each,
  interleaved), each after the previous turn's ``DIR/turn-K`` file: it creates a task over
  the CLI, then writes its own turn's file. No timing: the files give the order;
* ``syn`` completes the loop.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

# the turns, by the rank of the reviewer's start (0: the first started)
PLAN = [2, 1, 0, 2, 1, 0]

folder = Path(sys.argv[1])
hat = os.environ["LOOP_HAT"]
python = os.environ.get("LOOP_PYTHON", sys.executable)
iteration = int(os.environ["LOOP_ITERATION"])


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120  # a safety net: the file comes long before
    while not path.exists():
        assert time.monotonic() < deadline, f"never came: {path}"
        time.sleep(0.01)


if hat == "coord":
    subprocess.run([python, "-m", "loop", "emit", "work", "--payloads", "a", "b", "c"], check=True)
elif hat == "rev":
    (folder / f"started-{iteration}").write_text("")
    deadline = time.monotonic() + 120
    while len(list(folder.glob("started-*"))) < 3:
        assert time.monotonic() < deadline, "the three reviewers never ran at once"
        time.sleep(0.01)
    rank = sorted(int(p.name.split("-")[1]) for p in folder.glob("started-*")).index(iteration)
    for turn, owner in enumerate(PLAN):
        if owner != rank:
            continue
        if turn:
            wait_for(folder / f"turn-{turn - 1}")
        name = f"turn {turn} by iteration {iteration}"
        subprocess.run(
            [python, "-m", "loop", "task", "create", name],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (folder / f"turn-{turn}").write_text("")
    print(f'<event topic="done">{iteration}</event>')
elif hat == "syn":
    print('<event topic="LOOP_COMPLETE">ok</event>')
