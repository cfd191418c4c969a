"""The loop's lifecycle events on the bus, and their typed payloads.

============================  =============================================================
topic                         payload
============================  =============================================================
``loop.started``              :class:`SessionStarted` (a new session)
``loop.resumed``              :class:`SessionStarted` (``resumed_at`` set)
``loop.iteration.started``    :class:`IterationStarted` (its hat is about to run)
``loop.iteration.done``       the committed :class:`~loop.records.IterationEnd` record
``loop.waiting``              :class:`Waiting` (the loop waits before it goes on: a rate
                              or usage limit, with its journaled :class:`~loop.records.Wait`)
``loop.terminated``           :class:`SessionEnded`
============================  =============================================================

Subscribers (the progress display, the recorder, replay's comparer) read these instead
of the journal; extensions that must see each commit first use
:meth:`~loop.extensions.Extension.committed`. ``loop.iteration.started`` and
``loop.waiting`` are for the displays only: nothing on disk depends on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loop.backends.base import Backend, BackendRequest
from loop.engine.state import HatUsage, LoopState
from loop.events import Event
from loop.records import LimitSettings, Override, SessionEnd, SessionStart, Wait

__all__ = [
    "ITERATION_DONE",
    "ITERATION_STARTED",
    "LOOP_RESUMED",
    "LOOP_STARTED",
    "LOOP_TERMINATED",
    "LOOP_WAITING",
    "IterationStarted",
    "SessionEnded",
    "SessionStarted",
    "Waiting",
    "spent",
    "started_event",
    "waiting_event",
]

LOOP_STARTED = "loop.started"
LOOP_RESUMED = "loop.resumed"
ITERATION_STARTED = "loop.iteration.started"
ACTIVATION_STARTED = "loop.activation.started"  # parallel hats: an activation was planned
ITERATION_DONE = "loop.iteration.done"
LOOP_WAITING = "loop.waiting"
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
    cost_usd: float = 0.0  # what the session had spent before this process took it over
    tokens: int = 0
    override: Override | None = None  # the limits a resume changed, journaled
    limits_before: LimitSettings | None = None  # ...and those it ran with before the resume
    parallel: bool = False  # hats may run at once: each activation's start is published


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """A session stopped running: the journal's ``session.end`` and the exit code."""

    end: SessionEnd
    exit_code: int


def spent(state: LoopState) -> HatUsage:
    """What the session's committed iterations cost, all hats together (None: no backend
    reported that figure)."""
    total = HatUsage()
    if not state.usage_per_hat:  # no backend reported anything
        return total
    for usage in state.usage_per_hat.values():
        total.add(usage.cost_usd, usage.input_tokens, usage.output_tokens)
    return total


@dataclass(slots=True)
class IterationStarted:
    """An iteration's hat is about to run.

    ``spent`` is what the session cost before it; ``watched`` tells whether its backend
    reports output as it arrives (:attr:`~loop.backends.base.Backend.watches_output`);
    ``alongside`` whether other activations may run while it runs (parallel hats:
    :meth:`~loop.engine.schedule.Schedule.runs_alongside`). A value (one per iteration:
    not ``frozen``, which would triple its cost to build).
    """

    iteration: int
    hat: str
    backend: str
    ts: float
    spent: HatUsage = field(default_factory=HatUsage)
    watched: bool = False
    alongside: bool = False


def started_event(
    request: BackendRequest,
    backend: Backend,
    state: LoopState,
    ts: float,
    *,
    alongside: bool = False,
) -> Event:
    """The ``loop.iteration.started`` event of ``request``'s iteration, about to run on
    ``backend`` after the iterations ``state`` holds (``alongside``: others may run
    meanwhile)."""
    running = IterationStarted(
        iteration=request.iteration,
        hat=request.hat,
        backend=backend.kind,
        ts=ts,
        spent=spent(state),
        watched=backend.watches_output,
        alongside=alongside,
    )
    return Event(topic=ITERATION_STARTED, source="loop", payload=running, ts=ts)


@dataclass(frozen=True, slots=True)
class Waiting:
    """The loop is waiting before it goes on (a rate limit, a usage limit...).

    ``reason`` says for what, in a few words (``rate limit``); ``until`` is when the wait
    ends, in seconds since the epoch, if known. The live line shows it as
    ``waiting for rate limit until 14:05``; the next ``loop.iteration.started`` ends it.
    """

    reason: str
    until: float | None = None
    wait: Wait | None = None  # the journaled wait (hat, iteration, attempt, the CLI's message)


def waiting_event(
    reason: str, until: float | None, *, ts: float, wait: Wait | None = None
) -> Event:
    """The ``loop.waiting`` event the engine publishes when it starts waiting."""
    return Event(topic=LOOP_WAITING, source="loop", payload=Waiting(reason, until, wait), ts=ts)
