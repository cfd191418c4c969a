"""A stand-in agent for the converted Ralph presets (a ``command`` backend).

It keeps the prompt it was given (``prompts/<iteration>.txt``) and publishes one event
with ``loop emit``, as the converted instructions tell an agent to. It is hasty once:
the first hat that may publish the completion event publishes it at once (the loop
must refuse it while required events are missing). Then: the completion event once
the hat may publish it and every required event was seen, else the first of the hat's
topics not published yet that moves the work on (not a rejection, failure, block or
follow-up), else its first topic.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from loop.config import load_config

BACKWARDS = re.compile(r"\.(rejected|failed|blocked|followup)$")


def main() -> int:
    """Publish this hat's next event."""
    prompt = sys.stdin.read()
    iteration = os.environ["LOOP_ITERATION"]
    Path("prompts").mkdir(exist_ok=True)
    Path("prompts", f"{int(iteration):03d}.txt").write_text(prompt, encoding="utf-8")
    config = load_config(Path("loop.toml"), overrides={"prompt": "-"})
    hat = config.hats[os.environ["LOOP_HAT"]]
    seen_file = Path("seen.txt")
    seen = set(seen_file.read_text(encoding="utf-8").split()) if seen_file.exists() else set()
    completion = config.loop.completion_event
    hasty = Path("hasty")
    if completion in hat.publishes and not hasty.exists():
        hasty.touch()
        topic = completion
    elif completion in hat.publishes and set(config.loop.required_events) <= seen:
        topic = completion
    else:
        onwards = [t for t in hat.publishes if t != completion and not BACKWARDS.search(t)]
        topic = next((t for t in onwards if t not in seen), (onwards or hat.publishes)[0])
    with seen_file.open("a", encoding="utf-8") as fh:
        fh.write(topic + "\n")
    emit = [os.environ["LOOP_PYTHON"], "-m", "loop", "emit", topic, f"done by {hat.name}"]
    return subprocess.run(emit, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
