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

    def refuse(src: object, dst: object, **kwargs: object) -> None:
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


def _victim(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A folder outside the sessions folder that looks like a session, and its bytes."""
    outside = tmp_path / "outside"
    (outside / "iterations").mkdir(parents=True)
    files = {"journal.jsonl": b"{}\n", "lock": b"4242\n", "iterations/keep.txt": b"mine\n"}
    for name, data in files.items():
        (outside / name).write_bytes(data)
    return outside, files


def _intact(outside: Path, files: dict[str, bytes]) -> None:
    found = sorted(str(p.relative_to(outside)) for p in outside.rglob("*") if p.is_file())
    assert found == sorted(files)
    assert all((outside / name).read_bytes() == data for name, data in files.items())


def test_a_session_folder_that_is_a_link_is_never_entered(tmp_path: Path) -> None:
    """A link planted among the sessions (to an old-looking folder outside) is no session:
    nothing is locked, entered or deleted through it; the victim keeps every byte."""
    now = time.time()
    sessions = tmp_path / "sessions"
    _session(sessions, "old", 30, now)
    outside, files = _victim(tmp_path)
    os.utime(outside / "journal.jsonl", (now - 40 * DAY, now - 40 * DAY))
    (sessions / "planted").symlink_to(outside, target_is_directory=True)
    (sessions / ".pruning-planted-0a1b2c3d").symlink_to(outside, target_is_directory=True)
    result = prune(sessions, now=now, older_than=DAY, keep=None)
    assert [c.session_id for c in result.removed] == ["old"]
    _intact(outside, files)
    assert (sessions / "planted").is_symlink()  # not a session: left alone
    assert not os.path.lexists(sessions / ".pruning-planted-0a1b2c3d")  # the link itself went


def test_a_session_swapped_for_a_link_while_pruning_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session folder is listed, then swapped for a link before it is removed (an
    agent racing the prune): the prune names it as failed and touches nothing outside."""
    import loop.session.prune as prune_module

    now = time.time()
    sessions = tmp_path / "sessions"
    folder = _session(sessions, "old", 30, now)
    outside, files = _victim(tmp_path)
    listed = prune_module.candidates

    def swap_after_listing(sessions_dir: Path, **kwargs: Path | None) -> list[Candidate]:
        found = listed(sessions_dir, **kwargs)
        folder.rename(tmp_path / "moved-away")
        folder.symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(prune_module, "candidates", swap_after_listing)
    result = prune(sessions, now=now, older_than=DAY, keep=None)
    assert result.removed == [] and list(result.failed) == ["old"]
    assert "symbolic link" in result.failed["old"]
    _intact(outside, files)


def test_a_sessions_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """`.loop/sessions` itself planted as a link outside: one-line error, exit 2, and
    the folder outside keeps every byte."""
    outside, files = _victim(tmp_path / "elsewhere")
    inner = outside / "old"
    _session(outside, "old", 30, time.time())
    files |= {
        "old/journal.jsonl": b"{}\n",
        "old/iterations/000001/events.jsonl": b"{}\n",
    }
    project = tmp_path / "project"
    (project / ".loop").mkdir(parents=True)
    (project / ".loop/sessions").symlink_to(outside, target_is_directory=True)
    res = loop("sessions", "prune", "--keep", "0", cwd=project)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "symbolic link" in res.stderr
    assert inner.is_dir()
    _intact(outside, files)
