"""Extensions: bus subscribers that also take part in an iteration.

The task, theme and experience domains connect to the loop as extensions. Each
subscribes to the bus in :meth:`Extension.attach` and publishes its results as
events (``task.completed``, ``theme.error``...). The engine also asks every
extension, at fixed points of an iteration, for:

* :meth:`on_iteration_start`: act at the start of an iteration (the theme heartbeat)
  and return events to publish before the hat runs (an ``interrupt`` event);
* :meth:`prompt_section`: a short block of context for the hat's prompt;
* :meth:`completion_blocker`: a reason to refuse the completion event, or ``None``;
* :meth:`committed`: an iteration just reached the journal (its record, and the exact
  line written), before ``loop.iteration.done`` is published;
* :meth:`flush`: write out anything buffered; the loop is about to wait (a hat that is
  not instant, a turn of the event loop) or to end.

The engine calls a per-iteration hook only on the extensions that override it.
"""

from __future__ import annotations

from typing import Any

from loop.bus import EventBus
from loop.events import Event

__all__ = ["Extension"]


class Extension:
    """Base class with no-op defaults; override what the extension needs."""

    name: str = "extension"

    def attach(self, bus: EventBus) -> None:
        """Subscribe handlers on ``bus`` (keep the bus to publish results)."""

    async def on_iteration_start(self, iteration: int, hat: str) -> list[Event]:
        """Act at the start of iteration ``iteration`` (run by ``hat``); return events."""
        return []

    def prompt_section(self, hat: str) -> str | None:
        """Context for ``hat``'s prompt (Markdown, a few lines), or ``None``."""
        return None

    def completion_blocker(self) -> str | None:
        """Why the loop may not complete now, or ``None`` when it may."""
        return None

    def committed(self, record: dict[str, Any], line: bytes) -> None:
        """Iteration ``record`` is in the journal as ``line`` (do not mutate either)."""

    def flush(self) -> None:
        """Write out what is buffered (called before the loop waits, and at the end)."""

    async def aclose(self) -> None:
        """Release what the extension holds when the run ends."""
