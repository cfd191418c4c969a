"""The loop's lifecycle events on the bus, and their typed payloads.

============================  =============================================================
topic                         payload
============================  =============================================================
``loop.started``              :class:`SessionStarted` (a new session)
``loop.resumed``              :class:`SessionStarted` (``resumed_at`` set)
``loop.iteration.done``       the committed :class:`~loop.records.IterationEnd` record
``loop.terminated``           :class:`SessionEnded`
============================  =============================================================

Subscribers (the progress display, the recorder, replay's comparer) read these instead
of the journal; extensions that must see each commit first use
:meth:`~loop.extensions.Extension.committed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loop.records import SessionEnd, SessionStart

__all__ = [
    "ITERATION_DONE",
    "LOOP_RESUMED",
    "LOOP_STARTED",
    "LOOP_TERMINATED",
    "SessionEnded",
    "SessionStarted",
]

LOOP_STARTED = "loop.started"
LOOP_RESUMED = "loop.resumed"
ITERATION_DONE = "loop.iteration.done"
LOOP_TERMINATED = "loop.terminated"


@dataclass(frozen=True, slots=True)
class SessionStarted:
    """A session starts (or resumes) running: what it runs, and where its files are.

    ``start`` describes the configuration this process runs (on a resume it may differ
    from the one the journal's own ``session.start`` recorded).
    """

    start: SessionStart
    session_dir: Path
    resumed_at: int | None = None  # the last committed iteration, when resumed


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """A session stopped running: the journal's ``session.end`` and the exit code."""

    end: SessionEnd
    exit_code: int
