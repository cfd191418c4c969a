"""Heartbeat IDs: unique per beat, atomic, read from the stats file (never the clock)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from loop.errors import PathError, StoreError, ToolError
from loop.themes import Workspace, next_heartbeat_id, read_heartbeat_id, write_heartbeat

NOW = datetime(2025, 8, 1, 23, 59, 59)


def test_next_id_uses_clock_when_later() -> None:
    """A later clock gives the clock's ID."""
    assert next_heartbeat_id(NOW, "20250801000000") == "20250801235959"


def test_next_id_bumps_when_same_second() -> None:
    """A beat in the same second (or a clock that went back) gets last + 1 s."""
    assert next_heartbeat_id(NOW, "20250801235959") == "20250802000000"
    assert next_heartbeat_id(NOW, "20300101000000") == "20300101000001"


def test_write_is_unique_within_one_second(tmp_path: Path) -> None:
    """Five beats at the same clock second get five increasing IDs."""
    ws = Workspace(tmp_path)
    ids = [write_heartbeat(ws, NOW) for _ in range(5)]
    assert ids == sorted(set(ids))
    assert len(ids) == 5
    assert read_heartbeat_id(ws) == ids[-1]
    assert (tmp_path / "stats" / "current_heartbeat_id.txt").read_text() == ids[-1] + "\n"


def test_the_same_session_call_again_counts_from_the_id_before_its_own(tmp_path: Path) -> None:
    """An iteration run again after kill -9 makes its heartbeat call again: it gets the ID
    a replay of the session gets (from the time, after the previous iteration's ID), not
    one bumped past the interrupted attempt's. Another call still strictly increases."""
    ws = Workspace(tmp_path)
    previous = write_heartbeat(ws, NOW, call="s/4/m1")
    killed = write_heartbeat(ws, NOW, call="s/5/m1")  # the attempt that was killed
    assert killed == "20250802000000"
    assert write_heartbeat(ws, NOW, call="s/5/m1") == killed  # the re-run, same time
    assert next_heartbeat_id(NOW, previous) == killed  # what the replay computes
    later = datetime(2025, 8, 2, 0, 0, 30)
    assert write_heartbeat(ws, later, call="s/5/m1") == "20250802000030"  # a later re-run
    assert write_heartbeat(ws, later, call="s/6/m1") == "20250802000031"
    assert write_heartbeat(ws, later) == "20250802000032"  # outside a session: as ever
    assert write_heartbeat(ws, later, call="s/6/m1") == "20250802000033"  # not its ID now


def test_missing_heartbeat_is_a_clear_error(tmp_path: Path) -> None:
    """Without the stats file the tools say that no heartbeat is running."""
    with pytest.raises(ToolError) as info:
        read_heartbeat_id(Workspace(tmp_path))
    assert info.value.code == "no_heartbeat"
    assert "no heartbeat is running" in info.value.message


@pytest.mark.parametrize(
    ("content", "found", "reason"),
    [
        (b"2025-08-01\n", "2025-08-01", "not a 14-digit heartbeat ID"),
        (b"garbage\n", "garbage", "not a 14-digit heartbeat ID"),
        ("٢٠٢٥٠٨٠١١٢٠٠٠٠\n".encode(), "٢٠٢٥٠٨٠١١٢٠٠٠٠", "not a 14-digit heartbeat ID"),
        (b"\xff\xfe\n", b"\xff\xfe\n", "not UTF-8 text"),
    ],
)
def test_a_malformed_heartbeat_is_refused_by_readers_and_replaced_by_the_writer(
    tmp_path: Path, content: bytes, found: str | bytes, reason: str
) -> None:
    """The tools refuse a file that holds no heartbeat ID; the next heartbeat replaces it
    with the clock's ID (the file is a pointer the heartbeat derives) and logs a warning
    naming the file and what it held, so the loop recovers by itself."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    ws.heartbeat_file.write_bytes(content)
    with pytest.raises((ToolError, StoreError)) as info:
        read_heartbeat_id(ws)
    assert info.value.code == ("store_error" if isinstance(found, bytes) else "invalid_heartbeat")
    with capture_logs() as logs:
        new_id = write_heartbeat(ws, NOW)
    assert new_id == "20250801235959"
    assert read_heartbeat_id(ws) == new_id
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["file"] == str(ws.heartbeat_file)
    assert warning["found"] == found and warning["reason"].startswith(reason)
    assert write_heartbeat(ws, NOW) == "20250802000000"  # from then on, strictly after


@pytest.mark.parametrize(
    ("held", "reason"),
    [
        ("99991231235959", "the last ID there is"),
        ("20251399000000", "not a date and time"),
    ],
)
def test_an_id_that_no_id_can_follow_is_replaced_not_a_crash(
    tmp_path: Path, held: str, reason: str
) -> None:
    """An ID later than the clock that has no next second (the last one there is, or 14
    digits that are no date): the tools still read it, the writer replaces it with the
    clock's ID and a warning instead of crashing (OverflowError, ValueError)."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    ws.heartbeat_file.write_text(held + "\n")
    assert read_heartbeat_id(ws) == held
    with pytest.raises(ValueError, match=reason):
        next_heartbeat_id(NOW, held)
    with capture_logs() as logs:
        assert write_heartbeat(ws, NOW) == "20250801235959"
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["found"] == held and warning["reason"].startswith(reason)


def test_a_readable_id_after_the_clock_is_still_followed(tmp_path: Path) -> None:
    """Monotonic where the current ID can be followed: a far future ID gets + 1 s."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    ws.heartbeat_file.write_text("99991231235958\n")
    with capture_logs() as logs:
        assert write_heartbeat(ws, NOW) == "99991231235959"
    assert logs == []


def test_a_session_call_made_again_after_replacing_a_bad_file_gets_the_same_id(
    tmp_path: Path,
) -> None:
    """The call that replaced an unreadable file, made again after kill -9, gets the ID it
    wrote (counted from no previous ID), as a replay does."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    ws.heartbeat_file.write_text("garbage\n")
    with capture_logs():
        first = write_heartbeat(ws, NOW, call="s/3/m1")
    assert write_heartbeat(ws, NOW, call="s/3/m1") == first == "20250801235959"


def test_a_link_at_the_heartbeat_file_is_still_refused(tmp_path: Path) -> None:
    """Only content is replaced: a link planted at the file is neither followed nor replaced."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    ws.heartbeat_file.symlink_to(victim)
    with pytest.raises(PathError, match="symbolic link"):
        write_heartbeat(ws, NOW)
    assert ws.heartbeat_file.is_symlink() and victim.read_text() == "keep\n"
