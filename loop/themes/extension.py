"""The theme domain in the loop: heartbeats, interrupts, prompt context.

* Every iteration is a heartbeat: :meth:`ThemesExtension.on_iteration_start` writes a
  new heartbeat ID, undoes a start that was killed half-way, and turns each
  ``feedbackbox/interrupt.*.md`` item into one ``theme.interrupt`` event (the item is
  marked processed, so it fires once).
* Hats request ``theme.preview``, ``theme.start`` and ``theme.end`` with events, which
  :class:`loop.tools.bus.ToolsOnBus` serves (see :data:`loop.themes.tools.BUS`).
* :meth:`ThemesExtension.prompt_section` tells each hat the active theme and the
  number of unprocessed feedback items.
"""

from __future__ import annotations

import anyio

from loop._log import get_logger
from loop.bus import EventBus
from loop.errors import LoopError, ToolError
from loop.events import Event
from loop.extensions import Extension
from loop.themes.models import HeartbeatOutput
from loop.themes.service import ThemeService
from loop.themes.status import render_active
from loop.themes.tools import BUS, HEARTBEAT, service_for
from loop.tools.base import ToolContext

__all__ = ["SOURCE", "ThemesExtension"]

log = get_logger(__name__)

SOURCE = BUS.source
INTERRUPT_TOPIC = f"{BUS.prefix}.interrupt"
ERROR_TOPIC = f"{BUS.prefix}.error"
_REQUEST_ACTIONS = frozenset(r.action for r in BUS.requests) | {r.tool for r in BUS.requests}


class ThemesExtension(Extension):
    """Connects the theme workspace of ``ctx`` to the loop."""

    name = SOURCE

    def __init__(self, ctx: ToolContext, *, until_used: bool = False) -> None:
        self.ctx = ctx
        self.service: ThemeService = service_for(ctx)
        # not configured: dormant (no heartbeat, no prompt section, no files) until the
        # workspace exists (a theme tool made it) or a hat sends a theme request
        self._active = not until_used

    def active(self) -> bool:
        """Whether the theme domain is in use: configured, or its workspace exists."""
        if not self._active and self.ctx.workspace.is_dir():
            self._active = True
        return self._active

    def attach(self, bus: EventBus) -> None:
        """Notice a hat's theme request: the domain is used from then on."""
        bus.subscribe(f"{BUS.prefix}.*", self._on_theme_event, name=f"{SOURCE}-use")

    def _on_theme_event(self, event: Event) -> None:
        action = event.topic.partition(".")[2]
        if event.source not in ("loop", SOURCE) and action in _REQUEST_ACTIONS:
            self._active = True  # heartbeats from the next iteration on

    async def on_iteration_start(self, iteration: int, hat: str) -> list[Event]:
        """Write this iteration's heartbeat ID; return one interrupt event per item."""
        if not self.active():
            return []
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
        """The bus's error convention (:mod:`loop.tools.bus`): the error keeps its code."""
        log.warning("theme heartbeat failed", code=exc.code, error=exc.message)
        payload = {"request": "heartbeat", "tool": None, **exc.to_dict()}
        return Event(topic=ERROR_TOPIC, payload=payload, source=SOURCE)

    def prompt_section(self, hat: str) -> str | None:
        """The active theme and the number of unprocessed feedback items (nothing while
        the theme domain is unused)."""
        if not self.active():
            return None
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
