"""Hats call the experience tools through events: ``experience.<action>`` in, results out.

A hat publishes ``experience.init`` (or ``.conversations``, ``.thoughts``,
``.finalize``, ``.status``... see :data:`REQUESTS`) with the tool's input as a JSON
payload; the extension runs the tool and publishes, with source ``experience`` and
addressed back to the requesting hat:

* ``experience.exported`` after a successful finalize;
* ``experience.status`` after any other successful call;
* ``experience.error`` with the structured error when the call fails.

``experience.thought`` is data for the session export, not a request, and the
extension's own result topics are ignored, so it never answers itself.
"""

from __future__ import annotations

from typing import Any

import structlog
from anyio import to_thread

from loop.bus import EventBus
from loop.errors import ToolError
from loop.events import Event
from loop.experience.tools import TOOLS
from loop.extensions import Extension
from loop.tools.base import Tool, ToolContext, payload_arguments

__all__ = ["ERROR_TOPIC", "EXPORTED_TOPIC", "REQUESTS", "STATUS_TOPIC", "ExperienceExtension"]

log = structlog.get_logger(__name__)

SOURCE = "experience"
EXPORTED_TOPIC = "experience.exported"
STATUS_TOPIC = "experience.status"
ERROR_TOPIC = "experience.error"

# request action (the topic's last segment) -> tool name; full tool names work too
REQUESTS: dict[str, str] = {
    "init": "export_experience_init",
    "conversations": "export_experience_conversations",
    "thoughts": "export_experience_thoughts",
    "finalize": "export_experience_finalize",
    "get_status": "get_export_status",
    "get_export_status": "get_export_status",
    "list": "list_experiences",
    "validate": "validate_experience",
}
_IGNORED = {"thought", "exported", "status", "error"}
_BARE_SESSION_ID = {"finalize", "get_status", "get_export_status"}
_TOOLS: dict[str, Tool] = {tool.name: tool for tool in TOOLS}


def _arguments(action: str, payload: Any) -> dict[str, Any]:
    """The tool input from an event payload: a JSON object, or a bare session id."""
    return payload_arguments(
        payload,
        code="invalid_input",
        bad_json="payload is not valid JSON",
        not_object=f"experience.{action} needs a JSON object payload with the tool's input",
        bare_id="session_id" if action in _BARE_SESSION_ID else None,
        blank_is_empty=action == "list",
    )


def _tool_for(request: str, tool_name: str) -> Tool:
    tool = _TOOLS.get(tool_name)
    if tool is None:
        raise ToolError(
            "unknown_request",
            f"{request} is not an experience request; use one of {', '.join(sorted(REQUESTS))}",
        )
    return tool


class ExperienceExtension(Extension):
    """Serves the experience tools to hats over the bus."""

    name = "experience"

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``experience.*`` requests."""
        self._bus = bus
        bus.subscribe("experience.*", self._on_event, name="experience")

    async def _on_event(self, event: Event) -> None:
        action = event.topic.split(".", 1)[1]
        if action in _IGNORED or event.source == SOURCE:
            return
        topic, payload = await self.handle(action, event.payload)
        target = event.source if event.source not in ("loop", SOURCE) else None
        if self._bus is not None:
            await self._bus.publish(
                Event(topic=topic, payload=payload, source=SOURCE, target=target)
            )

    async def handle(self, action: str, payload: Any) -> tuple[str, dict[str, Any]]:
        """Run the tool for ``action``; return the result topic and payload."""
        request = f"experience.{action}"
        tool_name = REQUESTS.get(action, action)
        try:
            tool = _tool_for(request, tool_name)
            args = _arguments(action, payload)
            # The tools do blocking file I/O (fsync, locks): keep it off the event loop.
            result = await to_thread.run_sync(tool.run, self.ctx, args)
        except ToolError as exc:
            log.info("experience request failed", request=request, code=exc.code)
            return ERROR_TOPIC, {"request": request, "tool": tool_name, **exc.to_dict()}
        body = {
            "request": request,
            "tool": tool.name,
            "result": result.model_dump(mode="json", by_alias=True),
        }
        return (EXPORTED_TOPIC if tool.name == "export_experience_finalize" else STATUS_TOPIC, body)
