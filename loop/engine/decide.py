"""The engine's decisions, in pure code over plain data.

* :func:`select_next`: which hat runs next and on which events;
* :func:`decide_outcome`: what an iteration publishes, whether it consumed its
  triggers, whether it completed the loop;
* :func:`check_limits`: whether the loop stops now, and why.

No clocks, no processes, no I/O: the driver passes in what it measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from loop.engine.routing import HatSpec
from loop.engine.state import LoopState, PendingEvent
from loop.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_LIMIT, EXIT_OK
from loop.events import Event

__all__ = [
    "Limits",
    "Outcome",
    "Selection",
    "check_limits",
    "decide_outcome",
    "exit_code_for",
    "select_next",
]

# Termination reasons and the exit code each ends with (documented in the README).
REASON_EXIT: dict[str, int] = {
    "completed": EXIT_OK,
    "max_iterations": EXIT_LIMIT,
    "max_runtime": EXIT_LIMIT,
    "stale_loop": EXIT_LIMIT,
    "no_pending_events": EXIT_LIMIT,
    "max_consecutive_failures": EXIT_FAILED,
    "unrouted_event": EXIT_FAILED,
    "backend_unavailable": EXIT_FAILED,
    "error": EXIT_FAILED,
    "interrupted": EXIT_INTERRUPTED,
}


def exit_code_for(reason: str) -> int:
    """The process exit code for a termination reason."""
    return REASON_EXIT.get(reason, EXIT_FAILED)


@dataclass(slots=True)
class Selection:
    """The next step: run ``hat`` on ``triggers``, or drop them (``exhausted``)."""

    hat: str
    triggers: tuple[PendingEvent, ...]
    exhausted: bool = False


def select_next(state: LoopState, hats: dict[str, HatSpec]) -> Selection | None:
    """The hat of the oldest pending event, with every pending event routed to it."""
    if not state.pending:
        return None
    pending = state.pending
    hat = pending[0].hat
    triggers = (pending[0],) if len(pending) == 1 else tuple([p for p in pending if p.hat == hat])
    spec = hats[hat]
    if spec.max_activations is not None and state.activations.get(hat, 0) >= spec.max_activations:
        return Selection(hat=hat, triggers=triggers, exhausted=True)
    return Selection(hat=hat, triggers=triggers)


@dataclass(frozen=True)
class Limits:
    """The loop's limits (from ``[loop]``)."""

    max_iterations: int
    max_runtime_seconds: float
    max_consecutive_failures: int
    stale_threshold: int = 3


def check_limits(state: LoopState, limits: Limits, elapsed: float) -> str | None:
    """The termination reason if the loop must stop before another iteration."""
    if state.completed:
        return "completed"
    if state.unrouted is not None:
        return "unrouted_event"
    if state.repeat_count >= limits.stale_threshold:
        return "stale_loop"
    if state.consecutive_failures >= limits.max_consecutive_failures:
        return "max_consecutive_failures"
    if state.iteration >= limits.max_iterations:
        return "max_iterations"
    if elapsed >= limits.max_runtime_seconds:
        return "max_runtime"
    if not state.pending:
        return "no_pending_events"
    return None


@dataclass(slots=True)
class Outcome:
    """What one iteration amounts to."""

    status: Literal["ok", "failed"]
    publish: list[Event] = field(default_factory=list)
    consume: bool = False
    completed: bool = False
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def decide_outcome(
    hat: HatSpec,
    *,
    ok: bool,
    failure: str | None,
    events: list[Event],
    completion_event: str,
    completion_blocker: str | None,
    now: float,
) -> Outcome:
    """Decide what an iteration publishes and whether it completes the loop.

    Rules: a failed iteration publishes nothing and keeps its triggers (the hat runs
    again on them); an iteration that emitted nothing uses ``default_publishes``, but
    a default never completes the loop; the completion event counts only as the last
    event, and only when no extension blocks it (the hat is then told why). ``now``:
    the time of the events decided here.
    """
    if not ok:
        return Outcome(status="failed", reason=failure or "backend failed")
    if not events:
        if hat.default_publishes is None:
            return Outcome(status="failed", reason="no events emitted")
        if hat.default_publishes == completion_event:
            return Outcome(
                status="failed",
                reason=f"no events emitted (a default publish of {completion_event} "
                "cannot complete the loop)",
            )
        default = Event(topic=hat.default_publishes, payload="", source=hat.name, ts=now)
        return Outcome(
            status="ok",
            publish=[default],
            consume=True,
            notes=[f"default_publishes {hat.default_publishes}"],
        )
    out = Outcome(status="ok", publish=list(events), consume=True)
    if len(events) > 1 and any(e.topic == completion_event for e in events[:-1]):
        out.notes.append(f"{completion_event} ignored: it was not the last event")
    if events[-1].topic == completion_event:
        if completion_blocker:
            out.notes.append(f"{completion_event} refused: {completion_blocker}")
            out.publish.append(
                Event(
                    topic="loop.completion_rejected",
                    payload=f"{completion_event} refused: {completion_blocker}",
                    source="loop",
                    target=hat.name,
                    ts=now,
                )
            )
        else:
            out.completed = True
    return out
