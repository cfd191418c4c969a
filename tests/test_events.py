"""Events: topic rules, pattern matching, the <event> tag channel."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loop.engine.collect import collect_events
from loop.engine.prompt import PromptTemplate
from loop.errors import InputError
from loop.events import (
    Event,
    is_valid_pattern,
    parse_event_tags,
    pattern_specificity,
    topic_matches,
    validate_topic,
)


@pytest.mark.parametrize(
    ("pattern", "topic", "expected"),
    [
        ("task.*", "task.start", True),
        ("task.*", "task.start.now", False),
        ("*.done", "build.done", True),
        ("*.done", "build.failed", False),
        ("*", "anything.at.all", True),
        ("plan.ready", "plan.ready", True),
        ("plan.ready", "plan.readyx", False),
    ],
)
def test_topic_matches_per_segment(pattern: str, topic: str, expected: bool) -> None:
    """`*` matches exactly one segment; a bare `*` matches everything."""
    assert topic_matches(pattern, topic) is expected


def test_specificity_ranks_literals_above_wildcards_and_fallback_last() -> None:
    """Literal segments beat wildcards, and the bare `*` ranks below every pattern."""
    assert pattern_specificity("task.start") > pattern_specificity("task.*")
    assert pattern_specificity("task.*") > pattern_specificity("*")
    assert pattern_specificity("*.*") > pattern_specificity("*")


def test_invalid_topics_are_refused_with_a_reason() -> None:
    """Empty segments, spaces and wildcards are not topics."""
    for bad in ["", "a..b", "has space", "task.*", "."]:
        with pytest.raises(InputError, match="invalid topic"):
            validate_topic(bad)
    assert is_valid_pattern("task.*") and not is_valid_pattern("task.**x")


def test_tags_are_parsed_with_json_payloads_targets_and_entities() -> None:
    """Tags yield events in order; JSON bodies stay JSON; attributes are unescaped."""
    text = (
        'thinking...\n<event topic="plan.ready">step 1</event>\n'
        '<event topic=\'task.create\' target="builder">{"name": "x"}</event>\n'
        '<event topic="bad topic">ignored</event><event topic="a.b"/>'
    )
    events = parse_event_tags(text, source="planner")
    assert [e.topic for e in events] == ["plan.ready", "task.create", "a.b"]
    assert events[0].payload == "step 1" and events[0].source == "planner"
    assert events[1].payload == {"name": "x"} and events[1].target == "builder"
    assert events[2].payload == ""


def test_a_json_payload_reads_as_compact_sorted_json() -> None:
    """payload_text: text as it is, anything else as compact JSON with sorted keys."""
    ev = Event(topic="x.y", payload={"b": [1, 2], "a": None}, source="h", target="t", ts=12.5)
    assert ev.payload_text() == '{"a": null, "b": [1, 2]}'
    assert Event(topic="x.y", payload="as is").payload_text() == "as is"


FRAGMENTS = st.sampled_from(
    [
        '<event topic="plan.ready">step 1</event>',
        '<event topic="a">{"k": [1, 2]}</event>',
        '<event topic="a"> [1, </event>',
        '<event topic="b.c" target="builder">x</event>',
        '<EVENT topic="up">loud</EVENT>',
        '<event topic="bad topic">no</event>',
        "<event topic='single'>quoted</event>",
        '<event topic="self"/>',
        '<event topic="amp">a &amp; b</event>',
        "a < b",
        "<",
        "plain text ",
        "\n",
        "é",
    ]
)


@given(st.lists(FRAGMENTS, max_size=6))
def test_the_tags_of_an_output_are_the_tags_of_its_parts(parts: list[str]) -> None:
    """Tags are found one by one, in order: text around a tag never changes what it says."""

    def seen(text: str) -> list[tuple[object, ...]]:
        return [
            (e.topic, e.payload, e.target, e.source, e.ts)
            for e in parse_event_tags(text, source="h", ts=1.0)
        ]

    assert seen("".join(parts)) == [event for part in parts for event in seen(part)]


def test_the_prompts_own_example_tag_is_not_an_event(tmp_path: Path) -> None:
    """An agent that echoes its prompt publishes only its real events: the example tag's
    placeholder topic (`TOPIC`, exactly as the prompt writes it) is ignored in a tag, and
    an emit-file line with it is a problem noted, not an event."""
    prompt = PromptTemplate(
        hat="h",
        description="",
        instructions="",
        objective="o",
        publishes=["done"],
        completion_event="LOOP_COMPLETE",
    ).render(1, [])
    assert '<event topic="TOPIC">payload</event>' in prompt
    echoed = prompt + '\n<event topic="done">ok</event>\n<event topic="topic">lower</event>'
    assert [e.topic for e in parse_event_tags(echoed, source="h")] == ["done", "topic"]
    events_file = tmp_path / "events.jsonl"
    events_file.write_text('{"topic": "TOPIC", "payload": "payload"}\n', encoding="utf-8")
    found = collect_events("h", echoed, events_file, 1.0)
    assert found.emitted == [] and [e.topic for e in found.events] == ["done", "topic"]
    assert [str(p) for p in found.problems] == [
        "line 1: topic TOPIC is the prompt's placeholder, ignored: name the event's topic"
    ]
