"""A session's runtime, as the engine counts it, from its journal's records.

The engine's clock runs while a process runs the session: from 0 at its
``session.start``, and on a resume from the runtime the session had when it stopped
(its last ``session.end``'s, or its last commit's if that is later). Records carry the
wall-clock time they were written (``ts``); :class:`RunClock` folds the records in
order and says where such a time falls on the session's runtime, so a record without
an ``elapsed`` of its own (an iteration's start, a wait) takes its place on the
timeline, and :func:`status_elapsed` says a session's runtime as ``status`` and the
views report it.
"""

from __future__ import annotations

from typing import Literal

from loop.records import IterationEnd, JournalRecord, Resume, SessionEnd, SessionStart

__all__ = ["ElapsedAsOf", "RunClock", "status_elapsed"]

# What a session's ``elapsed`` is as of: its end (its summary's figure), now (a running
# session's runtime so far), or its last commit (a run killed without an end)
ElapsedAsOf = Literal["end", "now", "last_commit"]


class RunClock:
    """The runtime of a session at each wall-clock time, as its records say so far.

    Feed it the journal's records in order (:meth:`take`); :meth:`at` places a time of
    the run in progress on the session's runtime.
    """

    __slots__ = ("base", "carried", "end", "since")

    def __init__(self) -> None:
        self.carried = 0.0  # the runtime committed or ended so far (a resume goes on from it)
        self.base = 0.0  # the runtime when the current run started
        self.since: float | None = None  # the current run's start (epoch seconds)
        self.end: SessionEnd | None = None  # the current run's end, once written

    def take(self, record: JournalRecord) -> None:
        """Fold one record."""
        match record:
            case IterationEnd():
                self.carried = max(self.carried, record.elapsed)
            case SessionStart():
                self.base, self.since, self.end = 0.0, record.ts, None
            case Resume():
                self.base, self.since, self.end = self.carried, record.ts, None
            case SessionEnd():
                self.carried, self.end = max(self.carried, record.elapsed), record

    def at(self, ts: float) -> float | None:
        """Seconds into the session at ``ts`` (epoch seconds), a time of the current run;
        ``None`` before any start record."""
        if self.since is None:
            return None
        return self.base + max(0.0, ts - self.since)

    def elapsed(self, *, running: bool, now: float) -> tuple[float, ElapsedAsOf]:
        """The session's runtime, and as of when: see :func:`status_elapsed`."""
        if self.end is not None:
            return self.end.elapsed, "end"
        so_far = self.at(now) if running else None
        if so_far is not None:
            return max(self.carried, so_far), "now"
        return self.carried, "last_commit"


def status_elapsed(
    records: list[JournalRecord], *, running: bool, now: float
) -> tuple[float, ElapsedAsOf]:
    """A session's runtime, and as of when: its end's (what the run's summary and ``show``
    say: the time after the last commit counts, an interrupt's included); a running
    one's so far (its run goes on, as the engine's does, from the runtime before its
    resume, from its ``session.start`` or ``resume`` record's time); else the last
    commit's (a run killed without an end record: when it died is not known).

    The runtime before a resume is the last ``session.end``'s, or the last commit's if
    that is later (a run killed after a resume left no end)."""
    clock = RunClock()
    for record in records:
        clock.take(record)
    return clock.elapsed(running=running, now=now)
