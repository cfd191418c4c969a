"""Completing the recording of a session that has ended for good, from its journal.

A session that completed or was cancelled is never resumed, so nothing would ever add to
its recording: a ``kill -9`` between the journal's ``session.end`` and the recording's
footer, or a last run without ``--record-session``, would leave it a prefix for good.
``run --resume ID --record-session FILE`` on such a session completes FILE instead: the
lines it lacks, its last footer included, as a resume backfills them
(:func:`loop.session.backfill.missing_lines`, written by
:meth:`loop.session.recorder.Recorder.complete`). No iteration runs, and the journal is
left as it is.
"""

from __future__ import annotations

from loop._fs import stat_nofollow
from loop.engine.journal import read_journal
from loop.engine.progress import RunSummary
from loop.engine.session_dir import SessionLock, SessionPaths
from loop.engine.state import RouteContext, fold
from loop.errors import LoopError, SessionError
from loop.exits import REASONS_FINAL
from loop.records import SessionStart
from loop.session.recorder import Recorder

__all__ = ["complete_recording"]


def complete_recording(
    paths: SessionPaths, recorder: Recorder, *, parallel: bool
) -> RunSummary | None:
    """Complete ``recorder``'s file from the journal of the session at ``paths``, when
    that session has ended for good; its summary, noting what was done.

    ``parallel``: the session's hats may run at once (its recording has ``start`` lines).

    Returns:
        The session's summary (its own reason and exit code), or ``None`` when it has not
        ended for good, or its journal cannot be read: the run resumes it, or says why.

    Raises:
        SessionError: another run holds the session; or it has ended for good and the
            file lacks nothing of its journal, or holds no recording of it.
        InputError: the recording cannot be read or written.
    """
    if stat_nofollow(paths.journal, root=paths.trusted) is None:
        return None
    lock = SessionLock(paths.lock, root=paths.trusted)
    lock.acquire()  # no run writes the journal meanwhile
    try:
        try:
            records = read_journal(paths.journal, root=paths.trusted).records
        except LoopError:
            return None
        start = records[0] if records else None
        if not isinstance(start, SessionStart):
            return None
        state = fold(records, RouteContext.from_start(start))
        reason = state.termination
        if reason not in REASONS_FINAL:
            return None
        added = recorder.complete(records, start.session_id, parallel=parallel)
    finally:
        lock.release()
    sid = start.session_id
    if added is None:
        raise SessionError(f"session {sid} already {reason}; start a new one")
    if added == 0:
        raise SessionError(
            f"session {sid} already {reason}; start a new one (its recording "
            f"{recorder.path} is complete)"
        )
    note = (
        f"session {sid} had already {reason}; its recording {recorder.path} was completed "
        f"from the journal ({added} record(s) added, no iteration run)"
    )
    return RunSummary.of(
        state,
        reason,
        session_id=sid,
        session_dir=str(paths.dir),
        elapsed=state.elapsed,
        resumed=False,
        notes=[note],
    )
