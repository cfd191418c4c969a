"""A small real agent for the parallel-hats recording (recordings/wave.jsonl).

The coordinator fans out three perspectives with ``python -m loop emit --payloads``; each
reviewer marks its start in the session folder (``$LOOP_SESSION_DIR``) and waits until
the three have started (so the recording holds three activations that ran together),
then publishes its findings; the synthesizer checks it has the three and completes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    """Act as the hat in ``LOOP_HAT``."""
    prompt = sys.stdin.read()
    hat = os.environ["LOOP_HAT"]
    python = os.environ.get("LOOP_PYTHON", sys.executable)
    if hat == "coordinator":
        perspectives = ["security", "performance", "docs"]
        emit = [python, "-m", "loop", "emit", "review.perspective", "--payloads", *perspectives]
        return subprocess.run(emit, check=False).returncode
    if hat == "reviewer":
        found = re.search(r"\b(security|performance|docs)\b", prompt.split("Events that")[-1])
        if found is None:
            sys.exit("no perspective in the prompt")
        started = Path(os.environ["LOOP_SESSION_DIR"]) / "reviewers"
        started.mkdir(exist_ok=True)
        (started / found[1]).touch()
        deadline = time.monotonic() + 60
        while len(list(started.iterdir())) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        print(f'<event topic="review.done">{found[1]}: looks fine</event>')
        return 0
    reviews = sorted(set(re.findall(r"(security|performance|docs): looks fine", prompt)))
    if len(reviews) != 3:
        sys.exit(f"expected three reviews, got {reviews}")
    print(f'<event topic="LOOP_COMPLETE">{", ".join(reviews)} reviewed</event>')
    return 0


if __name__ == "__main__":
    sys.exit(main())
