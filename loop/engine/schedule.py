"""Parallel hats, in pure code: which activations start, which are cancelled, when the loop
stops, given the pending events, what is in flight, the limits and the clock's reading.

:func:`plan_step` is the whole scheduler. The driver calls it whenever something changed
(an activation committed, a deadline passed) and does what it says: start
:attr:`Plan.start` in order, cancel :attr:`Plan.cancel`, stop with :attr:`Plan.stop`
once nothing is in flight, or wait until an activation ends or :attr:`Plan.wake_at`.

The rules (documented in ``docs/parallel.md``):

* **Who runs next.** Pending events are taken oldest first. A hat with ``concurrency``
  1 runs once on all its pending events (the sequential rule); a hat with ``concurrency``
  N > 1 runs one activation per pending event (``group_by = "event"``) or per topic
  (``group_by = "topic"``), up to N at once. Events already given to an activation in
  flight are not given again. At most ``max_parallel`` hats have activations in flight.
* **Limits.** ``max_iterations`` counts activations: none starts once that many were
  started. No activation starts once a budget is spent (the run's; or the hat's whose
  event is next): the ones in flight finish and count when they commit, then the loop
  stops. ``max_activations`` counts the
  committed and the in-flight activations of a hat.
* **Completion with work in flight.** A completion, a cancellation, a failure limit, a
  stale loop, an unrouted event or ``max_runtime_seconds`` stops the loop at once: the
  activations in flight are cancelled (their process groups killed; nothing of theirs is
  committed). ``max_iterations``, a spent budget and an empty queue only stop new starts:
  the loop ends when the activations in flight have committed, unless what they publish
  ends it otherwise first.
* **Aggregation.** A hat with ``aggregate`` waits for the *wave*: the activations of the
  hats that publish its triggers (its producers). ``wait_for_all`` runs it once no
  producer is in flight nor has events pending; ``first`` and ``quorum`` (``count``) run
  it once that many results are pending, cancelling the producers still in flight.
  ``timeout_seconds`` (from the start of the oldest producer activation in flight)
  cancels the ones still running. The aggregator runs once, on every pending event of its
  own, including the loop's notices of the wave's failed, timed-out and cancelled
  activations (:func:`wave_notice`).
* **Numbering.** The plan numbers each activation it starts (:attr:`Selection.iteration
  <loop.engine.decide.Selection.iteration>`). An activation a stop cut short
  (``LoopState.interrupted``: in flight when the session was killed or interrupted) runs
  again under its own number: the activation that runs on one of its events, of its hat,
  takes it (the lowest, should one run on the events of several). Any other takes the
  number above every number given so far, committed or journaled as started
  (:func:`issued`), so no number is ever given to two activations. A run again was
  counted by ``max_iterations`` when it first started: it starts even once that many
  were started.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from loop.config import LoadedConfig
from loop.engine.decide import Limits, Selection, budget_spent, check_limits
from loop.engine.state import LoopState, PendingEvent
from loop.events import Event, patterns_overlap
from loop.routing import HatSpec, hat_specs

__all__ = [
    "SEQUENTIAL",
    "Aggregate",
    "HatSchedule",
    "Plan",
    "Running",
    "Schedule",
    "aggregators_of",
    "issued",
    "plan_step",
    "producers_of",
    "reruns",
    "schedule_of",
    "wave_notice",
]

AggregateMode = Literal["wait_for_all", "first", "quorum"]
NOTICE_TOPIC = "loop.activation.failed"

# Reasons that stop the loop at once, cancelling what is in flight; the others
# (max_iterations, budget_exhausted, no_pending_events) only stop new starts.
_DRAINING = frozenset({"max_iterations", "budget_exhausted", "no_pending_events"})


@dataclass(frozen=True, slots=True)
class Aggregate:
    """How a hat gathers a wave: ``count`` results (``first``: 1; ``quorum``: ``count``;
    ``wait_for_all``: all), waiting at most ``timeout_seconds`` for the wave."""

    mode: AggregateMode = "wait_for_all"
    count: int | None = None
    timeout_seconds: float | None = None

    @property
    def needed(self) -> int | None:
        """How many results run the aggregator early (None: wait for all)."""
        if self.mode == "first":
            return 1
        if self.mode == "quorum":
            return self.count or 1
        return None


@dataclass(frozen=True, slots=True)
class HatSchedule:
    """A hat's scheduling: ``concurrency`` activations at once, grouped ``group_by``."""

    concurrency: int = 1
    group_by: Literal["event", "topic"] = "event"
    aggregate: Aggregate | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """The loop's scheduling: ``max_parallel`` hats at once, each hat's settings, and
    each aggregating hat's producers (:func:`producers_of`), found once by :meth:`build`."""

    max_parallel: int = 1
    hats: Mapping[str, HatSchedule] = field(default_factory=dict)
    producers: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, specs: Mapping[str, HatSpec], hats: Mapping[str, HatSchedule], max_parallel: int = 1
    ) -> Schedule:
        """The schedule of ``hats`` (settings by name) among ``specs``, with each
        aggregating hat's producers."""
        producers = {
            name: producers_of(name, specs) for name, hs in hats.items() if hs.aggregate is not None
        }
        return cls(max_parallel=max_parallel, hats=hats, producers=producers)

    def of(self, hat: str) -> HatSchedule:
        """The settings of ``hat`` (the sequential defaults when it has none)."""
        return self.hats.get(hat, _DEFAULT)

    def runs_alongside(self, hat: str) -> bool:
        """Whether an activation of ``hat`` may run while other activations run: its own
        (``concurrency`` above 1) or other hats' (``max_parallel`` above 1)."""
        return self.max_parallel > 1 or self.of(hat).concurrency > 1

    @property
    def parallel(self) -> bool:
        """Whether anything may ever run at once (else the loop is sequential)."""
        return self.max_parallel > 1 or any(
            h.concurrency > 1 or h.aggregate is not None for h in self.hats.values()
        )


_DEFAULT = HatSchedule()
SEQUENTIAL = Schedule()


@dataclass(frozen=True, slots=True)
class Running:
    """An activation in flight: its iteration, hat, triggers, and when it started
    (the driver's monotonic clock)."""

    iteration: int
    hat: str
    triggers: tuple[int, ...]
    started: float


@dataclass(slots=True)
class Plan:
    """What the driver does now.

    ``start``: activations to start, in order (an ``exhausted`` one drops its events);
    ``cancel``: iterations in flight to cancel, each with why; ``stop``: the termination
    reason (the driver stops once nothing is in flight; ``note`` says more);
    ``wake_at``: plan again at this time even if nothing ends.
    """

    start: list[Selection] = field(default_factory=list)
    cancel: dict[int, str] = field(default_factory=dict)
    stop: str | None = None
    note: str | None = None
    wake_at: float | None = None


def issued(state: LoopState, running: Iterable[Running]) -> int:
    """The highest iteration number given so far (committed, in flight, or started and
    cut short by a stop)."""
    return max([state.issued, state.iteration, *(r.iteration for r in running)])


def reruns(state: LoopState) -> dict[int, int]:
    """The events the activations a stop cut short ran on, each with its activation's
    number (the lowest, for an event several ran on): the next to run on one of them runs
    again under that number (see the module's *Numbering*)."""
    out: dict[int, int] = {}
    for number in sorted(state.interrupted, reverse=True):
        for seq in state.interrupted[number].triggers:
            out[seq] = number
    return out


def producers_of(hat: str, specs: Mapping[str, HatSpec]) -> frozenset[str]:
    """The hats whose declared ``publishes`` can trigger ``hat`` (its wave's hats)."""
    triggers = specs[hat].triggers
    return frozenset(
        name
        for name, spec in specs.items()
        if name != hat and any(patterns_overlap(p, t) for p in spec.publishes for t in triggers)
    )


def aggregators_of(hat: str, specs: Mapping[str, HatSpec], schedule: Schedule) -> list[str]:
    """The aggregating hats ``hat`` produces for (told when its activations fail)."""
    return [name for name in specs if hat in schedule.producers.get(name, ())]


def schedule_of(config: LoadedConfig) -> Schedule:
    """The scheduling a configuration sets (``max_parallel``, each hat's settings)."""
    hats = {}
    for name, hat in config.hats.items():
        agg = hat.aggregate
        if hat.concurrency is None and hat.group_by is None and agg is None:
            continue
        hats[name] = HatSchedule(
            concurrency=hat.concurrency or 1,
            group_by=hat.group_by or "event",
            aggregate=None if agg is None else Aggregate(agg.mode, agg.count, agg.timeout_seconds),
        )
    specs = {spec.name: spec for spec in hat_specs(config.topology())}
    return Schedule.build(specs, hats, config.loop.max_parallel)


def wave_notice(iteration: int, hat: str, reason: str, aggregator: str, now: float) -> Event:
    """The loop's notice to ``aggregator`` that a wave's activation failed, timed out or
    was cancelled (its triggers are not run again: the aggregator decides)."""
    return Event(
        topic=NOTICE_TOPIC,
        payload=f"iteration {iteration} ({hat}) failed: {reason}",
        source="loop",
        target=aggregator,
        ts=now,
    )


def _hard_stop(state: LoopState, limits: Limits, elapsed: float) -> str | None:
    """The reasons that stop the loop at once, cancelling what is in flight."""
    reason = check_limits(state, limits, elapsed)
    if reason in _DRAINING:
        if elapsed >= limits.max_runtime_seconds:
            return "max_runtime"
        return None
    return reason


def plan_step(
    state: LoopState,
    specs: Mapping[str, HatSpec],
    schedule: Schedule,
    limits: Limits,
    running: Sequence[Running],
    *,
    elapsed: float,
    now: float,
) -> Plan:
    """The scheduler: what to start, cancel or stop now (see the module's rules).

    ``elapsed``: the session's runtime; ``now``: the driver's clock (``Running.started``
    and ``wake_at`` are on it).
    """
    if not running:
        reason = check_limits(state, limits, elapsed)
        if reason == "max_iterations" and state.interrupted:
            # what a stop cut short was counted as it started: it runs again all the same
            reason = _hard_stop(state, limits, elapsed)
        if reason is not None:
            plan = Plan(stop=reason)
            if reason == "budget_exhausted":
                plan.note = budget_spent(state, limits)
            return plan
    else:
        hard = _hard_stop(state, limits, elapsed)
        if hard is not None:
            return Plan(stop=hard, cancel={r.iteration: hard for r in running})
    if budget_spent(state, limits) is not None:  # draining: nothing starts
        plan = Plan()
    else:
        plan = _Pass(state, specs, schedule, limits, running).plan(now)
    if (running or plan.start) and math.isfinite(limits.max_runtime_seconds):
        # max_runtime_seconds stops what is in flight as it passes: plan again then
        deadline = now + max(limits.max_runtime_seconds - elapsed, 0.0)
        if plan.wake_at is None or deadline < plan.wake_at:
            plan.wake_at = deadline
    return plan


class _Pass:
    """One planning pass over the pending events, oldest first."""

    def __init__(
        self,
        state: LoopState,
        specs: Mapping[str, HatSpec],
        schedule: Schedule,
        limits: Limits,
        running: Sequence[Running],
    ) -> None:
        self.state, self.specs, self.schedule, self.limits = state, specs, schedule, limits
        self.running = running
        self.claimed = {seq for r in running for seq in r.triggers}
        self.per_hat: dict[str, int] = {}
        for r in running:
            self.per_hat[r.hat] = self.per_hat.get(r.hat, 0) + 1
        self.out = Plan()

    def plan(self, now: float) -> Plan:
        out = self.out
        self._aggregations(now)
        last = issued(self.state, self.running)
        left = self.limits.max_iterations - last
        again = reruns(self.state) if self.state.interrupted else {}
        blocked: set[str] = set()  # hats that start nothing more in this pass
        for pending in self.state.pending:
            if out.stop is not None or (left <= 0 and not again):
                break
            if pending.seq in self.claimed or pending.hat in blocked:
                continue
            if left <= 0 and pending.seq not in again:
                continue  # only what a stop cut short may still start (it was counted)
            started = self._consider(pending, blocked)
            if started is None:
                continue
            if not started.exhausted:
                number = self._rerun(started, again)
                if number is None:
                    if left <= 0:
                        continue
                    last += 1
                    left -= 1
                    number = last
                started.iteration = number
                self.per_hat[started.hat] = self.per_hat.get(started.hat, 0) + 1
            out.start.append(started)
            self.claimed.update(p.seq for p in started.triggers)
        self._arm_new_waves(now)
        if not self.running and not out.start and out.stop is None and out.wake_at is None:
            out.stop = "max_iterations" if left <= 0 else "no_pending_events"
        return out

    def _arm_new_waves(self, now: float) -> None:
        """A wave that starts now (none of its producers in flight before this pass) has
        its aggregator's deadline from now: the driver plans again then, even if none of
        the wave ends before it."""
        out = self.out
        starting = {s.hat for s in out.start if not s.exhausted}
        if not starting:
            return
        for hat, producers in self.schedule.producers.items():
            agg = self.schedule.of(hat).aggregate
            if agg is None or agg.timeout_seconds is None or not producers & starting:
                continue
            if any(r.hat in producers for r in self.running):
                continue  # a wave in flight: its deadline is set from its oldest activation
            deadline = now + agg.timeout_seconds
            if out.wake_at is None or deadline < out.wake_at:
                out.wake_at = deadline

    def _rerun(self, selection: Selection, again: dict[int, int]) -> int | None:
        """The number of the activation a stop cut short that ``selection`` runs again
        (it runs on one of its events), taken off ``again``; None: a new activation."""
        if not again:
            return None
        interrupted = self.state.interrupted
        numbers = [
            n
            for p in selection.triggers
            if (n := again.get(p.seq)) is not None and interrupted[n].hat == selection.hat
        ]
        if not numbers:
            return None
        number = min(numbers)
        for seq in interrupted[number].triggers:
            if again.get(seq) == number:
                del again[seq]
        return number

    def _consider(self, pending: PendingEvent, blocked: set[str]) -> Selection | None:
        """The activation ``pending`` starts now, if any (``blocked``: hats to skip)."""
        hat = pending.hat
        hs = self.schedule.of(hat)
        inflight = self.per_hat.get(hat, 0)
        if hs.aggregate is not None and not self._ready(hat, hs.aggregate):
            blocked.add(hat)
            return None
        if inflight == 0 and len(self.per_hat) >= self.schedule.max_parallel:
            return None  # no room for another hat; a running hat's own events may still go
        whole = hs.concurrency == 1 or hs.aggregate is not None
        if (whole and inflight) or inflight >= hs.concurrency:
            blocked.add(hat)  # runs again (on all its events) once an activation commits
            return None
        mine = [p for p in self.state.pending if p.hat == hat and p.seq not in self.claimed]
        spec = self.specs[hat]
        taken = self.state.activations.get(hat, 0) + inflight
        if spec.max_activations is not None and taken >= spec.max_activations:
            blocked.add(hat)  # dropped once nothing of the hat is in flight any more
            return None if inflight else Selection(hat=hat, triggers=tuple(mine), exhausted=True)
        if self.limits.hat_budgets and (spent := budget_spent(self.state, self.limits, hat)):
            if not self.running and not self.out.start:
                self.out.stop, self.out.note = "budget_exhausted", spent
            else:  # as in a sequential loop, nothing more starts: the loop drains
                blocked.update(self.specs)
            return None
        if whole:
            return Selection(hat=hat, triggers=tuple(mine))
        if hs.group_by == "topic":
            topic = pending.event.topic
            return Selection(hat=hat, triggers=tuple(p for p in mine if p.event.topic == topic))
        return Selection(hat=hat, triggers=(pending,))

    def _members(self, hat: str) -> tuple[frozenset[str], list[Running]]:
        producers = self.schedule.producers[hat]
        return producers, [r for r in self.running if r.hat in producers]

    def _results(self, hat: str) -> int:
        """How many of the aggregator's pending events are results (not the loop's notices)."""
        return sum(
            1
            for p in self.state.pending
            if p.hat == hat and p.seq not in self.claimed and p.event.source != "loop"
        )

    def _aggregations(self, now: float) -> None:
        """Cancel the waves whose aggregator's quorum is met or whose time is up; set the
        next deadline."""
        out = self.out
        for hat in self.specs:
            agg = self.schedule.of(hat).aggregate
            if agg is None:
                continue
            _, members = self._members(hat)
            if not members:
                continue
            if agg.needed is not None and self._results(hat) >= agg.needed:
                for r in members:
                    out.cancel.setdefault(r.iteration, f"cancelled: {hat}'s {agg.mode} was met")
                continue
            if agg.timeout_seconds is not None:
                deadline = min(r.started for r in members) + agg.timeout_seconds
                if now >= deadline:
                    why = f"timed out: {hat}'s aggregate timeout_seconds passed"
                    for r in members:
                        out.cancel.setdefault(r.iteration, why)
                elif out.wake_at is None or deadline < out.wake_at:
                    out.wake_at = deadline

    def _ready(self, hat: str, agg: Aggregate) -> bool:
        """Whether the aggregator ``hat`` may run now."""
        producers, members = self._members(hat)
        if members:  # the wave (or its cancelled rest) is still in flight
            return False
        if agg.needed is not None and self._results(hat) >= agg.needed:
            return True
        if any(p.hat in producers and p.seq not in self.claimed for p in self.state.pending):
            return False  # part of the wave has not started yet
        return not any(s.hat in producers for s in self.out.start)
