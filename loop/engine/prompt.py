"""The prompt a hat receives, built in pure code."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loop.config import LoadedConfig
from loop.events import Event

__all__ = ["PromptTemplate", "templates_for"]


def _payload(event: Event) -> str:
    text = event.payload_text()
    return text if text else "(no payload)"


class PromptTemplate:
    """The parts of one hat's prompt that stay the same from iteration to iteration.

    Built once per hat and run; :meth:`render` adds the iteration number, the triggers
    and the extensions' context.
    """

    __slots__ = ("_hat", "_head", "_tail")

    def __init__(
        self,
        *,
        hat: str,
        description: str,
        instructions: str,
        objective: str,
        publishes: Sequence[str],
        completion_event: str,
        guardrails: Sequence[str] = (),
        required_events: Sequence[str] = (),
    ) -> None:
        head: list[str] = [""]
        if description:
            head += [description.strip(), ""]
        if instructions:
            head += ["## Your instructions", "", instructions.strip(), ""]
        rules = [g.strip() for g in guardrails if g.strip()]
        if rules:
            head += ["## Guardrails", "", *(f"- {g}" for g in rules), ""]
        head += ["## Objective", "", objective.strip(), ""]
        head += ["## Events that triggered you", ""]
        tail = ["## How to publish events", ""]
        if publishes:
            allowed = ", ".join(f"`{t}`" for t in publishes)
            tail.append(f"You publish: {allowed}.")
        tail += [
            "Publish each event in one of two ways:",
            '- run `"$LOOP_PYTHON" -m loop emit TOPIC "payload"` in a shell (add `--json` for a '
            "JSON payload; `$LOOP_PYTHON` names hatloop's Python, so this works in any shell), or",
            '- write `<event topic="TOPIC">payload</event>` in your reply.',
        ]
        if not publishes or completion_event in publishes:
            tail.append(
                f"When the whole objective is done, publish `{completion_event}` as your "
                "last event."
            )
            if required_events:
                listed = ", ".join(f"`{t}`" for t in required_events)
                tail.append(
                    f"`{completion_event}` is accepted only once each of these events has "
                    f"been published in this run: {listed}."
                )
        self._hat = hat
        self._head = "\n".join(head) + "\n"
        self._tail = "\n".join(tail).rstrip() + "\n"

    def renders(self, prompt: str, redact: Callable[[str], str] | None = None) -> bool:
        """Whether ``prompt`` is one this template renders, whatever its iteration,
        triggers and context: the same hat, description, instructions, guardrails,
        objective and publishing rules. ``redact``: what the journal that holds
        ``prompt`` did to its text (secrets masked)."""
        head, tail = self._head, self._tail
        if redact is not None:
            head, tail = redact(head), redact(tail)
        first, _, rest = prompt.partition("\n")
        return (
            first.startswith("# hatloop · iteration ")
            and first.endswith(f" · hat `{self._hat}`")
            and rest.startswith(head)
            and rest.endswith(tail)
        )

    def render(self, iteration: int, triggers: Sequence[Event], context: Sequence[str] = ()) -> str:
        """The prompt for ``iteration``, run on ``triggers``, with ``context`` blocks."""
        lines = [f"# hatloop · iteration {iteration} · hat `{self._hat}`", self._head]
        for event in triggers:  # each line of the payload indented under its event
            lines.append(f"- `{event.topic}` from {event.source}:\n")
            lines.append("  " + "\n  ".join(_payload(event).splitlines()) + "\n")
        lines.append("\n")
        for block in context:
            if stripped := block.strip():
                lines.append(f"{stripped}\n\n")
        lines[0] += "\n"
        lines.append(self._tail)
        return "".join(lines)


def templates_for(config: LoadedConfig) -> dict[str, PromptTemplate]:
    """Each hat's template, built once per run."""
    loop = config.loop
    return {
        name: PromptTemplate(
            hat=name,
            description=hat.description,
            instructions=hat.instructions,
            objective=config.prompt,
            publishes=hat.publishes,
            completion_event=loop.completion_event,
            guardrails=loop.guardrails,
            required_events=loop.required_events,
        )
        for name, hat in config.hats.items()
    }
