"""A real subprocess agent: reads the prompt on stdin, emits through both channels.

It runs `python -m loop emit` (the file channel) for a progress event, and writes an
<event> tag (the output channel) for the event that moves the loop on, choosing by
the hat named in LOOP_HAT.
"""

import os
import subprocess
import sys

prompt = sys.stdin.read()
hat = os.environ["LOOP_HAT"]
iteration = os.environ["LOOP_ITERATION"]
python = os.environ.get("LOOP_PYTHON", sys.executable)
if hat == "writer":
    subprocess.run(
        [python, "-m", "loop", "emit", "draft.ready", '{"words": 3}', "--json"], check=True
    )
    print(f"wrote a draft in iteration {iteration}")
    print(f'<event topic="experience.thought">saw {len(prompt)} chars</event>')
else:
    assert "draft.ready" in prompt, "the triggering event must be in the prompt"
    print('checked the draft <event topic="LOOP_COMPLETE">looks good</event>')
