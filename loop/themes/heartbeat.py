"""The heartbeat ID: written at every iteration start, read by the theme tools.

The ID is ``YYYYMMDDHHMMSS`` in local time, as the original ``heartbeat.sh`` wrote it.
Unlike the original, two heartbeats in the same second still get distinct IDs: when
the clock gives an ID that is not after the last one, the last one plus one second is
used. The tools read the ID from ``stats/current_heartbeat_id.txt`` (never the clock),
so "one theme operation per heartbeat" holds however fast iterations run.

Inside a loop session the heartbeat is a call of the iteration (its ``call`` key is the
same when an interrupted iteration runs again). The call that wrote the current ID is
kept in ``stats/heartbeat_call.json`` with the ID before it: the same call made again
(the re-run after a ``kill -9``) counts from that earlier ID, as if the interrupted
attempt had not written, so the re-run gets the ID a replay of the session gets.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from loop import _fs, _json
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


def _made_by(ws: Workspace, call: str, current: str | None) -> tuple[bool, str | None]:
    """Whether ``call`` wrote the ``current`` ID, and the ID before it if so."""
    try:
        data = _json.loads(_fs.read_bytes(ws.heartbeat_call_file, root=ws.trusted))
    except (FileNotFoundError, ValueError):
        return False, None
    if not isinstance(data, dict) or data.get("call") != call or data.get("id") != current:
        return False, None
    previous = data.get("previous")
    return True, previous if isinstance(previous, str) and is_heartbeat_id(previous) else None


def write_heartbeat(ws: Workspace, now: datetime | None = None, call: str | None = None) -> str:
    """Write a new, strictly increasing heartbeat ID atomically; return it.

    ``call``: the session call making it (see the module's docstring); the same call
    made again counts from the ID before the one it wrote.

    Raises:
        StoreError: the current file holds something that is not a heartbeat ID.
    """
    with ws.locked():
        last = _read_raw(ws)
        if last is not None and not is_heartbeat_id(last):
            raise StoreError(f"not a 14-digit heartbeat ID: {last[:40]!r}", file=ws.heartbeat_file)
        if call is not None:
            again, previous = _made_by(ws, call, last)
            if again:
                last = previous
        new_id = next_heartbeat_id(now or datetime.now(), last)
        # Not fsynced: the next ID is derived from this one or the clock, and the history
        # files that the cooldown checks are written durably by the tools themselves.
        if call is not None:  # first: a crash between the two writes leaves it unmatched
            made = {"call": call, "previous": last, "id": new_id}
            _fs.atomic_write(
                ws.heartbeat_call_file, _json.dumps_line(made), root=ws.trusted, durable=False
            )
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
