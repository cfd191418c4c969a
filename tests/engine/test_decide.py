"""The pure decisions: next hat, outcome of an iteration, limits."""

from __future__ import annotations

from typing import Literal

from hypothesis import given
from hypothesis import strategies as st

from loop.engine.decide import (
    Limits,
    Outcome,
    allowed_publish,
    check_limits,
    decide_outcome,
    judge_completion,
    missing_required,
    select_next,
)
from loop.engine.state import LoopState, PendingEvent, RouteContext, apply, fold
from loop.events import Event
from loop.exits import exit_code_for
from loop.records import IterationEnd, IterationStart, Resume, SessionEnd, SessionStart
from loop.routing import HatSpec

PLANNER = HatSpec("planner", ("task.start",), ("plan.ready",))
BUILDER = HatSpec(
    "builder", ("plan.ready",), ("build.done",), default_publishes="build.done", max_activations=2
)
CTX = RouteContext(hats=(PLANNER, BUILDER), completion_event="LOOP_COMPLETE")
LIMITS = Limits(max_iterations=10, max_runtime_seconds=60, max_consecutive_failures=2)


def start_record() -> SessionStart:
    return SessionStart(
        session_id="s",
        started_at="2026-01-01T00:00:00Z",
        config_digest="sha256:0",
        starting_event="task.start",
        completion_event="LOOP_COMPLETE",
        hats={},
        config={},
        version="0",
        config_source="test",
        start_event=Event(topic="task.start", payload="go"),
        ts=0.0,
    )


def end_record(
    n: int,
    hat: str,
    published: list[Event],
    consumed: list[int],
    *,
    status: Literal["ok", "failed"] = "ok",
    completed: bool = False,
) -> IterationEnd:
    return IterationEnd(
        iteration=n,
        hat=hat,
        backend="scripted",
        backend_ok=status == "ok",
        status=status,
        prompt="",
        output="",
        events=(),
        published=tuple(published),
        consumed=tuple(consumed),
        completed=completed,
        duration=0.0,
        elapsed=float(n),
        ts=0.0,
    )


def test_next_hat_is_the_oldest_pending_events_hat_with_all_its_events() -> None:
    """Selection is FIFO by the oldest pending event; the hat gets every event routed to it."""
    state = LoopState(
        pending=[
            PendingEvent(1, Event(topic="plan.ready"), "builder"),
            PendingEvent(2, Event(topic="task.start"), "planner"),
            PendingEvent(3, Event(topic="plan.ready", payload="2"), "builder"),
        ]
    )
    sel = select_next(state, {"planner": PLANNER, "builder": BUILDER})
    assert sel is not None and sel.hat == "builder" and not sel.exhausted
    assert [p.seq for p in sel.triggers] == [1, 3]


def test_a_hat_at_max_activations_is_exhausted_instead_of_run() -> None:
    """Past max_activations the selection says exhausted."""
    state = LoopState(
        pending=[PendingEvent(1, Event(topic="plan.ready"), "builder")], activations={"builder": 2}
    )
    sel = select_next(state, {"planner": PLANNER, "builder": BUILDER})
    assert sel is not None and sel.exhausted


def test_completion_counts_only_as_the_last_event() -> None:
    """LOOP_COMPLETE in the middle is ignored with a note; last, it completes."""
    ev = lambda t: Event(topic=t, source="planner")  # noqa: E731
    mid = decide_outcome(
        PLANNER,
        ok=True,
        failure=None,
        events=[ev("LOOP_COMPLETE"), ev("plan.ready")],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert not mid.completed and "not the last event" in mid.notes[0]
    last = decide_outcome(
        PLANNER,
        ok=True,
        failure=None,
        events=[ev("plan.ready"), ev("LOOP_COMPLETE")],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert last.completion is not None and last.consume and not last.completed
    assert [e.topic for e in last.publish] == ["plan.ready"]  # published before the judging
    verdict = judge_completion(last, "planner", blocker=None, missing=[], now=0.0)
    assert last.completed and [e.topic for e in verdict] == ["LOOP_COMPLETE"]


def test_a_blocked_completion_tells_the_hat_why() -> None:
    """With open tasks the completion is refused and a targeted rejection is published."""
    out = decide_outcome(
        PLANNER,
        ok=True,
        failure=None,
        events=[Event(topic="LOOP_COMPLETE", source="planner")],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    verdict = judge_completion(out, "planner", blocker="2 tasks open", missing=[], now=0.0)
    assert not out.completed
    assert [e.topic for e in verdict] == ["LOOP_COMPLETE", "loop.completion_rejected"]
    rejection = verdict[-1]
    assert rejection.target == "planner" and "2 tasks open" in rejection.payload
    assert out.notes == [rejection.payload]


def test_default_publishes_is_used_only_when_nothing_was_emitted() -> None:
    """A silent hat publishes its default; a default never completes the loop."""
    out = decide_outcome(
        BUILDER,
        ok=True,
        failure=None,
        events=[],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert [e.topic for e in out.publish] == ["build.done"] and out.consume
    sneaky = HatSpec("r", ("x.y",), default_publishes="LOOP_COMPLETE")
    out2 = decide_outcome(
        sneaky,
        ok=True,
        failure=None,
        events=[],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert out2.status == "failed" and not out2.completed and not out2.publish
    silent = decide_outcome(
        PLANNER,
        ok=True,
        failure=None,
        events=[],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert silent.status == "failed" and silent.reason == "no events emitted"


def test_a_failed_iteration_publishes_nothing_and_keeps_its_triggers() -> None:
    """Backend failure: no events, nothing consumed, the reason kept."""
    out = decide_outcome(
        PLANNER,
        ok=False,
        failure="exit status 3",
        events=[Event(topic="plan.ready", source="planner")],
        completion_event="LOOP_COMPLETE",
        now=0.0,
    )
    assert out.status == "failed" and not out.consume and not out.publish
    assert out.reason == "exit status 3"


def test_state_folds_a_session_and_limits_stop_it() -> None:
    """The reducer consumes, routes and counts; check_limits names the reason."""
    state = fold([start_record()], CTX)
    assert [p.event.topic for p in state.pending] == ["task.start"]
    apply(state, end_record(1, "planner", [Event(topic="plan.ready", source="planner")], [1]), CTX)
    assert state.iteration == 1 and [p.hat for p in state.pending] == ["builder"]
    assert check_limits(state, LIMITS, elapsed=1.0) is None
    apply(state, end_record(2, "builder", [], [], status="failed"), CTX)
    apply(state, end_record(3, "builder", [], [], status="failed"), CTX)
    assert state.consecutive_failures == 2
    assert check_limits(state, LIMITS, elapsed=3.0) == "max_consecutive_failures"


def test_stale_loop_is_detected_on_identical_topic_source_and_payload() -> None:
    """The same event three times in a row stops the loop; a different payload resets."""
    state = fold([start_record()], CTX)
    same = Event(topic="plan.ready", payload="same", source="planner")
    for n in (1, 2):
        apply(state, end_record(n, "planner", [same], []), CTX)
    assert check_limits(state, LIMITS, 0) is None
    apply(
        state,
        end_record(
            3, "planner", [Event(topic="plan.ready", payload="other", source="planner")], []
        ),
        CTX,
    )
    assert state.repeat_count == 1
    for n in (4, 5, 6):
        apply(state, end_record(n, "planner", [same], []), CTX)
    assert check_limits(state, LIMITS, 0) == "stale_loop"


def test_a_resume_that_goes_on_after_a_stale_stop_starts_the_streak_afresh() -> None:
    """The journal's fold: after a stale_loop end, the streak holds through resumes that
    run nothing (they stop again at once), and starts afresh at the first iteration a
    resume runs; an end for another reason keeps the streak counting."""
    same = Event(topic="plan.ready", payload="same", source="planner")
    ended = [
        start_record(),
        *(end_record(n, "planner", [same], []) for n in (1, 2, 3)),
        SessionEnd(reason="stale_loop", iterations=3, elapsed=3.0, ts=0.0),
    ]
    resumed = Resume(pid=1, iteration=3, ts=0.0)
    state = fold([*ended, resumed, ended[-1], resumed], CTX)
    assert (state.repeat_count, check_limits(state, LIMITS, 0)) == (3, "stale_loop")
    apply(state, IterationStart(iteration=4, hat="planner", triggers=(), ts=0.0), CTX)
    assert (state.repeat_count, state.last_signature) == (0, None)
    for n in (4, 5):
        apply(state, end_record(n, "planner", [same], []), CTX)
    assert state.repeat_count == 2 and check_limits(state, LIMITS, 0) is None
    other = [*ended[:3], SessionEnd(reason="max_iterations", iterations=2, elapsed=2.0, ts=0.0)]
    state = fold([*other, resumed], CTX)
    apply(state, IterationStart(iteration=3, hat="planner", triggers=(), ts=0.0), CTX)
    assert state.repeat_count == 2


def test_an_event_no_hat_takes_ends_the_loop_but_subscriber_results_do_not() -> None:
    """A hat's unrouted topic terminates; task.* results from subscribers are observed only."""
    state = fold([start_record()], CTX)
    apply(
        state,
        end_record(
            1,
            "planner",
            [
                Event(topic="task.completed", source="tasks"),
                Event(topic="task.create", source="planner"),
            ],
            [1],
        ),
        CTX,
    )
    assert state.unrouted is None
    apply(
        state, end_record(2, "planner", [Event(topic="nobody.listens", source="planner")], []), CTX
    )
    assert check_limits(state, LIMITS, 0) == "unrouted_event"


def test_limits_and_exit_codes() -> None:
    """Each reason has its exit code: 0 completed, 3 limits, 1 failures, 130 interrupted."""
    state = LoopState(iteration=10, pending=[PendingEvent(1, Event(topic="a.b"), "x")])
    assert check_limits(state, LIMITS, 0) == "max_iterations"
    state.iteration = 1
    assert check_limits(state, LIMITS, 61) == "max_runtime"
    state.pending = []
    assert check_limits(state, LIMITS, 0) == "no_pending_events"
    assert [
        exit_code_for(r)
        for r in (
            "completed",
            "max_iterations",
            "stale_loop",
            "max_consecutive_failures",
            "interrupted",
        )
    ] == [0, 3, 3, 1, 130]


@given(
    n=st.integers(min_value=0, max_value=6),
    consumed=st.lists(st.integers(min_value=1, max_value=8), max_size=4, unique=True),
)
def test_an_ok_iteration_removes_exactly_its_consumed_events(n: int, consumed: list[int]) -> None:
    """Whatever is consumed (the oldest alone, several, unknown seqs), only those go."""
    pending = [PendingEvent(seq, Event(topic="plan.ready"), "builder") for seq in range(1, n + 1)]
    state = LoopState(pending=list(pending), next_seq=n + 1)
    apply(state, end_record(1, "builder", [], consumed), CTX)
    assert [p.seq for p in state.pending] == [p.seq for p in pending if p.seq not in consumed]


def _ok(hat: HatSpec, *topics: str, **kw: object) -> Outcome:
    events = [Event(topic=t, source=hat.name) for t in topics]
    return decide_outcome(
        hat,
        ok=True,
        failure=None,
        events=events,
        completion_event="LOOP_COMPLETE",
        now=0.0,
        **kw,  # type: ignore[arg-type]
    )


def test_required_events_missing_refuse_the_completion_and_name_each() -> None:
    """Completion waits for every required topic, seen before or in this iteration."""
    published = [Event(topic="fix.applied", source="fixer")]
    missing = missing_required(
        ["hypothesis.test", "fix.applied", "fix.verified"], {"hypothesis.test"}, published
    )
    assert missing == ["fix.verified"]
    out = _ok(PLANNER, "fix.applied", "LOOP_COMPLETE")
    verdict = judge_completion(out, "planner", blocker="1 task open", missing=missing, now=0.0)
    assert not out.completed
    assert verdict[-1].payload == (
        "LOOP_COMPLETE refused: required events not published yet: fix.verified; 1 task open"
    )
    assert missing_required(["a.b"], {"a.b"}, []) == []


def test_the_cancellation_event_cancels_wherever_it_is_and_wins_over_completion() -> None:
    """Cancelled: everything is published, no completion is judged."""
    out = _ok(PLANNER, "loop.cancel", "LOOP_COMPLETE", cancellation_event="loop.cancel")
    assert out.cancelled and out.completion is None and not out.completed
    assert [e.topic for e in out.publish] == ["loop.cancel", "LOOP_COMPLETE"]
    assert "the run was cancelled" in out.notes[0]
    assert not _ok(PLANNER, "plan.ready", cancellation_event="loop.cancel").cancelled


def test_strict_publishes_drops_topics_outside_the_hats_publishes() -> None:
    """Dropped events are listed and noted; tool requests and defaults stay allowed."""
    out = _ok(PLANNER, "plan.ready", "build.done", "task.create", strict=True)
    assert [e.topic for e in out.publish] == ["plan.ready", "task.create"]
    assert [e.topic for e in out.dropped] == ["build.done"]
    assert "build.done dropped" in out.notes[0]
    loose = _ok(PLANNER, "plan.ready", "build.done")
    assert not loose.dropped and len(loose.publish) == 2
    unlisted = HatSpec("free", ("x.y",))
    assert allowed_publish(unlisted, "anything.at_all")  # no publishes: not restricted
    assert allowed_publish(BUILDER, "build.done") and not allowed_publish(BUILDER, "plan.ready")


def test_strict_publishes_dropping_everything_is_a_failed_iteration_or_the_default() -> None:
    """Nothing left: the default publish if the hat has one, else a failure saying why."""
    out = _ok(PLANNER, "build.done", strict=True)
    assert (
        out.status == "failed" and out.reason == "no events emitted (1 dropped by strict_publishes)"
    )
    out2 = _ok(BUILDER, "plan.ready", strict=True)
    assert out2.status == "ok" and [e.topic for e in out2.publish] == ["build.done"]
    assert [e.topic for e in out2.dropped] == ["plan.ready"]


def test_a_cancelled_or_completed_state_ends_the_run_before_anything_else() -> None:
    """check_limits: completed, then cancelled, take precedence over other reasons."""
    state = LoopState(cancelled=True, unrouted="loop.cancel", iteration=99)
    assert check_limits(state, LIMITS, elapsed=0.0) == "cancelled"
    assert exit_code_for("cancelled") == 0


def test_an_end_keeps_what_it_cut_short_and_its_runtime_until_a_resume() -> None:
    """A session interrupted while iteration 2 ran: the state still names iteration 2 as in
    flight (a resume runs it again and says so), and its runtime is the end's, which
    counts the time of the cut iteration; the resume clears what was in flight."""
    from loop.records import IterationStart, Resume, SessionEnd

    planner = end_record(1, "planner", [Event(topic="plan.ready", source="planner")], [1])
    state = fold(
        [
            start_record(),
            IterationStart(iteration=1, hat="planner", triggers=(1,), ts=1.0),
            planner,
            IterationStart(iteration=2, hat="builder", triggers=(2,), ts=2.0),
            SessionEnd(reason="interrupted", iterations=1, elapsed=5.3, ts=6.0),
        ],
        CTX,
    )
    assert planner.elapsed < 5.3
    assert state.elapsed == 5.3 and state.termination == "interrupted"
    assert list(state.in_flight) == [2] and state.in_flight[2].hat == "builder"
    apply(state, Resume(pid=1, iteration=1, in_flight=2, ts=7.0), CTX)
    assert state.in_flight == {} and state.elapsed == 5.3
