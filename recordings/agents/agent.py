"""A small real agent for the ``command`` backend recording (recordings/command.jsonl).

It reads its prompt on stdin and publishes through both channels: ``python -m loop emit``
(the emit file) and ``<event>`` tags in its output. Its state lives in the session folder
(``$LOOP_SESSION_DIR``), so each recorded run starts from zero. The checker fails its
first run on purpose (exit 3), so the recording also holds a failed iteration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TARGET = 3


def _bump(name: str) -> int:
    path = Path(os.environ["LOOP_SESSION_DIR"]) / f"agent-{name}"
    value = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(value))
    return value


def _read(name: str) -> int:
    path = Path(os.environ["LOOP_SESSION_DIR"]) / f"agent-{name}"
    return int(path.read_text()) if path.exists() else 0


def counter() -> int:
    n = _bump("count")
    payload = json.dumps({"n": n})
    subprocess.run(
        [sys.executable, "-m", "loop", "emit", "count.step", payload, "--json"], check=True
    )
    print(f"Counted to {n}.")
    print(f'<event topic="count.logged">step {n} written</event>')
    return 0


def checker() -> int:
    if _bump("checker-runs") == 1:
        print("flaky check: the checker is not ready yet", file=sys.stderr)
        return 3
    n = _read("count")
    subprocess.run([sys.executable, "-m", "loop", "emit", "check.seen", str(n)], check=True)
    if n >= TARGET:
        print(f'Checked {n}: done.\n<event topic="LOOP_COMPLETE">counted to {n}</event>')
    else:
        print(f'Checked {n}: go on.\n<event topic="check.passed">{n} is right</event>')
    return 0


def main() -> int:
    sys.stdin.read()
    hat = os.environ["LOOP_HAT"]
    return counter() if hat == "counter" else checker()


if __name__ == "__main__":
    sys.exit(main())
