"""The theme domain in the loop: heartbeats, interrupts, bus requests, prompt context.

* Every iteration is a heartbeat: :meth:`ThemesExtension.on_iteration_start` writes a
  new heartbeat ID, undoes a start that was killed half-way, and turns each
  ``feedbackbox/interrupt.*.md`` item into one ``theme.interrupt`` event (the item is
  marked processed, so it fires once).
* Hats may publish ``theme.preview``, ``theme.start`` and ``theme.end`` with the tool
  inputs as a JSON payload; the results come back as ``theme.previewed``,
  ``theme.started``, ``theme.ended`` or ``theme.error`` (source ``themes``).
* :meth:`ThemesExtension.prompt_section` tells each hat the active theme and the
  number of unprocessed feedback items.
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from loop.bus import EventBus
from loop.errors import LoopError, ToolError
from loop.events import Event
from loop.extensions import Extension
from loop.themes.models import HeartbeatOutput
from loop.themes.service import ThemeService
from loop.themes.status import render_active
from loop.themes.tools import HEARTBEAT, TOOLS, service_for
from loop.tools.base import ToolContext, payload_arguments

__all__ = ["SOURCE", "ThemesExtension"]

log = structlog.get_logger(__name__)

SOURCE = "themes"
INTERRUPT_TOPIC = "theme.interrupt"
# request topic -> (tool, result topic)
REQUESTS: dict[str, tuple[str, str]] = {
    "theme.preview": ("preview_next_theme", "theme.previewed"),
    "theme.start": ("start_theme", "theme.started"),
    "theme.end": ("end_theme", "theme.ended"),
}
_TOOLS = {t.name: t for t in TOOLS}


def _payload_args(event: Event) -> dict[str, Any]:
    """The tool input: a JSON object (or JSON text of one); blank and ``null`` are ``{}``."""
    return payload_arguments(
        event.payload,
        code="invalid_input",
        bad_json=f"{event.topic} payload is not JSON",
        not_object=f"{event.topic} payload must be a JSON object",
        blank_is_empty=True,
        lenient=True,
    )


class ThemesExtension(Extension):
    """Connects the theme workspace of ``ctx`` to the loop."""

    name = SOURCE

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.service: ThemeService = service_for(ctx)
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Subscribe to the request topics (never to the result topics)."""
        self._bus = bus
        for topic in REQUESTS:
            bus.subscribe(topic, self._on_request, name=f"themes:{topic}")

    async def _on_request(self, event: Event) -> None:
        if event.source == SOURCE or event.topic not in REQUESTS or self._bus is None:
            return
        tool_name, result_topic = REQUESTS[event.topic]
        try:
            args = _payload_args(event)
            out = await anyio.to_thread.run_sync(
                lambda: _TOOLS[tool_name].run(self.ctx, args).model_dump(mode="json")
            )
        except LoopError as exc:
            err = exc if isinstance(exc, ToolError) else ToolError("theme_error", exc.message)
            log.info("theme request failed", topic=event.topic, code=err.code)
            payload = {"request": event.topic, **err.to_dict()}
            await self._bus.publish(
                Event(topic="theme.error", payload=payload, source=SOURCE, target=event.source)
            )
            return
        await self._bus.publish(
            Event(topic=result_topic, payload=out, source=SOURCE, target=event.source)
        )

    async def on_iteration_start(self, iteration: int, hat: str) -> list[Event]:
        """Write this iteration's heartbeat ID; return one interrupt event per item."""
        return await anyio.to_thread.run_sync(self._heartbeat)

    def _heartbeat(self) -> list[Event]:
        """The heartbeat's events; a workspace that fails here never stops the loop.

        The heartbeat is a tool call of the loop's own (:data:`HEARTBEAT`), journaled as
        part of the iteration. A failure (an unwritable stats folder, a feedback item
        that cannot be marked processed) ends the heartbeat with a ``theme.error`` event
        after the interrupts gathered so far; the next iteration tries again.
        """
        try:
            out = HEARTBEAT.run(self.ctx, {}, channel="loop")
        except LoopError as exc:
            return [self._failed(exc)]
        assert isinstance(out, HeartbeatOutput)
        for note in out.repaired:
            log.warning("theme workspace repaired", note=note)
        events = [
            Event(
                topic=INTERRUPT_TOPIC,
                payload={
                    "name": item.name,
                    "file": item.file,
                    "content": item.content,
                    "heartbeatId": out.heartbeatId,
                },
                source=SOURCE,
            )
            for item in out.interrupts
        ]
        if out.error is not None:
            events.append(self._failed(ToolError(out.error["code"], out.error["message"])))
        return events

    def _failed(self, exc: LoopError) -> Event:
        err = exc if isinstance(exc, ToolError) else ToolError("theme_error", exc.message)
        log.warning("theme heartbeat failed", code=err.code, error=err.message)
        payload = {"request": "heartbeat", **err.to_dict()}
        return Event(topic="theme.error", payload=payload, source=SOURCE)

    def prompt_section(self, hat: str) -> str | None:
        """The active theme and the number of unprocessed feedback items."""
        try:
            status = self.service.status()
        except LoopError as exc:
            return f"## Themes\n\nthe theme workspace cannot be read: {exc.message}"
        lines = ["## Themes", ""]
        if status.activeThemes:
            lines.append("Active theme:")
            lines.append(render_active(status.activeThemes))
        else:
            lines.append("No active theme (preview_next_theme shows the next candidate).")
        lines.append(
            f"Unprocessed feedback items: {status.unprocessedFeedback}"
            + (" (read them with check_and_process_item)" if status.unprocessedFeedback else "")
        )
        if status.cooldown:
            lines.append(
                "A theme was started or ended at this heartbeat: start or end the "
                "next one at a later heartbeat."
            )
        return "\n".join(lines)
