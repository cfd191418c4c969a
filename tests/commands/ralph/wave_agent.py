"""A stand-in agent for Ralph's converted ``wave-review`` preset (a ``command`` backend).

The coordinator runs the fan-out command its converted instructions hold (``ralph wave
emit`` became ``"$LOOP_PYTHON" -m loop emit ... --payloads ...``), as an agent would.
Each reviewer writes ``started/<iteration>`` and waits until three reviewers have
started (which proves they run at once, without timing), then publishes its findings.
The synthesizer checks it got the three and publishes ``review.complete``.
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
    python = os.environ["LOOP_PYTHON"]
    Path("prompts").mkdir(exist_ok=True)
    Path("prompts", f"{int(os.environ['LOOP_ITERATION']):03d}-{hat}.txt").write_text(prompt)
    if hat == "coordinator":
        block = re.search(r"```bash\n(.*?)```", prompt, re.DOTALL)
        assert block and "--payloads" in block[1], "the converted fan-out command"
        return subprocess.run(["bash", "-c", block[1]], check=False).returncode
    if hat == "reviewer":
        role = re.search(r"ROLE: ([\w ]+)\.", prompt)
        assert role, "the reviewer's payload is in its prompt"
        started = Path("started")
        started.mkdir(exist_ok=True)
        (started / os.environ["LOOP_ITERATION"]).touch()
        deadline = time.monotonic() + 120  # a safety net: the three start together
        while len(list(started.iterdir())) < 3:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.01)
        findings = f"## {role[1]}: no critical issues"
        emit = [python, "-m", "loop", "emit", "review.done", findings]
        return subprocess.run(emit, check=False).returncode
    found = re.findall(r"## ([\w ]+): no critical issues", prompt)
    assert len(found) == 3, prompt
    Path("review-report.md").write_text("\n".join(found) + "\n")
    emit = [python, "-m", "loop", "emit", "review.complete", "3 reviews"]
    return subprocess.run(emit, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
