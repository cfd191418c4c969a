"""The loop's state, derived from journal records by a pure reducer.

Everything the engine needs (iteration count, pending events, per-hat activations,
failure and stale counters, elapsed runtime, cost) is a fold of the session
journal through :func:`apply`. The live engine appends a record and applies it; a
restarted engine applies the records it reads back. One code path, so a resumed
session is exactly the session that stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from loop.engine.routing import HatSpec, route
from loop.events import Event, is_reserved

__all__ = ["HatUsage", "LoopState", "PendingEvent", "RouteContext", "apply", "fold"]


@dataclass(slots=True)
class PendingEvent:
    """An event waiting for its hat, with its sequence number."""

    seq: int
    event: Event
    hat: str


@dataclass(frozen=True)
class RouteContext:  # not slotted: cached_property needs the instance __dict__
    """What the reducer needs from the configuration."""

    hats: tuple[HatSpec, ...]
    completion_event: str = "LOOP_COMPLETE"
    fallback: str | None = None
    starting_event: str | None = None

    @cached_property
    def hat_names(self) -> frozenset[str]:
        """The names of the configured hats."""
        return frozenset(h.name for h in self.hats)

    @cached_property
    def _routes(self) -> dict[tuple[str, bool], str | None]:
        return {}

    def route(self, event: Event) -> str | None:
        """:func:`~loop.engine.routing.route` for this configuration, memoised per topic.

        Untargeted routing depends only on the topic and on whether the loop published
        it, so each (topic, from-loop) pair is decided once per run.
        """
        if event.target is not None:
            return event.target if event.target in self.hat_names else None
        key = (event.topic, event.source == "loop")
        routes = self._routes
        if key not in routes:
            routes[key] = route(
                event,
                self.hats,
                completion_event=self.completion_event,
                fallback=self.fallback,
                starting_event=self.starting_event,
            )
        return routes[key]


@dataclass(slots=True)
class HatUsage:
    """What one hat's iterations cost, as far as its backend reported (None: never said)."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def add(self, cost: Any, input_tokens: Any, output_tokens: Any) -> None:
        """Add one iteration's figures (a missing one leaves its total as it was)."""
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)
        if input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + int(input_tokens)
        if output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + int(output_tokens)


@dataclass
class LoopState:
    """Plain data: what the journal says about a session so far."""

    iteration: int = 0
    in_flight: int | None = None
    in_flight_hat: str | None = None
    next_seq: int = 1
    pending: list[PendingEvent] = field(default_factory=list)
    activations: dict[str, int] = field(default_factory=dict)
    consecutive_failures: int = 0
    failed_iterations: int = 0
    last_signature: tuple[str, str, str] | None = None
    repeat_count: int = 0
    elapsed: float = 0.0
    unrouted: str | None = None
    completed: bool = False
    termination: str | None = None
    last_hat: str | None = None
    events_per_hat: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    usage_per_hat: dict[str, HatUsage] = field(default_factory=dict)
    resumes: int = 0


def _route_into(state: LoopState, event: Event, ctx: RouteContext) -> None:
    hat = ctx.route(event)
    if hat is not None:
        state.pending.append(PendingEvent(seq=state.next_seq, event=event, hat=hat))
        state.next_seq += 1
    elif (
        event.topic != ctx.starting_event
        and event.source in ctx.hat_names
        and event.topic != ctx.completion_event
        and not is_reserved(event.topic, ctx.completion_event)
    ):
        state.unrouted = event.topic


def _events(raw: Sequence[dict[str, Any]]) -> list[Event]:
    return [Event.from_dict(e) for e in raw]


def apply(
    state: LoopState,
    record: dict[str, Any],
    ctx: RouteContext,
    published: Sequence[Event] | None = None,
) -> LoopState:
    """Fold one journal record into ``state`` (mutates and returns it).

    ``published``: the events of an ``iteration.end`` record as :class:`Event` objects,
    when the caller holds them already (the live engine, which just built the record
    from them); otherwise they are rebuilt from the record.
    """
    kind = record.get("kind")
    if kind == "iteration.end":  # the two records of every iteration first (hot path)
        _apply_iteration_end(
            state,
            record,
            ctx,
            _events(record.get("published", [])) if published is None else published,
        )
    elif kind == "iteration.start":
        state.in_flight = int(record["iteration"])
        state.in_flight_hat = str(record["hat"])
    elif kind == "session.start":
        _route_into(state, Event.from_dict(record["start_event"]), ctx)
    elif kind == "hat.exhausted":
        dropped = set(record.get("dropped", []))
        state.pending = [p for p in state.pending if p.seq not in dropped]
        _route_into(state, Event.from_dict(record["event"]), ctx)
    elif kind == "session.end":
        state.termination = str(record["reason"])
        state.in_flight = None
        state.in_flight_hat = None
    elif kind == "resume":
        state.resumes += 1
        state.termination = None
        state.in_flight = None
        state.in_flight_hat = None
    return state


def _apply_iteration_end(
    state: LoopState, record: dict[str, Any], ctx: RouteContext, published: Sequence[Event]
) -> None:
    hat = str(record["hat"])
    state.iteration = int(record["iteration"])
    state.in_flight = None
    state.in_flight_hat = None
    state.last_hat = hat
    state.activations[hat] = state.activations.get(hat, 0) + 1
    state.elapsed = float(record.get("elapsed", state.elapsed))
    cost, tokens_in, tokens_out = (
        record.get("cost_usd"),
        record.get("input_tokens"),
        record.get("output_tokens"),
    )
    if cost is not None or tokens_in is not None or tokens_out is not None:
        if cost is not None:
            state.cost_usd += float(cost)
        usage = state.usage_per_hat.get(hat)
        if usage is None:
            usage = state.usage_per_hat[hat] = HatUsage()
        usage.add(cost, tokens_in, tokens_out)
    if record.get("status") == "ok":
        state.consecutive_failures = 0
        consumed = record.get("consumed")
        if consumed:
            pending = state.pending
            if len(consumed) == 1 and pending and pending[0].seq == consumed[0]:
                del pending[0]  # the oldest event, consumed alone: the common case
            else:
                gone = set(consumed)
                state.pending = [p for p in pending if p.seq not in gone]
    else:
        state.consecutive_failures += 1
        state.failed_iterations += 1
    for event in published:
        if event.source == hat:
            state.events_per_hat[hat] = state.events_per_hat.get(hat, 0) + 1
            sig = event.signature()
            if sig == state.last_signature:
                state.repeat_count += 1
            else:
                state.last_signature = sig
                state.repeat_count = 1
        _route_into(state, event, ctx)
    if record.get("completed"):
        state.completed = True


def fold(records: Sequence[dict[str, Any]], ctx: RouteContext) -> LoopState:
    """The state after all ``records`` (a fresh state for an empty journal)."""
    state = LoopState()
    for record in records:
        apply(state, record, ctx)
    return state
