"""Secrets are kept out of the session journal as they are out of the recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.commands.helpers import ENV, loop

SECRET = "s3cr3t-value-0123456789"
CONFIG_SECRET = "from-the-config-987654"

TOML = f"""\
[loop]
prompt = "the key is {SECRET}"
max_iterations = 2

[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.leaky]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]

[hats.leaky.backend]
type = "command"
command = ["sh", "-c", '''
cat; echo "$SERVICE_TOKEN"; echo "<event topic='LOOP_COMPLETE'>$MY_API_KEY</event>"''']
env = {{ SERVICE_TOKEN = "{CONFIG_SECRET}" }}
"""


def test_the_journal_redacts_what_the_recording_redacts(tmp_path: Path) -> None:
    """A secret-looking variable's value, and a backend ``env`` table's secret, in the
    prompt, the output and an event's payload: neither file holds them in clear."""
    (tmp_path / "loop.toml").write_text(TOML, encoding="utf-8")
    env = {**ENV, "MY_API_KEY": SECRET}
    res = subprocess.run(
        [sys.executable, "-m", "loop", "run", "-q", "--record-session", "rec.jsonl"],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    journal = next((tmp_path / ".loop/sessions").glob("*/journal.jsonl")).read_text("utf-8")
    recording = (tmp_path / "rec.jsonl").read_text(encoding="utf-8")
    for text in (journal, recording):
        assert SECRET not in text and CONFIG_SECRET not in text
        assert "[redacted:MY_API_KEY]" in text and "[redacted:SERVICE_TOKEN]" in text
    # the redacted journal still reads back: status and show derive the session from it
    assert '"completed"' in loop("status", "--json", cwd=tmp_path).stdout
