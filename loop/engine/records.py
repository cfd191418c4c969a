"""The journal records the engine writes, built in pure code (the clock is an argument)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from loop._version import __version__
from loop.backends._procs import SpawnedProcess
from loop.backends.base import BackendResult
from loop.config import LoadedConfig
from loop.engine.decide import Outcome
from loop.engine.state import PendingEvent
from loop.events import Event
from loop.records import (
    ChildStarted,
    HatExhausted,
    IterationEnd,
    LostCalls,
    SessionEnd,
    SessionStart,
    ToolCall,
)

__all__ = ["child_start", "hat_exhausted", "iteration_end", "session_end", "session_start"]


def child_start(iteration: int, attempt: int, child: SpawnedProcess, now: float) -> ChildStarted:
    """The ``child.start`` record of a child a backend started for an attempt."""
    return ChildStarted(
        iteration=iteration,
        attempt=attempt,
        pid=child.pid,
        pgid=child.pgid,
        start_ticks=child.start_ticks,
        boot_id=child.boot_id,
        tag=child.tag,
        ts=now,
    )


def hat_exhausted(
    hat: str, max_activations: int | None, triggers: Sequence[PendingEvent], now: float
) -> HatExhausted:
    """A hat reached ``max_activations``: the events it was selected for are dropped, and
    ``<hat>.exhausted`` says so."""
    event = Event(
        topic=f"{hat}.exhausted",
        source="loop",
        payload=f"hat {hat!r} reached max_activations ({max_activations}); its events were dropped",
        ts=now,
    )
    return HatExhausted(hat=hat, dropped=tuple(p.seq for p in triggers), event=event, ts=now)


def session_start(config: LoadedConfig, session_id: str, now: float) -> SessionStart:
    """The journal's first record: the configuration and the loop's starting event."""
    return SessionStart(
        session_id=session_id,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        config_digest=config.digest(),
        starting_event=config.loop.starting_event,
        completion_event=config.loop.completion_event,
        hats=config.topology(),
        config=config.snapshot(),
        workdir=str(config.root),
        version=__version__,
        config_source=config.source,
        fallback_hat=config.loop.fallback_hat,
        flags=dict(config.flags),
        start_event=Event(
            topic=config.loop.starting_event, payload=config.prompt, source="loop", ts=now
        ),
        ts=now,
    )


def session_end(
    reason: str, iterations: int, elapsed: float, now: float, *, unrouted_topic: str | None = None
) -> SessionEnd:
    """The journal's last record: why and when the session ended (and, for
    ``unrouted_event``, the topic no hat takes)."""
    return SessionEnd(
        reason=reason,
        iterations=iterations,
        elapsed=round(elapsed, 6),
        unrouted_topic=unrouted_topic if reason == "unrouted_event" else None,
        ts=now,
    )


def iteration_end(
    *,
    iteration: int,
    hat: str,
    activation: int,
    backend: str,
    prompt: str,
    result: BackendResult,
    outcome: Outcome,
    triggers: tuple[Event, ...],
    trigger_seqs: tuple[int, ...],
    events: Sequence[Event],
    emitted: Sequence[Event],
    published: Sequence[Event],
    tool_calls: Sequence[ToolCall] = (),
    lost_calls: Sequence[LostCalls] = (),
    duration: float,
    elapsed: float,
    now: float,
) -> IterationEnd:
    """The journal's ``iteration.end`` record (the commit point; the recording's source).

    ``triggers``: the events the iteration ran on (the request's), ``trigger_seqs``
    their numbers (consumed when the outcome says so).

    ``backend_ok`` is the backend's own verdict (the engine may still fail an iteration
    whose backend succeeded, when the hat emitted nothing): replay serves it again.
    Timings are kept to the microsecond.
    """
    return IterationEnd(
        iteration=iteration,
        hat=hat,
        activation=activation,
        backend=backend,
        backend_ok=result.ok,
        status=outcome.status,
        reason=outcome.reason,
        exit_code=result.exit_code,
        prompt=prompt,
        output=result.output,
        triggers=triggers,
        events=tuple(events),
        emitted=tuple(emitted),
        published=tuple(published),
        consumed=trigger_seqs if outcome.consume else (),
        dropped=tuple(outcome.dropped),
        completed=outcome.completed,
        cancelled=outcome.cancelled,
        notes=tuple(outcome.notes),
        duration=round(duration, 6),
        elapsed=round(elapsed, 6),
        cost_usd=result.cost_usd,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        turns=result.turns,
        meta=result.meta,
        tool_calls=tuple(tool_calls),
        lost_calls=tuple(lost_calls),
        ts=now,
    )
