"""The prompt: the cached per-hat template gives exactly the documented layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from loop.engine.prompt import PromptTemplate
from loop.events import Event


@dataclass(frozen=True)
class PromptParts:
    """Everything that goes into one hat's prompt."""

    hat: str
    description: str
    instructions: str
    objective: str
    iteration: int
    triggers: Sequence[Event]
    publishes: Sequence[str]
    completion_event: str
    context: Sequence[str] = ()


def build_prompt(parts: PromptParts) -> str:
    """The engine's way: a template for the hat, rendered for the iteration."""
    return PromptTemplate(
        hat=parts.hat,
        description=parts.description,
        instructions=parts.instructions,
        objective=parts.objective,
        publishes=parts.publishes,
        completion_event=parts.completion_event,
    ).render(parts.iteration, parts.triggers, parts.context)


def reference_prompt(parts: PromptParts) -> str:
    """The prompt layout, written out plainly (the builder before it was cached)."""
    lines = [f"# hatloop · iteration {parts.iteration} · hat `{parts.hat}`", ""]
    if parts.description:
        lines += [parts.description.strip(), ""]
    if parts.instructions:
        lines += ["## Your instructions", "", parts.instructions.strip(), ""]
    lines += ["## Objective", "", parts.objective.strip(), ""]
    lines += ["## Events that triggered you", ""]
    for event in parts.triggers:
        text = event.payload_text() or "(no payload)"
        lines.append(f"- `{event.topic}` from {event.source}:")
        lines += [f"  {line}" for line in text.splitlines()] or ["  (no payload)"]
    lines.append("")
    for block in parts.context:
        if block.strip():
            lines += [block.strip(), ""]
    lines += ["## How to publish events", ""]
    if parts.publishes:
        lines.append("You publish: " + ", ".join(f"`{t}`" for t in parts.publishes) + ".")
    lines += [
        "Publish each event in one of two ways:",
        '- run `"$LOOP_PYTHON" -m loop emit TOPIC "payload"` in a shell (add `--json` for a '
        "JSON payload; `$LOOP_PYTHON` names hatloop's Python, so this works in any shell), or",
        '- write `<event topic="TOPIC">payload</event>` in your reply.',
    ]
    if not parts.publishes or parts.completion_event in parts.publishes:
        lines.append(
            f"When the whole objective is done, publish `{parts.completion_event}` as your "
            "last event."
        )
    return "\n".join(lines).rstrip() + "\n"


# text with every kind of line break str.splitlines knows, blanks and JSON-ish characters
TEXT = st.text(alphabet=st.sampled_from(list('ab {}"\n\r\t\x0b\x1c\u2028')), max_size=14)
EVENTS = st.builds(
    Event,
    topic=st.sampled_from(["a.b", "plan.ready"]),
    payload=st.one_of(TEXT, st.dictionaries(st.sampled_from(["k", "é"]), st.integers())),
    source=st.sampled_from(["loop", "planner"]),
)


@settings(max_examples=400, deadline=None)
@given(
    description=TEXT,
    instructions=TEXT,
    objective=TEXT,
    iteration=st.integers(min_value=1, max_value=10_000),
    triggers=st.lists(EVENTS, max_size=3),
    publishes=st.lists(st.sampled_from(["plan.ready", "LOOP_COMPLETE"]), max_size=2),
    context=st.lists(TEXT, max_size=3),
)
def test_template_renders_the_reference_layout(
    *,
    description: str,
    instructions: str,
    objective: str,
    iteration: int,
    triggers: list[Event],
    publishes: list[str],
    context: Sequence[str],
) -> None:
    """Cached parts plus the per-iteration parts give the reference text, byte for byte."""
    parts = PromptParts(
        hat="planner",
        description=description,
        instructions=instructions,
        objective=objective,
        iteration=iteration,
        triggers=triggers,
        publishes=publishes,
        completion_event="LOOP_COMPLETE",
        context=context,
    )
    assert build_prompt(parts) == reference_prompt(parts)


def test_one_template_serves_every_iteration() -> None:
    """A template built once renders each iteration's number, triggers and context."""
    template = PromptTemplate(
        hat="builder",
        description="Builds.",
        instructions="",
        objective="Ship it.",
        publishes=["build.done"],
        completion_event="LOOP_COMPLETE",
    )
    first = template.render(1, [Event(topic="plan.ready", payload="step 1", source="planner")])
    second = template.render(
        2, [Event(topic="plan.ready", payload="", source="planner")], ["## Tasks\n- a"]
    )
    assert first.startswith("# hatloop · iteration 1 · hat `builder`\n\nBuilds.\n")
    assert "- `plan.ready` from planner:\n  step 1\n" in first
    assert "You publish: `build.done`." in first
    assert "LOOP_COMPLETE" not in first  # the builder cannot complete the loop
    assert second.startswith("# hatloop · iteration 2 ·")
    assert "  (no payload)\n" in second
    assert "## Tasks\n- a\n\n## How to publish events" in second


def test_a_template_knows_the_prompts_it_renders_whatever_the_iteration() -> None:
    """A journaled prompt is the template's whatever its iteration, triggers and context;
    another hat's, or one with other instructions or publishes, is not; a prompt whose
    secrets the journal masked is recognised with the same redaction."""

    def template(
        instructions: str = "Build.", publishes: Sequence[str] = ("b.done",)
    ) -> PromptTemplate:
        return PromptTemplate(
            hat="builder",
            description="Builds.",
            instructions=instructions,
            objective="Ship it.",
            publishes=publishes,
            completion_event="LOOP_COMPLETE",
        )

    event = Event(topic="plan.ready", payload="## Your instructions\n\nx", source="planner")
    prompt = template().render(7, [event], ["## Tasks\n- a"])
    assert template().renders(prompt)
    assert not template("Build well.").renders(prompt)
    assert not template(publishes=("b.done", "b.failed")).renders(prompt)
    other = PromptTemplate(
        hat="tester",
        description="Builds.",
        instructions="Build.",
        objective="Ship it.",
        publishes=["b.done"],
        completion_event="LOOP_COMPLETE",
    )
    assert not other.renders(prompt)
    masked = template("Use s3cr3t-v4lue.").render(1, [event]).replace("s3cr3t-v4lue", "[r]")
    assert template("Use s3cr3t-v4lue.").renders(masked, lambda t: t.replace("s3cr3t-v4lue", "[r]"))
    assert not template("Use s3cr3t-v4lue.").renders(masked)
