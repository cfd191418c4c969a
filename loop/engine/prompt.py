"""The prompt a hat receives, built in pure code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loop.events import Event

__all__ = ["PromptParts", "build_prompt"]


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


def _payload(event: Event) -> str:
    text = event.payload_text()
    return text if text else "(no payload)"


def build_prompt(parts: PromptParts) -> str:
    """The prompt: who the hat is, the objective, what triggered it, how to publish."""
    lines = [f"# hatloop · iteration {parts.iteration} · hat `{parts.hat}`", ""]
    if parts.description:
        lines += [parts.description.strip(), ""]
    if parts.instructions:
        lines += ["## Your instructions", "", parts.instructions.strip(), ""]
    lines += ["## Objective", "", parts.objective.strip(), ""]
    lines += ["## Events that triggered you", ""]
    for event in parts.triggers:
        lines.append(f"- `{event.topic}` from {event.source}:")
        lines += [f"  {line}" for line in _payload(event).splitlines()] or ["  (no payload)"]
    lines.append("")
    for block in parts.context:
        if block.strip():
            lines += [block.strip(), ""]
    lines += ["## How to publish events", ""]
    if parts.publishes:
        allowed = ", ".join(f"`{t}`" for t in parts.publishes)
        lines.append(f"You publish: {allowed}.")
    lines += [
        "Publish each event in one of two ways:",
        '- run `python -m loop emit TOPIC "payload"` (add `--json` for a JSON payload), or',
        '- write `<event topic="TOPIC">payload</event>` in your reply.',
    ]
    if not parts.publishes or parts.completion_event in parts.publishes:
        lines.append(
            f"When the whole objective is done, publish `{parts.completion_event}` as your "
            "last event."
        )
    return "\n".join(lines).rstrip() + "\n"
