"""The tasks domain in the loop: task progress after every change, in prompts, at completion.

Hats change tasks with ``task.*`` requests, which :class:`loop.tools.bus.ToolsOnBus`
serves (see :data:`loop.tasks.tools.BUS`). This extension adds what is the tasks'
own:

* after every change (a result of a tool that is not read-only), ``task.progress``
  with the progress summary and ``next_task_id``, from source ``tasks``;
* a short task section in every prompt: the counts, the active path, the next task;
* a completion blocker while tasks are open (unless blocking is turned off).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from loop.bus import EventBus
from loop.errors import LoopError
from loop.events import Event
from loop.extensions import Extension
from loop.tasks.models import Task
from loop.tasks.store import store_for
from loop.tasks.summary import active_path, next_task, progress_summary
from loop.tasks.tools import BUS
from loop.tasks.tree import Forest
from loop.tools.base import ToolContext

__all__ = ["PROGRESS_TOPIC", "TasksExtension"]

PROGRESS_TOPIC = f"{BUS.prefix}.progress"
# the result topics after which the tasks changed: those of the tools that write
_CHANGED = frozenset(
    f"{BUS.prefix}.{r.result}"
    for r in BUS.requests
    if not next(t for t in BUS.tools if t.name == r.tool).read_only
)
_MAX_LISTED = 8


class TasksExtension(Extension):
    """Publishes task progress after changes, adds it to prompts, guards completion."""

    name = "tasks"

    def __init__(self, ctx: ToolContext, *, block_completion: bool = True) -> None:
        self.ctx = ctx
        self.block_completion = block_completion
        self._bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        """Follow the tasks' results on ``bus``."""
        self._bus = bus
        bus.subscribe(f"{BUS.prefix}.*", self._on_result, name="tasks-progress")

    async def _on_result(self, event: Event) -> None:
        if event.source != BUS.source or event.topic not in _CHANGED or self._bus is None:
            return
        summary = await anyio.to_thread.run_sync(self._summary)
        if summary is not None:
            await self._bus.publish(Event(topic=PROGRESS_TOPIC, payload=summary, source=BUS.source))

    def _summary(self) -> dict[str, Any] | None:
        try:
            forest = Forest(store_for(self.ctx).read())
        except LoopError:
            return None
        upcoming = next_task(forest)
        summary = progress_summary(forest).model_dump(mode="json")
        if upcoming:  # absent once no task is left, as in the tools' replies
            summary["next_task_id"] = upcoming.id
        return summary

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
