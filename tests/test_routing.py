"""Routing: targets, specificity, the bare `*` fallback, reserved topics."""

from __future__ import annotations

from loop.events import Event
from loop.routing import HatSpec, route

HATS = (
    HatSpec("planner", ("task.start", "review.rejected")),
    HatSpec("builder", ("plan.*",)),
    HatSpec("special", ("plan.urgent",)),
    HatSpec("catchall", ("*",)),
)


def r(topic: str, target: str | None = None, source: str = "x") -> str | None:
    return route(
        Event(topic=topic, target=target, source=source), HATS, completion_event="LOOP_COMPLETE"
    )


def test_a_targeted_event_goes_to_its_target_whatever_the_topic() -> None:
    """target wins over every trigger; an unknown target routes nowhere."""
    assert r("plan.ready", target="planner") == "planner"
    assert r("plan.ready", target="nobody") is None


def test_specific_patterns_win_over_wildcards_and_the_fallback() -> None:
    """plan.urgent goes to the literal trigger, plan.ready to plan.*, other topics to `*`."""
    assert r("plan.urgent") == "special"
    assert r("plan.ready") == "builder"
    assert r("something.else") == "catchall"


def test_reserved_topics_never_fall_back_to_the_catch_all() -> None:
    """task.*, theme.*, experience.*, loop.* and completion are for subscribers."""
    for topic in [
        "task.completed",
        "theme.started",
        "experience.thought",
        "loop.iteration.done",
        "LOOP_COMPLETE",
    ]:
        assert r(topic) is None


def test_ties_go_to_the_hat_defined_first() -> None:
    """Two equally specific patterns: the earlier hat wins (deterministic)."""
    hats = (HatSpec("a", ("x.*",)), HatSpec("b", ("*.y",)))
    assert route(Event(topic="x.y"), hats, completion_event="DONE") == "a"


def test_configured_fallback_hat_takes_unmatched_topics() -> None:
    """Without a `*` hat, fallback_hat receives events no trigger matches."""
    hats = (HatSpec("a", ("x.y",)), HatSpec("coord", ("coord.wake",)))
    assert route(Event(topic="q.z"), hats, completion_event="D", fallback="coord") == "coord"
    assert route(Event(topic="q.z"), hats, completion_event="D") is None


def test_a_hat_publishing_the_starting_topic_does_not_restart_the_loop() -> None:
    """task.start from a hat is a task request; only the loop's own one starts the planner."""
    kw = {"completion_event": "LOOP_COMPLETE", "starting_event": "task.start"}
    assert route(Event(topic="task.start", source="loop"), HATS, **kw) == "planner"
    assert route(Event(topic="task.start", source="builder"), HATS, **kw) is None
