"""``sessions prune``: which sessions go, never a running one, each whole or not at all."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from loop.engine.session_dir import SessionLock
from loop.errors import UsageError
from loop.session.prune import Candidate, parse_age, prune, select
from loop.session.store import list_sessions
from tests.commands.test_cli import loop

DAY = 86400.0


def _session(root: Path, sid: str, age_days: float, now: float) -> Path:
    folder = root / sid
    (folder / "iterations/000001").mkdir(parents=True)
    (folder / "iterations/000001/events.jsonl").write_text("{}\n", encoding="utf-8")
    journal = folder / "journal.jsonl"
    journal.write_text("{}\n", encoding="utf-8")
    os.utime(journal, (now - age_days * DAY, now - age_days * DAY))
    return folder


def test_select_keeps_the_newest_and_takes_the_old_ones() -> None:
    """--keep N spares the N most recent; --older-than takes only what is older; both
    combine."""
    now = 100 * DAY
    found = [Candidate(f"s{d}", now - d * DAY) for d in (1, 3, 10, 30)]
    ids = lambda cs: [c.session_id for c in cs]  # noqa: E731
    assert ids(select(found, now=now, older_than=7 * DAY, keep=None)) == ["s30", "s10"]
    assert ids(select(found, now=now, older_than=None, keep=3)) == ["s30"]
    assert ids(select(found, now=now, older_than=2 * DAY, keep=1)) == ["s30", "s10", "s3"]
    assert ids(select(found, now=now, older_than=None, keep=0)) == ["s30", "s10", "s3", "s1"]
    assert parse_age("7d") == 7 * DAY and parse_age("90s") == 90 and parse_age("2w") == 14 * DAY
    with pytest.raises(UsageError):
        parse_age("7 days")


def test_a_running_session_is_never_removed(tmp_path: Path) -> None:
    """A session whose run lock is held stays, however old; the others go whole."""
    now = time.time()
    running = _session(tmp_path, "old-running", 30, now)
    _session(tmp_path, "old-done", 20, now)
    _session(tmp_path, "fresh", 0, now)
    lock = SessionLock(running / "lock")
    lock.acquire()
    try:
        dry = prune(tmp_path, now=now, older_than=7 * DAY, keep=None, dry_run=True)
        assert [c.session_id for c in dry.removed] == ["old-done"]
        assert dry.running == ["old-running"]
        assert list_sessions(tmp_path) == ["old-running", "old-done", "fresh"]
        done = prune(tmp_path, now=now, older_than=7 * DAY, keep=None)
    finally:
        lock.release()
    assert [c.session_id for c in done.removed] == ["old-done"] and done.running == ["old-running"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "old-running"]
    assert (running / "journal.jsonl").is_file()


def test_a_session_that_cannot_be_moved_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename is the one step that removes a session: if it fails, every file stays."""
    now = time.time()
    folder = _session(tmp_path, "old", 30, now)

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "rename", refuse)
    result = prune(tmp_path, now=now, older_than=DAY, keep=None)
    assert result.removed == [] and result.failed == {"old": "Permission denied"}
    assert (folder / "journal.jsonl").is_file()
    assert (folder / "iterations/000001/events.jsonl").is_file()


def test_a_prune_cut_short_leaves_a_hidden_folder_the_next_one_finishes(tmp_path: Path) -> None:
    """After the rename nothing lists the session; a deletion cut short is finished later."""
    now = time.time()
    _session(tmp_path, "keep-me", 0, now)
    leftover = _session(tmp_path, ".pruning-old-0a1b2c3d", 30, now)
    assert list_sessions(tmp_path) == ["keep-me"]
    prune(tmp_path, now=now, older_than=DAY, keep=None)
    assert not leftover.exists() and list_sessions(tmp_path) == ["keep-me"]


def test_sessions_prune_from_the_command_line(tmp_path: Path) -> None:
    """Real runs, then `sessions prune --keep 1`: dry run first, then the real thing."""
    for sid in ("first", "second"):
        assert loop("run", "-q", "--session-id", sid, cwd=tmp_path).returncode == 0
    dry = loop("sessions", "prune", "--keep", "1", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].startswith("would remove first  (last written ")
    assert (tmp_path / ".loop/sessions/first/journal.jsonl").is_file()
    res = loop("sessions", "prune", "--keep", "1", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["removed"], out["running"], out["kept"]) == (["first"], [], 1)
    assert not (tmp_path / ".loop/sessions/first").exists()
    assert json.loads(loop("status", "--json", cwd=tmp_path).stdout)["session_id"] == "second"
    bare = loop("sessions", "prune", cwd=tmp_path)
    assert bare.returncode == 2
    assert bare.stderr.strip() == (
        "error: sessions prune: give --older-than AGE, --keep N, or both"
    )
