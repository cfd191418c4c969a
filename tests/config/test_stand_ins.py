"""Scripted stand-ins: one walk from the starting event to the completion event, with the
required events published on the way, and an answer for every activation."""

from __future__ import annotations

from typing import Any

from loop.config.models import HatConfig
from loop.config.sections import LoopSection
from loop.config.stand_ins import StandIns, stand_ins
from loop.events import parse_event_tags


def _stand_ins(hats: dict[str, dict[str, Any]], **loop: Any) -> StandIns:
    return stand_ins(
        LoopSection.model_validate(loop),
        {name: HatConfig.model_validate(hat) for name, hat in hats.items()},
    )


def _topics(output: str) -> list[str]:
    return [e.topic for e in parse_event_tags(output, source="x")]


def test_the_required_events_are_published_before_the_completion() -> None:
    """A builder that may complete at once builds first, since the tester's verdict is
    required; the tester passes (its failure, listed first, leads nowhere nearer); the
    builder completes on its second activation."""
    got = _stand_ins(
        {
            "builder": {
                "triggers": ["task.start", "tests.failed", "tests.passed"],
                "publishes": ["build.done", "LOOP_COMPLETE"],
            },
            "tester": {"triggers": ["build.done"], "publishes": ["tests.failed", "tests.passed"]},
        },
        required_events=["tests.passed"],
    )
    assert got.walk == ("build.done", "tests.passed", "LOOP_COMPLETE")
    assert [_topics(o) for o in got.outputs["builder"]] == [["build.done"], ["LOOP_COMPLETE"]]
    assert [_topics(o) for o in got.outputs["tester"]] == [["tests.passed"]]
    assert got.stuck is None
    assert got.backend("builder").repeat_last  # past its part of the walk, it completes again


def test_a_required_event_no_hat_takes_is_published_with_the_completion() -> None:
    """An event no hat takes would end the run as unrouted on its own: the hat that may
    publish it does so in the activation that completes, before the completion event."""
    got = _stand_ins(
        {"a": {"triggers": ["task.start"], "publishes": ["report.written", "LOOP_COMPLETE"]}},
        required_events=["report.written"],
    )
    assert [_topics(o) for o in got.outputs["a"]] == [["report.written", "LOOP_COMPLETE"]]


def test_the_walk_avoids_the_fallback_hat_where_it_can_and_answers_off_it() -> None:
    """A shorter way through the fallback hat (a Ralph coordinator) is not taken while the
    hats' own flow gets there; the coordinator, off the walk, answers with the first step
    of its own walk."""
    got = _stand_ins(
        {
            "builder": {"triggers": ["task.start"], "publishes": ["build.blocked", "review.ready"]},
            "critic": {"triggers": ["review.ready"], "publishes": ["review.passed"]},
            "finalizer": {"triggers": ["review.passed"], "publishes": ["LOOP_COMPLETE"]},
            "ralph": {"triggers": ["build.blocked"], "publishes": ["review.passed"]},
        },
        fallback_hat="ralph",
    )
    assert got.walk == ("review.ready", "review.passed", "LOOP_COMPLETE")
    assert [_topics(o) for o in got.outputs["ralph"]] == [["review.passed"]]


def test_a_wave_is_published_whole_and_each_of_its_activations_has_its_output() -> None:
    """A topic a hat of concurrency 3 takes is published three times, and that hat has one
    output per activation, each with its own payload."""
    got = _stand_ins(
        {
            "coordinator": {"triggers": ["task.start"], "publishes": ["review.perspective"]},
            "reviewer": {
                "triggers": ["review.perspective"],
                "publishes": ["review.done"],
                "concurrency": 3,
            },
            "synthesizer": {
                "triggers": ["review.done"],
                "publishes": ["LOOP_COMPLETE"],
                "aggregate": {"mode": "wait_for_all"},
            },
        }
    )
    [fan_out] = got.outputs["coordinator"]
    assert [e.payload for e in parse_event_tags(fan_out, source="c")] == [
        f"part {i} of 3" for i in (1, 2, 3)
    ]
    assert [parse_event_tags(o, source="r")[0].payload for o in got.outputs["reviewer"]] == [
        "done 1",
        "done 2",
        "done 3",
    ]
    assert [_topics(o) for o in got.outputs["synthesizer"]] == [["LOOP_COMPLETE"]]


def test_without_a_walk_the_stand_ins_say_why_and_still_answer() -> None:
    """No hat publishes the completion event: no walk completes, ``stuck`` says so, and
    each hat still publishes an event some hat takes (a limit then stops the loop)."""
    got = _stand_ins(
        {
            "analyzer": {"triggers": ["gap.start", "verify.complete"], "publishes": ["x.y"]},
            "verifier": {"triggers": ["x.y"], "publishes": ["verify.complete"]},
        },
        starting_event="gap.start",
        completion_event="GAP_DONE",
    )
    assert got.walk == ()
    assert got.stuck is not None
    assert got.stuck.startswith(
        "no chain of events that hats take leads from gap.start to GAP_DONE"
    )
    assert [_topics(o) for o in got.outputs["analyzer"]] == [["x.y"]]
    assert [_topics(o) for o in got.outputs["verifier"]] == [["verify.complete"]]
