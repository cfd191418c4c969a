"""The task subscriber: hats change tasks with ``task.*`` events; results go back on the bus.

Requests (payload: the tool's input as a JSON object)::

    task.create  task.get  task.list  task.update  task.delete  task.start  task.complete

Results (source ``tasks``): ``task.created``, ``task.found``, ``task.listed``,
``task.updated``, ``task.deleted``, ``task.started``, ``task.completed``; after every
change ``task.progress`` (the progress summary); on failure ``task.error`` with the
structured error and the request topic. Result topics are never requests, so the
subscriber cannot feed itself. Events from the loop itself are ignored: the loop's
starting event may be called ``task.start`` and carries the prompt, not a task.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import structlog

from loop.bus import EventBus
from loop.errors import LoopError, ToolError
from loop.events import Event
from loop.extensions import Extension
from loop.tasks.models import Task
from loop.tasks.store import store_for
from loop.tasks.summary import active_path, next_task, progress_summary
from loop.tasks.tools import TOOLS
from loop.tasks.tree import Forest
from loop.tools.base import Tool, ToolContext, payload_arguments

__all__ = ["REQUESTS", "SOURCE", "TasksExtension"]

log = structlog.get_logger(__name__)

SOURCE = "tasks"
_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
# request action -> (tool, result action, whether it changes tasks)
REQUESTS: dict[str, tuple[str, str, bool]] = {
    "create": ("createTask", "created", True),
    "get": ("getTask", "found", False),
    "list": ("listTasks", "listed", False),
    "update": ("updateTask", "updated", True),
    "delete": ("deleteTask", "deleted", True),
    "start": ("startTask", "started", True),
    "complete": ("completeTask", "completed", True),
}
_ID_ONLY = {"get", "start", "delete"}
_MAX_LISTED = 8


def _arguments(action: str, payload: Any) -> dict[str, Any]:
    """The tool input carried by a request's payload (a JSON object, or a bare id)."""
    return payload_arguments(
        payload,
        code="invalid_payload",
        bad_json=f"task.{action}: payload is not valid JSON",
        not_object=f"task.{action} needs a JSON object payload with the {REQUESTS[action][0]} "
        'arguments, e.g. {"id": "...", "resolution": "..."}',
        bare_id="id" if action in _ID_ONLY else None,
        blank_is_empty=action == "list",
    )


class TasksExtension(Extension):
    """Applies ``task.*`` requests, adds task progress to prompts, guards completion."""

    name = "tasks"

    def __init__(self, ctx: ToolContext, *, block_completion: bool = True) -> None:
        self.ctx = ctx
        self.block_completion = block_completion
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``task.*`` on ``bus``."""
        self._bus = bus
        bus.subscribe("task.*", self._on_event, name="tasks")

    async def _on_event(self, event: Event) -> None:
        action = event.topic.split(".", 1)[1]
        if event.source in (SOURCE, "loop") or action not in REQUESTS:
            return
        tool_name, result_action, changes = REQUESTS[action]
        try:
            args = _arguments(action, event.payload)
            tool = _BY_NAME[tool_name]
            result = await anyio.to_thread.run_sync(tool.run, self.ctx, args)
        except ToolError as exc:
            await self._publish("error", {**exc.to_dict(), "request": event.topic})
            return
        except LoopError as exc:  # a store problem the tool did not translate
            err = ToolError("store_error", exc.message)
            await self._publish("error", {**err.to_dict(), "request": event.topic})
            return
        await self._publish(result_action, result.model_dump(mode="json", by_alias=True))
        if changes:
            summary = await anyio.to_thread.run_sync(self._summary)
            if summary is not None:
                await self._publish("progress", summary)

    async def _publish(self, action: str, payload: Any) -> None:
        if self._bus is None:
            return
        log.debug("task result", topic=f"task.{action}")
        await self._bus.publish(Event(topic=f"task.{action}", payload=payload, source=SOURCE))

    def _summary(self) -> dict[str, Any] | None:
        try:
            forest = Forest(store_for(self.ctx).read())
        except LoopError:
            return None
        upcoming = next_task(forest)
        return {
            **progress_summary(forest).model_dump(mode="json"),
            "next_task_id": upcoming.id if upcoming else None,
        }

    def prompt_section(self, hat: str) -> str | None:
        """The task progress, compactly: counts, the active path, the next task."""
        try:
            forest = Forest(store_for(self.ctx).read())
        except LoopError as exc:
            return f"## Tasks\nThe tasks file cannot be read: {exc.message}"
        if not len(forest):
            return None
        summary = progress_summary(forest)
        lines = [
            "## Tasks",
            f"Progress: {summary.completed_tasks}/{summary.total_tasks} done "
            f"({summary.completion_percentage}%), {summary.in_progress_tasks} in progress, "
            f"{summary.todo_tasks} todo.",
        ]
        path = active_path(forest)
        if path:
            lines.append("Active: " + " > ".join(f"{t.name} ({t.id})" for t in path))
        upcoming = next_task(forest)
        if upcoming is not None:
            verb = "start" if upcoming.status == "todo" else "complete"
            lines.append(f"Next: {upcoming.name} ({upcoming.id}), to {verb}.")
        elif summary.completed_tasks < summary.total_tasks:
            # the same rule as completion_blocker: any task not done is open
            lines.append("Open: " + _open_list([t for t in forest.tasks() if t.status != "done"]))
        else:
            lines.append("No open tasks.")
        lines.append(
            'Change tasks with events: task.start {"id": ...}, '
            'task.complete {"id": ..., "resolution": ...}, '
            'task.create {"name": ..., "parent_id": ...}.'
        )
        return "\n".join(lines)

    def completion_blocker(self) -> str | None:
        """Why the loop may not complete: open tasks remain (when blocking is on)."""
        if not self.block_completion:
            return None
        try:
            tasks = store_for(self.ctx).read()
        except LoopError as exc:
            return f"the tasks file cannot be read, so open tasks cannot be ruled out: {exc}"
        open_tasks = [t for t in tasks if t.status != "done"]
        if not open_tasks:
            return None
        return (
            f"{len(open_tasks)} task(s) still open: {_open_list(open_tasks)}. Complete them "
            "(task.complete) or delete them (task.delete) before completing the loop."
        )


def _open_list(open_tasks: list[Task]) -> str:
    """``'a' (todo), 'b' (in_progress) and 3 more``: the open tasks, named."""
    listed = ", ".join(f"{t.name!r} ({t.status})" for t in open_tasks[:_MAX_LISTED])
    more = f" and {len(open_tasks) - _MAX_LISTED} more" if len(open_tasks) > _MAX_LISTED else ""
    return listed + more
