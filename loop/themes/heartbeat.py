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

The current ID is a pointer the heartbeat derives, not a record: when the file holds
something the next ID cannot follow (not UTF-8, not 14 digits, not a date and time, or
``99991231235959``, after which no ID exists), the heartbeat replaces it with the clock's
ID and logs a warning naming the file and what it held. The tools that only read it
keep refusing it (``invalid_heartbeat``) until then.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from loop import _fs, _json
from loop._log import get_logger
from loop.errors import StoreError, ToolError
from loop.themes.naming import is_heartbeat_id
from loop.themes.workspace import Workspace

__all__ = ["FORMAT", "next_heartbeat_id", "read_heartbeat_id", "write_heartbeat"]

log = get_logger(__name__)

FORMAT = "%Y%m%d%H%M%S"


def next_heartbeat_id(now: datetime, last: str | None) -> str:
    """The ID for a heartbeat at ``now``: the clock's, or ``last`` + 1 s if not later.

    Raises:
        ValueError: ``last`` is later than the clock and no ID can follow it: it is not a
            date and time, or it is the last second ``YYYYMMDDHHMMSS`` can hold.
    """
    candidate = now.strftime(FORMAT)
    if last is None or candidate > last:
        return candidate
    try:
        return _following(last)
    except ValueError as exc:
        raise ValueError(f"heartbeat ID {last[:40]!r}: {exc}") from exc


def _following(last: str) -> str:
    """``last`` + 1 s; a ValueError says why there is no such ID."""
    try:
        following = datetime.strptime(last, FORMAT) + timedelta(seconds=1)
    except ValueError as exc:
        raise ValueError("not a date and time (YYYYMMDDHHMMSS)") from exc
    except OverflowError as exc:
        raise ValueError("the last ID there is (no later second exists)") from exc
    return following.strftime(FORMAT)


def _cannot_follow(last: str, now: datetime) -> str | None:
    """Why a heartbeat at ``now`` cannot follow ``last``; ``None`` when it can."""
    if not is_heartbeat_id(last):
        return "not a 14-digit heartbeat ID"
    if now.strftime(FORMAT) > last:
        return None
    try:
        _following(last)
    except ValueError as exc:
        return str(exc)
    return None


def _read_raw(ws: Workspace) -> str | None:
    try:
        return _fs.read_text(ws.heartbeat_file, root=ws.trusted).strip()
    except FileNotFoundError:
        return None


def _current_to_follow(ws: Workspace, now: datetime) -> str | None:
    """The current ID, for the writer: ``None`` when there is none, or when the file
    holds something no ID can follow (the new heartbeat replaces it: a warning says so).

    Raises:
        PathError: a link on the way or at the file; StoreError: not a regular file, or
            it cannot be read (the message names it).
    """
    path = ws.heartbeat_file
    try:
        raw = _fs.read_bytes(path, root=ws.trusted)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    try:
        last = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        why: str | None = f"not UTF-8 text ({exc.reason})"
        found: str | bytes = raw[:40]
    else:
        why = _cannot_follow(last, now)
        found = last[:40]
        if why is None:
            return last
    log.warning(
        "heartbeat file replaced: the next heartbeat cannot follow what it held",
        file=str(path),
        found=found,
        reason=why,
    )
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
    """Write a new heartbeat ID atomically, after the current one; return it.

    The ID is strictly after the current one, unless the current file holds something
    no ID can follow: the clock's ID then replaces it, with a warning (see the module's
    docstring). ``call``: the session call making it; the same call made again counts
    from the ID before the one it wrote.

    Raises:
        PathError: a link at the file or on the way (never followed, never replaced).
        StoreError: the file is not a regular file or cannot be read or written.
    """
    now = now or datetime.now()
    with ws.locked():
        last = _current_to_follow(ws, now)
        if call is not None:
            again, previous = _made_by(ws, call, last)
            if again:  # an ID kept in heartbeat_call.json: followed only if it can be
                ok = previous is not None and _cannot_follow(previous, now) is None
                last = previous if ok else None
        new_id = next_heartbeat_id(now, last)
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
