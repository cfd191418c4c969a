"""A session that ended for good with its recording short of the journal: ``run --resume
ID --record-session FILE`` completes the recording from the journal and runs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.engine.journal import read_journal
from loop.exits import EXIT_LIMIT, EXIT_USAGE
from loop.session.backfill import Held, missing_lines
from tests.commands.helpers import loop

from .test_recorder import lines

# a → b → c: three iterations, then completed
TOML = """
[loop]
prompt = "three steps"
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.a]
triggers = ["task.start"]
publishes = ["b.go"]
backend = { type = "scripted", outputs = ['<event topic="b.go">1</event>'] }

[hats.b]
triggers = ["b.go"]
publishes = ["c.go"]
backend = { type = "scripted", outputs = ['<event topic="c.go">2</event>'] }

[hats.c]
triggers = ["c.go"]
publishes = ["LOOP_COMPLETE"]
backend = { type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">3</event>'] }
"""
RECORD = ("--record-session", "r.jsonl")


def _project(tmp_path: Path) -> Path:
    (tmp_path / "loop.toml").write_text(TOML, encoding="utf-8")
    return tmp_path / ".loop/sessions/s/journal.jsonl"


def _replays_whole(folder: Path) -> None:
    replayed = loop("replay", "r.jsonl", cwd=folder)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "completed" in replayed.stdout and "prefix only" not in replayed.stdout


def _completes(folder: Path, journal: Path) -> list[dict]:
    """Resume the completed session ``s`` recorded: the recording is completed, nothing
    runs, the journal stays as it was, and the recording replays whole; its lines."""
    before = journal.read_bytes()
    done = loop("run", "--resume", "s", *RECORD, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "session s had already completed; its recording r.jsonl was completed" in done.stdout
    assert "completed after 3 iteration(s)" in done.stdout
    assert journal.read_bytes() == before  # no iteration, no resume record
    _replays_whole(folder)
    return lines(folder / "r.jsonl")


def _shape(data: list[dict]) -> list[tuple]:
    return [
        (d["kind"], d.get("iteration", d.get("resumed_at_iteration", d.get("reason"))))
        for d in data
    ]


@pytest.mark.parametrize("cut", [1, 2])
def test_a_recording_cut_after_the_journal_end_is_completed(tmp_path: Path, cut: int) -> None:
    """The footer (and the last iteration) lost after the journal's session.end: the
    resume adds them from the journal, exit 0, and the replay checks the end too."""
    journal = _project(tmp_path)
    first = loop("run", "-q", "--session-id", "s", *RECORD, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    path = tmp_path / "r.jsonl"
    whole = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(whole[:-cut]))
    data = _completes(tmp_path, journal)
    assert _shape(data) == [
        ("header", None),
        ("iteration", 1),
        ("iteration", 2),
        ("iteration", 3),
        ("footer", "completed"),
    ]
    assert data[-1]["iterations"] == 3 and data[-1]["exit_code"] == 0


def test_a_kill_between_the_journal_end_and_the_footer_is_completed(tmp_path: Path) -> None:
    """A real kill -9 once session.end is journaled: the recording has no footer; the
    resume with the recording completes it instead of refusing a completed session."""
    journal = _project(tmp_path)
    env = {"HATLOOP_CRASH_AT": "session.end:1"}
    killed = loop("run", "-q", "--session-id", "s", *RECORD, cwd=tmp_path, env=env)
    assert killed.returncode == -9, killed.stderr
    assert read_journal(journal).records[-1].kind == "session.end"
    assert "footer" not in [d["kind"] for d in lines(tmp_path / "r.jsonl")]
    data = _completes(tmp_path, journal)
    assert [d["kind"] for d in data][-1] == "footer"
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 2, 3]


def test_a_session_completed_by_an_unrecorded_resume_gets_its_recording_completed(
    tmp_path: Path,
) -> None:
    """Recorded to a limit, then completed by a resume without --record-session: a later
    resume naming the recording adds that run (its resumed marker, override, iterations,
    footer) from the journal, and the recording replays whole."""
    journal = _project(tmp_path)
    first = loop("run", "-q", "--session-id", "s", "--max-iterations", "1", *RECORD, cwd=tmp_path)
    assert first.returncode == EXIT_LIMIT, first.stderr
    unrecorded = loop("run", "-q", "--resume", "s", "--max-iterations", "5", cwd=tmp_path)
    assert unrecorded.returncode == 0, unrecorded.stderr
    data = _completes(tmp_path, journal)
    assert _shape(data) == [
        ("header", None),
        ("iteration", 1),
        ("footer", "max_iterations"),
        ("marker", 1),  # the unrecorded resume, from the journal
        ("override", None),
        ("iteration", 2),
        ("iteration", 3),
        ("footer", "completed"),
    ]
    assert "not recorded" in data[3]["message"]


def test_a_whole_recording_of_a_completed_session_is_still_refused(tmp_path: Path) -> None:
    """Nothing to complete: exit 2, the refusal says the recording is complete, and
    neither the recording nor the journal changes."""
    journal = _project(tmp_path)
    assert loop("run", "-q", "--session-id", "s", *RECORD, cwd=tmp_path).returncode == 0
    before = (tmp_path / "r.jsonl").read_bytes(), journal.read_bytes()
    again = loop("run", "-q", "--resume", "s", *RECORD, cwd=tmp_path)
    assert again.returncode == EXIT_USAGE
    assert "already completed; start a new one (its recording r.jsonl is complete)" in again.stderr
    assert ((tmp_path / "r.jsonl").read_bytes(), journal.read_bytes()) == before
    fresh = loop("run", "-q", "--resume", "s", "--record-session", "new.jsonl", cwd=tmp_path)
    assert fresh.returncode == EXIT_USAGE  # no recording of it to complete: as before
    assert "already completed; start a new one" in fresh.stderr
    assert not (tmp_path / "new.jsonl").exists()


def test_a_capped_recording_with_its_footer_is_left_as_it_is(tmp_path: Path) -> None:
    """A recording its size cap cut short, footer written: what it lacks, its cap left
    out, so it is not completed past its cap; refused, unchanged."""
    _project(tmp_path)
    capped = ("--record-max-bytes", "4096")
    assert loop("run", "-q", "--session-id", "s", *RECORD, *capped, cwd=tmp_path).returncode == 0
    assert [d["kind"] for d in lines(tmp_path / "r.jsonl")][-2:] == ["marker", "footer"]
    before = (tmp_path / "r.jsonl").read_bytes()
    again = loop("run", "-q", "--resume", "s", *RECORD, cwd=tmp_path)
    assert again.returncode == EXIT_USAGE and "is complete" in again.stderr
    assert (tmp_path / "r.jsonl").read_bytes() == before


def test_missing_lines_of_an_ended_session_run_to_its_last_footer(tmp_path: Path) -> None:
    """Pure: for a session that ended, the lines after its last resume count too (the
    resume's marker, its iteration, its footer); for a resumed run they are its own."""
    journal = _project(tmp_path)
    limited = loop("run", "-q", "--session-id", "s", "--max-iterations", "1", cwd=tmp_path)
    assert limited.returncode == EXIT_LIMIT, limited.stderr
    resumed = loop("run", "-q", "--resume", "s", "--max-iterations", "5", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    records = read_journal(journal).records
    held = Held()
    held.add({"kind": "iteration", "iteration": 1})
    ran_on = missing_lines(records, held, "s", False)
    ended = missing_lines(records, held, "s", False, ended=True)
    assert [line.kind for line in ran_on] == ["footer"]  # the first run's end
    assert [line.kind for line in ended] == [
        "footer",
        "marker",
        "override",
        "iteration.end",
        "iteration.end",
        "footer",
    ]
    held.add({"kind": "footer", "ts": records[-1].ts})  # its last end: it lacks nothing
    assert missing_lines(records, held, "s", False, ended=True) == []
