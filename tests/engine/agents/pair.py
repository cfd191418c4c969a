"""A real subprocess agent for two hats of different kinds at once: ``pair.py DIR``.

``splitter`` publishes ``left.go`` and ``right.go``; ``left`` and ``right`` each write
``DIR/<hat>`` and wait until the other has started (which proves they overlap, with no
timing), then publish ``side.done``; ``joiner`` completes the loop.
"""

import os
import sys
import time
from pathlib import Path

folder = Path(sys.argv[1])
sys.stdin.read()
hat = os.environ["LOOP_HAT"]
if hat == "splitter":
    print('<event topic="left.go">l</event><event topic="right.go">r</event>')
elif hat in ("left", "right"):
    (folder / hat).write_text("")
    other = folder / ("right" if hat == "left" else "left")
    deadline = time.monotonic() + 120  # a safety net only: the two start at once
    while not other.exists():
        if time.monotonic() > deadline:
            sys.exit("the other hat never started: the hats did not run at once")
        time.sleep(0.01)
    print(f'<event topic="side.done">{hat}</event>')
else:
    print('<event topic="LOOP_COMPLETE">joined</event>')
