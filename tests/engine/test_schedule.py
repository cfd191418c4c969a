"""The parallel scheduler, in pure code: who runs next, limits, aggregation and completion
with work in flight, on a fake clock."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from hypothesis import given
from hypothesis import strategies as st

from loop.engine.decide import Budget, Limits, select_next
from loop.engine.schedule import (
    Aggregate,
    HatSchedule,
    Plan,
    Running,
    Schedule,
    aggregators_of,
    plan_step,
    producers_of,
    wave_notice,
)
from loop.engine.state import HatUsage, LoopState, PendingEvent, RouteContext, _route_into, apply
from loop.events import Event
from loop.records import IterationEnd, IterationStart, Resume
from loop.routing import HatSpec
from loop.testing import FakeClock

COORD = HatSpec("coordinator", ("review.start",), ("review.perspective",))
REVIEWER = HatSpec("reviewer", ("review.perspective",), ("review.done",))
SYNTH = HatSpec("synthesizer", ("review.done",), ("review.complete",))
OTHER = HatSpec("other", ("other.*",), ("other.done",))
SPECS = {h.name: h for h in (COORD, REVIEWER, SYNTH, OTHER)}
CTX = RouteContext(hats=(COORD, REVIEWER, SYNTH, OTHER), completion_event="review.complete")
LIMITS = Limits(max_iterations=50, max_runtime_seconds=600, max_consecutive_failures=5)


def schedule(
    concurrency: int = 3,
    aggregate: Aggregate | None = None,
    max_parallel: int = 1,
    group_by: str = "event",
) -> Schedule:
    assert group_by in ("event", "topic")
    return Schedule.build(
        SPECS,
        {
            "reviewer": HatSchedule(concurrency=concurrency, group_by=group_by),  # type: ignore[arg-type]
            "synthesizer": HatSchedule(aggregate=aggregate or Aggregate()),
        },
        max_parallel,
    )


def pending(*items: tuple[str, str], source: str = "x") -> list[PendingEvent]:
    return [
        PendingEvent(i, Event(topic=topic, payload=str(i), source=source), hat)
        for i, (topic, hat) in enumerate(items, start=1)
    ]


def perspectives(n: int) -> list[PendingEvent]:
    return pending(*[("review.perspective", "reviewer")] * n, source="coordinator")


def step(
    state: LoopState,
    sched: Schedule,
    running: list[Running] | None = None,
    *,
    limits: Limits = LIMITS,
    now: float = 0.0,
) -> Plan:
    return plan_step(state, SPECS, sched, limits, running or [], elapsed=now, now=now)


def seqs(plan: Plan) -> list[tuple[str, list[int]]]:
    return [(s.hat, [p.seq for p in s.triggers]) for s in plan.start]


# -- who runs next ------------------------------------------------------------------------


def test_a_concurrent_hat_runs_one_activation_per_pending_event_up_to_its_concurrency() -> None:
    plan = step(LoopState(pending=perspectives(5)), schedule(concurrency=3))
    assert seqs(plan) == [("reviewer", [1]), ("reviewer", [2]), ("reviewer", [3])]
    assert plan.stop is None and not plan.cancel


def test_events_given_to_an_activation_in_flight_are_not_given_again() -> None:
    running = [Running(1, "reviewer", (1,), 0.0)]
    plan = step(LoopState(pending=perspectives(4)), schedule(concurrency=3), running)
    assert seqs(plan) == [("reviewer", [2]), ("reviewer", [3])]


def test_group_by_topic_gives_one_activation_per_topic() -> None:
    state = LoopState(
        pending=pending(
            ("review.perspective", "reviewer"),
            ("review.perspective.x", "reviewer"),
            ("review.perspective", "reviewer"),
        )
    )
    plan = step(state, schedule(concurrency=3, group_by="topic"))
    assert seqs(plan) == [("reviewer", [1, 3]), ("reviewer", [2])]


def test_a_hat_of_concurrency_one_runs_once_on_all_its_events_and_waits_while_in_flight() -> None:
    state = LoopState(pending=pending(("other.a", "other"), ("other.b", "other")))
    assert seqs(step(state, schedule())) == [("other", [1, 2])]
    running = [Running(1, "other", (1,), 0.0)]
    assert seqs(step(state, schedule(), running)) == []


def test_which_hats_activations_may_run_alongside_others() -> None:
    """A hat of concurrency above 1 runs alongside its own activations, and with
    max_parallel above 1 every hat may run alongside another's; an aggregator of
    concurrency 1 under max_parallel 1 runs alone, as every hat of a sequential loop."""
    wave = schedule(concurrency=3)
    assert [wave.runs_alongside(h) for h in ("coordinator", "reviewer", "synthesizer")] == [
        False,
        True,
        False,
    ]
    wide = schedule(concurrency=1, max_parallel=2)
    assert all(wide.runs_alongside(h) for h in ("coordinator", "reviewer", "synthesizer"))
    assert not any(Schedule().runs_alongside(h) for h in ("coordinator", "reviewer"))


def test_max_parallel_bounds_the_hats_running_at_once() -> None:
    state = LoopState(pending=pending(("other.a", "other"), ("review.perspective", "reviewer")))
    assert seqs(step(state, schedule(max_parallel=1))) == [("other", [1])]
    assert seqs(step(state, schedule(max_parallel=2))) == [("other", [1]), ("reviewer", [2])]


def test_a_running_hat_takes_more_events_even_when_max_parallel_keeps_others_out() -> None:
    state = LoopState(pending=pending(("other.a", "other"), ("review.perspective", "reviewer")))
    running = [Running(1, "reviewer", (9,), 0.0)]
    assert seqs(step(state, schedule(max_parallel=1), running)) == [("reviewer", [2])]


@given(
    st.lists(st.sampled_from(["review.perspective", "other.a", "review.start"]), max_size=6),
    st.integers(0, 3),
)
def test_with_the_sequential_defaults_the_plan_is_the_sequential_selection(
    topics: list[str], done: int
) -> None:
    """Concurrency 1, max_parallel 1: exactly the hat and events select_next picks."""
    route = {"review.perspective": "reviewer", "other.a": "other", "review.start": "coordinator"}
    state = LoopState(pending=pending(*[(t, route[t]) for t in topics]), iteration=done)
    plan = step(state, Schedule())
    expected = select_next(state, SPECS)
    if expected is None:
        assert plan.start == [] and plan.stop == "no_pending_events"
    else:
        assert seqs(plan) == [(expected.hat, [p.seq for p in expected.triggers])]


# -- limits -------------------------------------------------------------------------------


def test_max_iterations_counts_activations_started() -> None:
    limits = Limits(max_iterations=4, max_runtime_seconds=600, max_consecutive_failures=5)
    state = LoopState(pending=perspectives(5), iteration=2)
    running = [Running(3, "reviewer", (1,), 0.0)]
    plan = step(state, schedule(), running, limits=limits)
    assert seqs(plan) == [("reviewer", [2])]  # iteration 4 is the last one
    running.append(Running(4, "reviewer", (2,), 0.0))
    plan = step(state, schedule(), running, limits=limits)
    assert plan.start == [] and plan.stop is None and not plan.cancel  # the two drain
    state.iteration = 4
    assert step(state, schedule(), limits=limits).stop == "max_iterations"


def test_no_activation_starts_once_the_budget_is_spent_and_the_ones_in_flight_finish() -> None:
    limits = Limits(
        max_iterations=50,
        max_runtime_seconds=600,
        max_consecutive_failures=5,
        budget=Budget(max_cost_usd=1.0),
    )
    state = LoopState(pending=perspectives(3), cost_usd=1.5)
    running = [Running(1, "reviewer", (1,), 0.0)]
    plan = step(state, schedule(), running, limits=limits)
    assert plan.start == [] and plan.stop is None and not plan.cancel
    plan = step(state, schedule(), limits=limits)
    assert plan.stop == "budget_exhausted" and plan.note and "max_cost_usd" in plan.note


def test_a_spent_hat_budget_stops_new_starts_when_its_event_is_next() -> None:
    limits = Limits(
        max_iterations=50,
        max_runtime_seconds=600,
        max_consecutive_failures=5,
        hat_budgets={"reviewer": Budget(max_tokens=10)},
    )
    state = LoopState(pending=pending(("other.a", "other"), ("review.perspective", "reviewer")))
    state.usage_per_hat["reviewer"] = HatUsage(input_tokens=20)
    assert seqs(step(state, schedule(max_parallel=2), limits=limits)) == [("other", [1])]
    running = [Running(1, "other", (1,), 0.0)]
    assert step(state, schedule(max_parallel=2), running, limits=limits) == Plan(wake_at=600.0)
    state.pending = state.pending[1:]
    plan = step(state, schedule(max_parallel=2), limits=limits)
    assert plan.stop == "budget_exhausted" and plan.note and "reviewer" in plan.note


def test_max_activations_counts_the_activations_in_flight() -> None:
    specs = {
        **SPECS,
        "reviewer": HatSpec("reviewer", REVIEWER.triggers, REVIEWER.publishes, None, 2),
    }
    state = LoopState(pending=perspectives(4), activations={"reviewer": 1})
    running = [Running(2, "reviewer", (1,), 0.0)]
    plan = plan_step(state, specs, schedule(), LIMITS, running, elapsed=0, now=0)
    assert plan.start == []  # 1 committed + 1 in flight: the in-flight one may still fail
    state.activations["reviewer"] = 2
    plan = plan_step(state, specs, schedule(), LIMITS, [], elapsed=0, now=0)
    assert len(plan.start) == 1 and plan.start[0].exhausted
    assert [p.seq for p in plan.start[0].triggers] == [1, 2, 3, 4]


# -- completion with work in flight -------------------------------------------------------


def test_a_completion_cancels_the_activations_in_flight() -> None:
    state = LoopState(pending=perspectives(2), completed=True)
    running = [Running(2, "reviewer", (1,), 0.0), Running(3, "reviewer", (2,), 0.0)]
    plan = step(state, schedule(), running)
    assert plan.stop == "completed" and set(plan.cancel) == {2, 3} and plan.start == []


def test_max_runtime_cancels_the_activations_in_flight() -> None:
    running = [Running(2, "reviewer", (1,), 0.0)]
    plan = step(LoopState(pending=perspectives(2)), schedule(), running, now=600.0)
    assert plan.stop == "max_runtime" and set(plan.cancel) == {2}


def test_failure_limits_stop_at_once() -> None:
    state = LoopState(pending=perspectives(2), consecutive_failures=5)
    running = [Running(2, "reviewer", (1,), 0.0)]
    plan = step(state, schedule(), running)
    assert plan.stop == "max_consecutive_failures" and set(plan.cancel) == {2}


def test_nothing_left_with_work_in_flight_waits_for_it() -> None:
    """... until it ends, or until max_runtime_seconds passes (then it is cancelled)."""
    running = [Running(2, "reviewer", (1,), 0.0)]
    plan = step(LoopState(pending=perspectives(1)), schedule(), running)
    assert plan == Plan(wake_at=600.0)


def test_max_runtime_is_a_deadline_of_what_is_in_flight() -> None:
    """Planned at 100 s into the session with work in flight or starting: plan again when
    max_runtime_seconds passes, which cancels it, even if nothing ends before."""
    running = [Running(2, "reviewer", (1,), 90.0)]
    plan = step(LoopState(pending=perspectives(1)), schedule(), running, now=100.0)
    assert plan.wake_at == 600.0 and plan.stop is None
    starting = step(LoopState(pending=perspectives(1)), schedule(), now=100.0)
    assert seqs(starting) == [("reviewer", [1])] and starting.wake_at == 600.0
    unlimited = Limits(max_iterations=50, max_runtime_seconds=math.inf, max_consecutive_failures=5)
    assert step(LoopState(pending=perspectives(1)), schedule(), running, limits=unlimited) == Plan()


# -- aggregation --------------------------------------------------------------------------


def results(n: int, first_seq: int = 10) -> list[PendingEvent]:
    return [
        PendingEvent(
            first_seq + i,
            Event(topic="review.done", payload=str(i), source="reviewer"),
            "synthesizer",
        )
        for i in range(n)
    ]


def test_the_wave_is_the_hats_publishing_the_aggregators_triggers() -> None:
    assert producers_of("synthesizer", SPECS) == {"reviewer"}
    assert aggregators_of("reviewer", SPECS, schedule()) == ["synthesizer"]
    assert aggregators_of("other", SPECS, schedule()) == []


def test_wait_for_all_waits_for_every_activation_of_the_wave() -> None:
    state = LoopState(pending=[*perspectives(3), *results(1)])
    running = [Running(1, "reviewer", (1,), 0.0), Running(2, "reviewer", (2,), 0.0)]
    state.pending = [p for p in state.pending if p.seq not in (1, 2)]  # 3 not started yet
    plan = step(state, schedule(concurrency=2), running)
    assert seqs(plan) == []  # reviewer is full; synthesizer waits
    state.pending = results(3)
    assert seqs(step(state, schedule(), [running[0]])) == []
    plan = step(state, schedule(), [])
    assert seqs(plan) == [("synthesizer", [10, 11, 12])]


def test_first_cancels_the_rest_of_the_wave_then_runs_the_aggregator() -> None:
    agg = Aggregate(mode="first")
    state = LoopState(pending=results(1))
    running = [Running(2, "reviewer", (2,), 0.0), Running(3, "reviewer", (3,), 0.0)]
    plan = step(state, schedule(aggregate=agg), running)
    assert set(plan.cancel) == {2, 3} and "first" in plan.cancel[2] and plan.start == []
    notice = wave_notice(2, "reviewer", plan.cancel[2], "synthesizer", 0.0)
    state.pending.append(PendingEvent(20, notice, "synthesizer"))
    assert seqs(step(state, schedule(aggregate=agg), [])) == [("synthesizer", [10, 20])]


def test_quorum_runs_the_aggregator_on_count_results() -> None:
    agg = Aggregate(mode="quorum", count=2)
    running = [Running(3, "reviewer", (3,), 0.0)]
    plan = step(LoopState(pending=results(1)), schedule(aggregate=agg), running)
    assert not plan.cancel
    plan = step(LoopState(pending=results(2)), schedule(aggregate=agg), running)
    assert set(plan.cancel) == {3}


def test_the_aggregate_timeout_cancels_the_wave_on_the_clock() -> None:
    clock = FakeClock(now=10.0)
    agg = Aggregate(timeout_seconds=5.0)
    running = [Running(1, "reviewer", (1,), 10.0), Running(2, "reviewer", (2,), 12.0)]
    state = LoopState(pending=results(1))
    clock.advance(4.0)
    plan = step(state, schedule(aggregate=agg), running, now=clock())
    assert not plan.cancel and plan.wake_at == 15.0
    clock.advance(1.0)
    plan = step(state, schedule(aggregate=agg), running, now=clock())
    assert set(plan.cancel) == {1, 2} and "timed out" in plan.cancel[1]


def test_a_wave_starting_now_is_planned_again_at_its_aggregate_timeout() -> None:
    """The deadline holds from the wave's start, not from its first commit: agents that all
    hang are cancelled when the time is up."""
    agg = Aggregate(timeout_seconds=5.0)
    plan = step(LoopState(pending=perspectives(3)), schedule(aggregate=agg), now=10.0)
    assert seqs(plan) == [("reviewer", [1]), ("reviewer", [2]), ("reviewer", [3])]
    assert plan.wake_at == 15.0
    # a hat outside the wave starting now sets no deadline
    other = LoopState(pending=pending(("other.x", "other")))
    assert step(other, schedule(aggregate=agg), now=10.0).wake_at == LIMITS.max_runtime_seconds


def test_the_aggregator_is_told_which_activations_failed() -> None:
    event = wave_notice(4, "reviewer", "timed out after 600s", "synthesizer", 1.0)
    assert event.target == "synthesizer" and event.source == "loop"
    assert "iteration 4 (reviewer)" in str(event.payload) and "timed out" in str(event.payload)
    assert CTX.route(event) == "synthesizer"


# -- the whole wave, simulated on a fake clock --------------------------------------------


@dataclass
class Sim:
    """Runs plans against fake activations: each takes ``durations[hat]`` seconds and
    publishes what ``behave`` says; commits in the order of completion."""

    sched: Schedule
    durations: Callable[[str, int], float]
    behave: Callable[[str, int], list[Event]]
    limits: Limits = LIMITS
    clock: FakeClock = field(default_factory=FakeClock)
    state: LoopState = field(default_factory=LoopState)
    log: list[str] = field(default_factory=list)
    max_in_flight: int = 0

    def run(self, start: Event) -> str:
        _route_into(self.state, start, CTX)
        running: dict[int, tuple[Running, float]] = {}
        while True:
            plan = plan_step(
                self.state,
                SPECS,
                self.sched,
                self.limits,
                [r for r, _ in running.values()],
                elapsed=self.clock(),
                now=self.clock(),
            )
            for it in plan.cancel:
                running.pop(it)
                self.log.append(f"cancel {it}")
            if plan.stop is not None and not running:
                return plan.stop
            for sel in plan.start:
                number = sel.iteration  # the plan numbers its starts
                assert number is not None and number not in running
                r = Running(number, sel.hat, tuple(p.seq for p in sel.triggers), self.clock())
                running[number] = (r, self.clock() + self.durations(sel.hat, number))
                self.log.append(f"start {number} {sel.hat}")
            self.max_in_flight = max(self.max_in_flight, len(running))
            assert running, "nothing in flight and no stop"
            it, (r, end) = min(running.items(), key=lambda kv: (kv[1][1], kv[0]))
            if plan.wake_at is not None and plan.wake_at < end:
                self.clock.now = plan.wake_at
                continue
            self.clock.now = end
            del running[it]
            published = tuple(self.behave(r.hat, it))
            done = IterationEnd(
                iteration=it,
                hat=r.hat,
                backend="command",
                backend_ok=True,
                status="ok",
                prompt="",
                output="",
                events=(),
                published=published,
                consumed=r.triggers,
                completed=any(e.topic == "review.complete" for e in published),
                duration=0.0,
                elapsed=self.clock(),
                ts=0.0,
            )
            apply(self.state, done, CTX)
            self.log.append(f"end {it} {r.hat}")


def review_behaviour(hat: str, iteration: int) -> list[Event]:
    if hat == "coordinator":
        return [Event(topic="review.perspective", payload=p, source=hat) for p in "abc"]
    if hat == "reviewer":
        return [Event(topic="review.done", payload=f"r{iteration}", source=hat)]
    return [Event(topic="review.complete", payload="", source=hat)]


def test_a_wave_of_three_runs_at_once_and_the_aggregator_once_after_the_slowest() -> None:
    lengths = {2: 2.0, 3: 5.0, 4: 3.0}
    sim = Sim(
        schedule(),
        durations=lambda hat, it: lengths.get(it, 1.0),
        behave=review_behaviour,
    )
    assert sim.run(Event(topic="review.start", source="loop")) == "completed"
    assert sim.max_in_flight == 3
    assert sim.clock() == 1.0 + 5.0 + 1.0  # the slowest reviewer, not the sum
    assert sim.log[:5] == [
        "start 1 coordinator",
        "end 1 coordinator",
        "start 2 reviewer",
        "start 3 reviewer",
        "start 4 reviewer",
    ]
    assert sim.log[-2:] == ["start 5 synthesizer", "end 5 synthesizer"]
    assert [line for line in sim.log if line.startswith("end")][1:4] == [
        "end 2 reviewer",
        "end 4 reviewer",
        "end 3 reviewer",
    ]  # commit order is completion order


def test_a_wave_wider_than_the_concurrency_runs_in_slots() -> None:
    sim = Sim(schedule(concurrency=2), durations=lambda hat, it: 1.0, behave=review_behaviour)
    assert sim.run(Event(topic="review.start", source="loop")) == "completed"
    assert sim.max_in_flight == 2 and sim.clock() == 1.0 + 2.0 + 1.0


def test_max_iterations_stops_a_wave_after_the_ones_in_flight_commit() -> None:
    limits = Limits(max_iterations=3, max_runtime_seconds=600, max_consecutive_failures=5)
    sim = Sim(
        schedule(),
        durations=lambda hat, it: 1.0,
        behave=review_behaviour,
        limits=limits,
    )
    assert sim.run(Event(topic="review.start", source="loop")) == "max_iterations"
    assert sim.log.count("start 2 reviewer") == 1 and "start 4 reviewer" not in sim.log
    assert sim.log[-1] in ("end 3 reviewer", "end 2 reviewer")
    assert sim.state.iteration == 3


def _start(n: int, hat: str, triggers: tuple[int, ...] = ()) -> IterationStart:
    return IterationStart(iteration=n, hat=hat, triggers=triggers, ts=0.0)


def _end(n: int, payload: str) -> IterationEnd:
    return IterationEnd(
        iteration=n,
        hat="reviewer",
        backend="command",
        backend_ok=True,
        status="ok",
        prompt="",
        output="",
        events=(),
        published=(Event(topic="review.done", payload=payload, source="reviewer"),),
        duration=0.0,
        elapsed=0.0,
        ts=0.0,
    )


def test_siblings_of_a_wave_saying_the_same_are_not_a_stale_loop() -> None:
    """Six reviewers run on six perspectives (events 1-6) and publish the same event,
    three at a time or all at once: one, not six repeats. A reviewer that runs on what the
    last one published, and says the same, repeats it in turn (the stale rule)."""
    for order in ([1, 2, 3, 4, 5, 6], [1, 2, 3, 6, 5, 4]):
        wave = LoopState(next_seq=7)  # the six perspectives were published
        running: list[int] = []
        for n in order:  # three at a time: a slot is refilled as each one ends
            apply(wave, _start(n, "reviewer", (n,)), CTX)
            running.append(n)
            if len(running) == 3:
                apply(wave, _end(running.pop(0), "LGTM"), CTX)
        for n in running:
            apply(wave, _end(n, "LGTM"), CTX)
        assert wave.repeat_count == 1, order
    in_turn = LoopState(next_seq=2)  # one perspective, event 1
    cause = 1
    for n in (1, 2, 3):
        apply(in_turn, _start(n, "reviewer", (cause,)), CTX)
        apply(in_turn, _end(n, "LGTM"), CTX)
        cause = in_turn.next_seq - 1  # the event it published: the next one runs on it
    assert in_turn.repeat_count == 3


def test_an_event_published_again_in_the_same_iteration_is_not_a_repeat() -> None:
    """``emit work.item --payloads x x x``: three equal items of one fan-out, no loop."""
    state = LoopState(next_seq=2)
    apply(state, _start(1, "reviewer", (1,)), CTX)
    same = Event(topic="review.done", payload="x", source="reviewer")
    apply(state, replace(_end(1, "x"), published=(same, same, same)), CTX)
    assert state.repeat_count == 1


def test_a_failed_activation_of_a_wave_is_the_aggregators_not_a_failure_in_a_row() -> None:
    """Three reviewers of a wave time out (their triggers consumed, the aggregator told):
    the run goes on to the aggregator; a failure outside a wave counts in a row."""
    state = LoopState(next_seq=4)
    for n in (1, 2, 3):
        apply(state, _start(n, "reviewer", (n,)), CTX)
        timed_out = replace(
            _end(n, ""), status="failed", reason="timed out", published=(), consumed=(n,)
        )
        apply(state, timed_out, CTX)
    assert state.consecutive_failures == 0 and state.failed_iterations == 3
    apply(state, _start(4, "reviewer", (9,)), CTX)
    apply(state, replace(_end(4, ""), status="failed", reason="exit 1", published=()), CTX)
    assert state.consecutive_failures == 1 and state.failed_iterations == 4
    assert state.last_failure == "#4 reviewer: exit 1"


# -- numbering: a resume runs what a stop cut short under its own numbers ----------------


def numbered(plan: Plan) -> list[tuple[int | None, str, list[int]]]:
    return [(s.iteration, s.hat, [p.seq for p in s.triggers]) for s in plan.start]


def cut_short_wave() -> LoopState:
    """The tester's wave (perspectives a, b, c: events 1-3), killed while reviewers 2
    and 4 ran and after 3 committed, then resumed."""
    state = LoopState(pending=perspectives(3), next_seq=4)
    for n, seq in ((2, 1), (3, 2), (4, 3)):
        apply(state, _start(n, "reviewer", (seq,)), CTX)
    apply(state, replace(_end(3, "b"), consumed=(2,)), CTX)
    apply(state, Resume(pid=1, iteration=3, in_flight=2, in_flight_all=(2, 4), ts=0.0), CTX)
    return state


def test_numbers_are_given_in_order_and_never_twice() -> None:
    assert numbered(step(LoopState(pending=perspectives(3), iteration=1), schedule())) == [
        (2, "reviewer", [1]),
        (3, "reviewer", [2]),
        (4, "reviewer", [3]),
    ]
    running = [Running(5, "reviewer", (1,), 0.0)]
    plan = step(LoopState(pending=perspectives(2), iteration=3), schedule(), running)
    assert numbered(plan) == [(6, "reviewer", [2])]


def test_a_resume_runs_the_activations_a_stop_cut_short_under_their_own_numbers() -> None:
    state = cut_short_wave()
    assert state.interrupted.keys() == {2, 4} and not state.in_flight and state.issued == 4
    plan = step(state, schedule())
    assert numbered(plan) == [(2, "reviewer", [1]), (4, "reviewer", [3])]
    # they run again (their next attempt): no longer owed; what starts next takes 5
    for n, seq in ((2, 1), (4, 3)):
        apply(state, replace(_start(n, "reviewer", (seq,)), attempt=2), CTX)
    assert not state.interrupted
    for n, seq in ((4, 3), (2, 1)):
        apply(state, replace(_end(n, "r"), consumed=(seq,)), CTX)
    assert numbered(step(state, schedule())) == [(5, "synthesizer", [4, 5, 6])]


def test_new_activations_after_a_resume_take_numbers_above_every_one_given() -> None:
    """Numbers journaled as started count, committed or not: a new activation never
    takes one, though the highest committed (3) is below them."""
    state = cut_short_wave()
    state.pending.append(PendingEvent(9, Event(topic="other.a", source="x"), "other"))
    plan = step(state, schedule(max_parallel=2))
    assert numbered(plan) == [(2, "reviewer", [1]), (4, "reviewer", [3]), (5, "other", [9])]
    # an activation cut short whose events another took: its number is not given again
    state = cut_short_wave()
    state.pending = [p for p in state.pending if p.seq != 3]
    state.pending.append(PendingEvent(9, Event(topic="review.perspective", source="x"), "reviewer"))
    assert numbered(step(state, schedule())) == [(2, "reviewer", [1]), (5, "reviewer", [9])]


def test_a_hat_that_runs_on_all_its_events_runs_again_as_the_activation_cut_short() -> None:
    """Concurrency 1: the hat runs again on its events, and those that came since."""
    state = LoopState(pending=pending(("other.a", "other"), ("review.perspective", "reviewer")))
    state.next_seq = 3
    apply(state, _start(1, "other", (1,)), CTX)
    apply(state, _start(2, "reviewer", (2,)), CTX)
    apply(state, replace(_end(2, "r"), consumed=(2,)), CTX)
    state.pending.append(PendingEvent(9, Event(topic="other.b", source="x"), "other"))
    apply(state, Resume(pid=1, iteration=2, in_flight=1, ts=0.0), CTX)
    plan = step(state, schedule(max_parallel=2))
    assert numbered(plan) == [(1, "other", [1, 9]), (3, "synthesizer", [3])]


def test_max_iterations_counts_an_activation_cut_short_once() -> None:
    """It was counted as it first started: it runs again even once max_iterations
    activations were started, and a new one starts only below the limit."""

    def limits(n: int) -> Limits:
        return Limits(max_iterations=n, max_runtime_seconds=600, max_consecutive_failures=5)

    state = cut_short_wave()
    state.pending.append(PendingEvent(9, Event(topic="other.a", source="x"), "other"))
    plan = step(state, schedule(max_parallel=2), limits=limits(5))
    assert numbered(plan) == [(2, "reviewer", [1]), (4, "reviewer", [3]), (5, "other", [9])]
    plan = step(state, schedule(max_parallel=2), limits=limits(4))
    assert numbered(plan) == [(2, "reviewer", [1]), (4, "reviewer", [3])] and plan.stop is None
    # iterations 1-3 started, 3 committed, 2 cut short: the highest committed is the
    # limit, and 2 still runs again
    state = LoopState(pending=perspectives(2), next_seq=3, iteration=1)
    apply(state, _start(2, "reviewer", (1,)), CTX)
    apply(state, _start(3, "reviewer", (2,)), CTX)
    apply(state, replace(_end(3, "b"), consumed=(2,)), CTX)
    apply(state, Resume(pid=1, iteration=3, in_flight=2, ts=0.0), CTX)
    plan = step(state, schedule(), limits=limits(3))
    assert numbered(plan) == [(2, "reviewer", [1])] and plan.stop is None
    apply(state, replace(_start(2, "reviewer", (1,)), attempt=2), CTX)
    apply(state, replace(_end(2, "a"), consumed=(1,)), CTX)
    assert step(state, schedule(), limits=limits(3)).stop == "max_iterations"
