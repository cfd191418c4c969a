"""The heartbeat ID: written at every iteration start, read by the theme tools.

The ID is ``YYYYMMDDHHMMSS`` in local time, as the original ``heartbeat.sh`` wrote it.
Unlike the original, two heartbeats in the same second still get distinct IDs: when
the clock gives an ID that is not after the last one, the last one plus one second is
used. The tools read the ID from ``stats/current_heartbeat_id.txt`` (never the clock),
so "one theme operation per heartbeat" holds however fast iterations run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from loop import _fs
from loop.errors import StoreError, ToolError
from loop.themes.naming import is_heartbeat_id
from loop.themes.workspace import Workspace

__all__ = ["FORMAT", "next_heartbeat_id", "read_heartbeat_id", "write_heartbeat"]

FORMAT = "%Y%m%d%H%M%S"


def next_heartbeat_id(now: datetime, last: str | None) -> str:
    """The ID for a heartbeat at ``now``: the clock's, or ``last`` + 1 s if not later."""
    candidate = now.strftime(FORMAT)
    if last is None or candidate > last:
        return candidate
    return (datetime.strptime(last, FORMAT) + timedelta(seconds=1)).strftime(FORMAT)


def _read_raw(ws: Workspace) -> str | None:
    try:
        return _fs.read_text(ws.heartbeat_file, root=ws.trusted).strip()
    except FileNotFoundError:
        return None


def write_heartbeat(ws: Workspace, now: datetime | None = None) -> str:
    """Write a new, strictly increasing heartbeat ID atomically; return it.

    Raises:
        StoreError: the current file holds something that is not a heartbeat ID.
    """
    with ws.locked():
        last = _read_raw(ws)
        if last is not None and not is_heartbeat_id(last):
            raise StoreError(f"not a 14-digit heartbeat ID: {last[:40]!r}", file=ws.heartbeat_file)
        new_id = next_heartbeat_id(now or datetime.now(), last)
        # Not fsynced: the next ID is derived from this one or the clock, and the history
        # files that the cooldown checks are written durably by the tools themselves.
        _fs.atomic_write(ws.heartbeat_file, new_id + "\n", root=ws.trusted, durable=False)
    return new_id


def read_heartbeat_id(ws: Workspace) -> str:
    """The current heartbeat ID, for the tools.

    Raises:
        ToolError: ``no_heartbeat`` when the file is missing, ``invalid_heartbeat`` when
            it does not hold 14 digits.
    """
    raw = _read_raw(ws)
    if raw is None:
        raise ToolError(
            "no_heartbeat",
            f"no heartbeat is running: {ws.rel(ws.heartbeat_file)} does not exist; theme "
            "operations run inside the loop (each iteration is a heartbeat) or after "
            "`python -m loop theme heartbeat`",
        )
    if not is_heartbeat_id(raw):
        raise ToolError(
            "invalid_heartbeat",
            f"{ws.rel(ws.heartbeat_file)} does not hold a 14-digit heartbeat ID "
            f"(found {raw[:40]!r}); let the loop write the next heartbeat",
        )
    return raw
