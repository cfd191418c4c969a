"""Heartbeat IDs: unique per beat, atomic, read from the stats file (never the clock)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from loop.errors import StoreError, ToolError
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


def test_malformed_heartbeat(tmp_path: Path) -> None:
    """A file that is not 14 digits is refused by readers and by the writer."""
    ws = Workspace(tmp_path)
    ws.stats.mkdir()
    ws.heartbeat_file.write_text("2025-08-01\n")
    with pytest.raises(ToolError) as info:
        read_heartbeat_id(ws)
    assert info.value.code == "invalid_heartbeat"
    with pytest.raises(StoreError, match=r"current_heartbeat_id\.txt"):
        write_heartbeat(ws, NOW)
