"""The loop's state, derived from journal records by a pure reducer.

Everything the engine needs (iteration count, pending events, per-hat activations,
failure and stale counters, elapsed runtime, cost and tokens spent) is a fold of the session
journal's typed records (:mod:`loop.records`) through :func:`apply`. The live engine
appends a record and applies it; a restarted engine applies the records it reads
back. One code path, so a resumed session is exactly the session that stopped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from loop.events import Event, is_reserved
from loop.records import (
    ChildStarted,
    EventMalformed,
    EventsPublished,
    HatExhausted,
    HatTopology,
    IterationEnd,
    IterationStart,
    JournalRecord,
    LimitSettings,
    Override,
    Resume,
    SessionEnd,
    SessionStart,
    Wait,
)
from loop.routing import HatSpec, hat_specs, route
from loop.topics import COMPLETION_REJECTED, DEFAULT_COMPLETION_EVENT

__all__ = [
    "Exhaustion",
    "HatUsage",
    "InFlight",
    "LoopState",
    "OpenAttempt",
    "PendingEvent",
    "RouteContext",
    "apply",
    "fold",
    "interrupt",
    "restart_streak",
]


@dataclass(slots=True)
class PendingEvent:
    """An event waiting for its hat, with its sequence number."""

    seq: int
    event: Event
    hat: str


@dataclass(slots=True)
class InFlight:
    """An iteration that started and has not ended: its hat and the events it runs on.
    A value (one per iteration: not ``frozen``, which would triple its cost to build)."""

    hat: str
    triggers: tuple[int, ...]


@dataclass(slots=True)
class OpenAttempt:
    """An attempt at an iteration that started and has not committed (in flight, or left
    by a crash), and the child processes its backend started."""

    iteration: int
    attempt: int
    children: list[ChildStarted] = field(default_factory=list)


@dataclass(frozen=True)
class RouteContext:  # not slotted: cached_property needs the instance __dict__
    """What the reducer needs from the configuration: the hats and the loop's events."""

    hats: tuple[HatSpec, ...]
    completion_event: str = DEFAULT_COMPLETION_EVENT
    fallback: str | None = None
    starting_event: str | None = None
    cancellation_event: str | None = None

    @classmethod
    def from_topology(
        cls,
        hats: Mapping[str, HatTopology],
        *,
        completion_event: str,
        fallback: str | None,
        starting_event: str,
        cancellation_event: str | None = None,
    ) -> RouteContext:
        """The context of a hat topology (a configuration's, or a journal's)."""
        return cls(
            hats=hat_specs(hats),
            completion_event=completion_event,
            fallback=fallback,
            starting_event=starting_event,
            cancellation_event=cancellation_event,
        )

    @classmethod
    def from_start(cls, start: SessionStart) -> RouteContext:
        """The context a session recorded in its ``session.start`` record."""
        loop = start.config.get("loop")
        cancel = loop.get("cancellation_event") if isinstance(loop, dict) else None
        return cls.from_topology(
            start.hats,
            completion_event=start.completion_event,
            fallback=start.fallback_hat,
            starting_event=start.starting_event,
            cancellation_event=cancel if isinstance(cancel, str) else None,
        )

    @cached_property
    def hat_names(self) -> frozenset[str]:
        """The names of the configured hats."""
        return frozenset(h.name for h in self.hats)

    @cached_property
    def _routes(self) -> dict[tuple[str, bool], str | None]:
        return {}

    def route(self, event: Event) -> str | None:
        """:func:`~loop.routing.route` for this configuration, memoised per topic.

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
class Exhaustion:
    """A hat that reached its ``max_activations``: after how many, how many of the events
    it was selected for were dropped in all, and which hat took its ``<hat>.exhausted``
    (None: none did)."""

    activations: int
    dropped: int
    topic: str
    taker: str | None


@dataclass(slots=True)
class HatUsage:
    """What one hat's iterations cost, as far as its backend reported (None: never said)."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def tokens(self) -> int | None:
        """Input plus output tokens (None when the backend never reported either)."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def add(self, cost: float | None, input_tokens: int | None, output_tokens: int | None) -> None:
        """Add one iteration's figures (a missing one leaves its total as it was)."""
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        if input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + input_tokens
        if output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + output_tokens


@dataclass
class LoopState:
    """Plain data: what the journal says about a session so far.

    ``iteration`` is the highest committed iteration; ``issued`` the highest number
    given so far (started or committed: a new activation takes the next one);
    ``in_flight`` holds the iterations that started and have not ended, by number (one at
    most while iterations run one at a time; after the session's end, the ones it cut
    short; a resume moves them to ``interrupted``, where each waits to run again under
    its own number, until it starts again).
    """

    iteration: int = 0
    issued: int = 0
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    interrupted: dict[int, InFlight] = field(default_factory=dict)
    # attempts since the last commit, oldest first: a resume stops what they left running
    attempts: list[OpenAttempt] = field(default_factory=list)
    # per hat: what its next prompt tells it (its last iteration's malformed emit lines)
    notices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    malformed: dict[int, list[str]] = field(default_factory=dict)  # by iteration, uncommitted
    next_seq: int = 1
    pending: list[PendingEvent] = field(default_factory=list)
    activations: dict[str, int] = field(default_factory=dict)
    consecutive_failures: int = 0
    failed_iterations: int = 0
    last_failure: str | None = None  # the last failed iteration's number, hat and reason
    refused: str | None = None  # why the last completion was refused, until one is accepted
    last_signature: tuple[str, str, str] | None = None
    repeat_count: int = 0
    signature_seq: int = 0  # ``next_seq`` when ``last_signature`` was set
    # stopped as a stale loop, and nothing ran since: a resume that goes on (the hat that
    # repeated itself changed, or the threshold rose) starts the streak afresh
    stale_stopped: bool = False
    elapsed: float = 0.0
    unrouted: str | None = None
    completed: bool = False
    cancelled: bool = False
    seen_topics: set[str] = field(default_factory=set)
    termination: str | None = None
    last_hat: str | None = None
    events_per_hat: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    tokens: int = 0
    usage_per_hat: dict[str, HatUsage] = field(default_factory=dict)
    exhausted: dict[str, Exhaustion] = field(default_factory=dict)  # by hat
    resumes: int = 0
    # each iteration in flight's last wait for a rate or usage limit, and the seconds of
    # waits planned for it in all (max_wait_seconds bounds them); a commit ends them
    waits: dict[int, Wait] = field(default_factory=dict)
    waited: dict[int, float] = field(default_factory=dict)
    settings: LimitSettings | None = None  # the limits of the last override, if any
    backends: dict[str, str] = field(default_factory=dict)  # hats' backends overridden

    @property
    def waiting(self) -> Wait | None:
        """The wait that ends last, of those the iterations in flight are in (the
        session waits at least until then); ``None`` when none waits."""
        return max(self.waits.values(), key=lambda w: (w.until, w.iteration), default=None)

    def next_attempt(self, iteration: int) -> int:
        """The number of ``iteration``'s next attempt (1, unless a crash interrupted one)."""
        if not self.attempts:  # the last iteration committed: nothing was interrupted
            return 1
        return 1 + max((a.attempt for a in self.attempts if a.iteration == iteration), default=0)


def _route_into(state: LoopState, event: Event, ctx: RouteContext) -> None:
    hat = ctx.route(event)
    if hat is not None:
        state.pending.append(PendingEvent(seq=state.next_seq, event=event, hat=hat))
        state.next_seq += 1
    elif (
        event.topic != ctx.starting_event
        and event.source in ctx.hat_names
        and event.topic not in (ctx.completion_event, ctx.cancellation_event)
        and not is_reserved(event.topic, ctx.completion_event)
    ):
        state.unrouted = event.topic


def apply(state: LoopState, record: JournalRecord, ctx: RouteContext) -> LoopState:
    """Fold one journal record into ``state`` (mutates and returns it)."""
    match record:
        case IterationEnd():
            _apply_iteration_end(state, record, ctx)
        case IterationStart():
            if state.stale_stopped:  # a resume goes on after a stale_loop stop
                restart_streak(state)
            number = record.iteration
            state.in_flight[number] = InFlight(record.hat, record.triggers)
            state.issued = max(state.issued, number)
            if state.interrupted:  # it runs again (a resume's): no longer owed
                state.interrupted.pop(number, None)
            state.attempts.append(OpenAttempt(record.iteration, record.attempt))
            state.malformed.pop(record.iteration, None)  # an earlier attempt's are void
        case ChildStarted():
            _attempt(state, record.iteration, record.attempt).children.append(record)
        case EventMalformed():
            where = f"line {record.line}: " if record.line is not None else ""
            state.malformed.setdefault(record.iteration, []).append(where + record.problem)
        case SessionStart():
            _route_into(state, record.start_event, ctx)
        case HatExhausted():
            dropped = set(record.dropped)
            state.pending = [p for p in state.pending if p.seq not in dropped]
            state.seen_topics.add(record.event.topic)
            _route_into(state, record.event, ctx)
            before = state.exhausted.get(record.hat)
            state.exhausted[record.hat] = Exhaustion(
                activations=state.activations.get(record.hat, 0),
                dropped=len(dropped) + (before.dropped if before is not None else 0),
                topic=record.event.topic,
                taker=ctx.route(record.event),
            )
        case Wait():
            number = record.iteration
            state.waits[number] = record
            state.waited[number] = state.waited.get(number, 0.0) + record.seconds
        case Override():
            state.settings = record.settings()
            state.backends.update(record.backends)
        case EventsPublished():
            for event in record.events:
                _route_into(state, event, ctx)
        case Resume():
            state.resumes += 1
            if state.termination == "rate_limited":  # the loop gave up waiting: go on anew
                state.waited.clear()
            state.termination = None
            interrupt(state)  # what was in flight runs again, as itself
            for number, wait in list(state.waits.items()):  # its waits hold until their end
                if wait.until <= record.ts:
                    del state.waits[number]
            state.malformed.clear()
        case SessionEnd():
            _apply_session_end(state, record)
    return state


def _apply_session_end(state: LoopState, record: SessionEnd) -> None:
    state.termination = record.reason
    if record.reason == "stale_loop":
        state.stale_stopped = True
    # the runtime goes on from the end's: an interrupted iteration's time was spent too
    # (a kill leaves no end: the last commit's is all that is known)
    state.elapsed = max(state.elapsed, record.elapsed)
    # what was in flight stays named (cut short, nothing of it committed) until a resume
    # runs it again
    if record.reason != "interrupted":  # a stop ends the waits; Ctrl-C keeps them
        state.waits.clear()
        state.waited.clear()


def restart_streak(state: LoopState) -> None:
    """The stale-loop streak starts afresh: a session that stopped as a stale loop goes
    on (the fold, at its resumed run's first iteration; a resume, at once, when the hat
    that repeated itself changed; a replay, where the recorded session went on)."""
    state.stale_stopped = False
    state.last_signature = None
    state.repeat_count = 0


def interrupt(state: LoopState) -> None:
    """The iterations in flight were cut short (the session stopped, and is resumed): each
    runs again under its own number, on the events it ran on (``interrupted``), so it is
    the same iteration, in its next attempt, not a new one. A replay of the session's
    recording does the same where the recorded session was resumed."""
    state.interrupted.update(state.in_flight)
    state.in_flight.clear()


def _attempt(state: LoopState, iteration: int, attempt: int) -> OpenAttempt:
    for open_attempt in reversed(state.attempts):
        if open_attempt.iteration == iteration and open_attempt.attempt == attempt:
            return open_attempt
    state.attempts.append(OpenAttempt(iteration, attempt))  # its start was lost: a torn line
    return state.attempts[-1]


def _close_attempts(state: LoopState, number: int, hat: str) -> None:
    """Iteration ``number`` committed: its attempts are closed (nothing of theirs is
    stopped on a resume), and what its emit file held that was dropped is ``hat``'s
    notice for its next prompt (the previous one was told)."""
    if state.attempts:  # parallel hats commit out of number order: only this one's go
        state.attempts = [a for a in state.attempts if a.iteration != number]
    problems = state.malformed.pop(number, None) if state.malformed else None
    if problems:
        state.notices[hat] = tuple(problems)
    elif state.notices:
        state.notices.pop(hat, None)


def _apply_iteration_end(state: LoopState, record: IterationEnd, ctx: RouteContext) -> None:
    hat = record.hat
    number = record.iteration
    state.iteration = max(state.iteration, number)
    state.issued = max(state.issued, number)  # its start may be lost (a torn line)
    flight = state.in_flight.pop(number, None)
    if state.interrupted:
        state.interrupted.pop(number, None)
    # the newest event it ran on: a repeat is one the first occurrence led to (see below)
    cause = max(flight.triggers, default=0) if flight is not None else None
    if state.waits:  # its waits are over; another iteration in flight keeps its own
        state.waits.pop(number, None)
        state.waited.pop(number, None)
    _close_attempts(state, number, hat)
    state.last_hat = hat
    state.activations[hat] = state.activations.get(hat, 0) + 1
    state.elapsed = max(state.elapsed, record.elapsed)
    _add_usage(state, record)
    if record.consumed:  # a failed one consumes only in an aggregator's wave
        consumed = set(record.consumed)
        state.pending = [p for p in state.pending if p.seq not in consumed]
    if record.status == "ok":
        state.consecutive_failures = 0
        state.last_failure = None
    elif record.consumed:  # of an aggregator's wave: the aggregator is told, and decides
        state.failed_iterations += 1
    else:
        state.consecutive_failures += 1
        state.failed_iterations += 1
        state.last_failure = f"#{number} {hat}: {record.reason or 'failed'}"
    seen = state.seen_topics
    for event in record.published:
        seen.add(event.topic)
        if event.topic == COMPLETION_REJECTED and event.source == "loop":
            state.refused = str(event.payload)
        if event.source == hat:
            state.events_per_hat[hat] = state.events_per_hat.get(hat, 0) + 1
            sig = event.signature()
            if sig == state.last_signature:
                # a stale loop repeats itself in turn: the event counts again only from an
                # activation that ran on something published since it first appeared. The
                # siblings of one fan-out (three reviewers saying "LGTM", whether they ran
                # at once or a few at a time) and an event published twice in one
                # iteration are not repeats. Without its start record: it counts.
                if cause is None or cause >= state.signature_seq:
                    state.repeat_count += 1
            else:
                state.last_signature = sig
                state.repeat_count = 1
                state.signature_seq = state.next_seq
        _route_into(state, event, ctx)
    if record.completed:
        state.completed = True
        state.refused = None
    if record.cancelled:
        state.cancelled = True


def _add_usage(state: LoopState, record: IterationEnd) -> None:
    """Count what the iteration cost, as far as its backend reported, in all and per hat."""
    cost, tokens_in, tokens_out = record.cost_usd, record.input_tokens, record.output_tokens
    if cost is None and tokens_in is None and tokens_out is None:
        return
    if cost is not None:
        state.cost_usd += cost
    state.tokens += (tokens_in or 0) + (tokens_out or 0)
    usage = state.usage_per_hat.get(record.hat)
    if usage is None:
        usage = state.usage_per_hat[record.hat] = HatUsage()
    usage.add(cost, tokens_in, tokens_out)


def fold(records: Iterable[JournalRecord], ctx: RouteContext) -> LoopState:
    """The state after all ``records`` (a fresh state for an empty journal)."""
    state = LoopState()
    for record in records:
        apply(state, record, ctx)
    return state
