"""The engine's decisions, in pure code over plain data.

* :func:`select_next`: which hat runs next and on which events;
* :func:`decide_outcome`: what an iteration publishes, whether it consumed its
  triggers, whether it asks to complete or cancel the loop;
* :func:`judge_completion`: whether a completion is accepted, on the state after the
  iteration's other events (``required_events``, the extensions' blockers);
* :func:`check_limits`: whether the loop stops now, and why.

No clocks, no processes, no I/O: the driver passes in what it measured.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from loop.engine.routing import HatSpec
from loop.engine.state import LoopState, PendingEvent
from loop.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_LIMIT, EXIT_OK
from loop.events import Event, topic_matches

__all__ = [
    "Limits",
    "Outcome",
    "Selection",
    "allowed_publish",
    "check_limits",
    "decide_outcome",
    "exit_code_for",
    "judge_completion",
    "missing_required",
    "select_next",
]

# Termination reasons and the exit code each ends with (documented in the README).
REASON_EXIT: dict[str, int] = {
    "completed": EXIT_OK,
    "cancelled": EXIT_OK,
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
    if state.cancelled:
        return "cancelled"
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
    """What one iteration amounts to.

    ``publish`` goes on the bus first; a completion the hat asked for (``completion``,
    its last event) is judged afterwards by :func:`judge_completion`, on the state that
    includes what ``publish`` changed.
    """

    status: Literal["ok", "failed"]
    publish: list[Event] = field(default_factory=list)
    consume: bool = False
    completion: Event | None = None
    completed: bool = False
    cancelled: bool = False
    dropped: list[Event] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


# Requests to the loop's tool domains: a hat may always make them, strict or not.
_TOOL_REQUESTS = ("task.", "theme.", "experience.")


def allowed_publish(hat: HatSpec, topic: str) -> bool:
    """Whether ``hat`` may publish ``topic`` under ``strict_publishes``: a topic its
    ``publishes`` match, its ``default_publishes``, or a tool request (``task.*``...).
    A hat that lists no ``publishes`` is not restricted."""
    if not hat.publishes or topic == hat.default_publishes or topic.startswith(_TOOL_REQUESTS):
        return True
    return any(topic_matches(p, topic) for p in hat.publishes)


def decide_outcome(
    hat: HatSpec,
    *,
    ok: bool,
    failure: str | None,
    events: list[Event],
    completion_event: str,
    now: float,
    cancellation_event: str | None = None,
    strict: bool = False,
) -> Outcome:
    """Decide what an iteration publishes, and whether it asks to complete or cancel.

    Rules: a failed iteration publishes nothing and keeps its triggers (the hat runs
    again on them); with ``strict``, events outside the hat's ``publishes`` are dropped
    (and listed in ``dropped``); an iteration left with no event uses
    ``default_publishes``, but a default never completes the loop; the cancellation
    event anywhere among the events cancels the run (and no completion is judged); the
    completion event counts only as the last event, and is judged by
    :func:`judge_completion` once the others are published. ``now``: the time of the
    events decided here.
    """
    if not ok:
        return Outcome(status="failed", reason=failure or "backend failed")
    dropped: list[Event] = []
    if strict and hat.publishes:
        kept = [e for e in events if allowed_publish(hat, e.topic)]
        if len(kept) != len(events):
            dropped = [e for e in events if not allowed_publish(hat, e.topic)]
            events = kept
    out = _outcome(hat, events, completion_event, now, cancellation_event)
    if dropped:
        out.dropped = dropped
        out.notes[:0] = [
            f"{e.topic} dropped: not in hat {hat.name!r}'s publishes (strict_publishes)"
            for e in dropped
        ]
        if out.status == "failed":
            out.reason = f"no events emitted ({len(dropped)} dropped by strict_publishes)"
    return out


def _outcome(
    hat: HatSpec,
    events: list[Event],
    completion_event: str,
    now: float,
    cancellation_event: str | None,
) -> Outcome:
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
    if cancellation_event is not None and any(e.topic == cancellation_event for e in events):
        out.cancelled = True
        if events[-1].topic == completion_event:
            out.notes.append(f"{completion_event} ignored: the run was cancelled")
        return out
    if len(events) > 1 and any(e.topic == completion_event for e in events[:-1]):
        out.notes.append(f"{completion_event} ignored: it was not the last event")
    if events[-1].topic == completion_event:
        out.completion = out.publish.pop()
    return out


def missing_required(
    required: Sequence[str], seen: Collection[str], published: Iterable[Event]
) -> list[str]:
    """The ``required_events`` topics published neither before (``seen``) nor in this
    iteration (``published``), in the configured order."""
    missing = [t for t in required if t not in seen]
    if missing:
        now = {e.topic for e in published}
        missing = [t for t in missing if t not in now]
    return missing


def judge_completion(
    outcome: Outcome,
    hat: str,
    *,
    blocker: str | None,
    missing: Sequence[str],
    now: float,
) -> list[Event]:
    """Accept or refuse the completion ``outcome`` asked for; the events to publish.

    Judged after the iteration's other events were published: ``missing`` are the
    required events still unpublished, ``blocker`` an extension's reason (open tasks).
    Accepted, the completion event is published and ``outcome.completed`` set; refused,
    it is published with a ``loop.completion_rejected`` event for the hat saying why.
    """
    event = outcome.completion
    if event is None:
        return []
    reasons = []
    if missing:
        reasons.append("required events not published yet: " + ", ".join(missing))
    if blocker:
        reasons.append(blocker)
    if not reasons:
        outcome.completed = True
        return [event]
    why = f"{event.topic} refused: " + "; ".join(reasons)
    outcome.notes.append(why)
    rejected = Event(
        topic="loop.completion_rejected", payload=why, source="loop", target=hat, ts=now
    )
    return [event, rejected]
