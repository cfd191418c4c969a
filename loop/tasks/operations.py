"""Pure operations over a task list: create, get, list, update, delete.

Each function takes the current ``list[Task]`` (never changed) and returns the new
list with the tool's output, or raises :class:`ToolError` with a stable code. No I/O,
no clock, no randomness: the caller passes ``now`` and the new id. Starting and
completing live in :mod:`loop.tasks.execution`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from loop.errors import ToolError
from loop.tasks.focus import chain_through, make_current
from loop.tasks.models import (
    MAX_ORDER,
    STATUSES,
    CreateTaskOutput,
    DeleteTaskOutput,
    GetTaskOutput,
    ListTasksOutput,
    Task,
    UpdateTaskOutput,
)
from loop.tasks.tree import Forest, find_task

__all__ = [
    "UNSET",
    "Unset",
    "brief",
    "create",
    "delete",
    "get",
    "list_tasks",
    "repeated_create",
    "unfinished_error",
    "update",
]


class Unset:
    """The type of :data:`UNSET`: an argument that was not given (unlike ``None``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset()

ROOT_MESSAGE = (
    "Root task created. Break it down before starting: create the subtasks that achieve it "
    "with createTask and parent_id={id}, in the order they should run, then call startTask "
    "on the root task."
)


def _name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise ToolError("invalid_name", "name must not be empty")
    return cleaned


def _order(order: int | None) -> int | None:
    """``None`` or ``0``: place after the last sibling (the original treats 0 as unset).

    The tools' input models refuse orders out of range first (``invalid_input``); this
    check keeps the pure operations safe on their own.
    """
    if order is None or order == 0:
        return None
    if order < 0 or order > MAX_ORDER:
        raise ToolError(
            "invalid_order",
            f"order must be 1 to {MAX_ORDER} (or 0/unset for last), got {order}",
        )
    return order


def _no_room(parent_id: str | None) -> ToolError:
    where = "at the root" if parent_id is None else f"under {parent_id!r}"
    return ToolError(
        "invalid_order",
        f"no room for another task {where}: orders there reach {MAX_ORDER}; "
        "give the tasks smaller orders with updateTask first",
        details={"parent_id": parent_id, "max_order": MAX_ORDER},
    )


def _place(
    forest: Forest,
    parent_id: str | None,
    order: int | None,
    now: datetime,
    exclude: str | None = None,
) -> int:
    """The order for a task joining ``parent_id``'s subtasks; shifts siblings on a collision.

    Unset: max sibling order + 1 (1 for the first). A taken order moves every sibling at
    or above it up by one, so the new task runs before them.
    """
    siblings = [t for t in forest.children(parent_id) if t.id != exclude]
    if order is None:
        last = max((t.order for t in siblings), default=0) + 1
        if last > MAX_ORDER:
            raise _no_room(parent_id)
        return last
    if any(t.order == order for t in siblings):
        if max(t.order for t in siblings) >= MAX_ORDER:
            raise _no_room(parent_id)
        for sib in siblings:
            if sib.order >= order:
                forest.set(sib.id, order=sib.order + 1, updated_at=now)
    return order


def create(
    tasks: Sequence[Task],
    *,
    name: str,
    description: str | None = None,
    parent_id: str | None = None,
    order: int | None = None,
    new_id: str,
    now: datetime,
) -> tuple[list[Task], CreateTaskOutput]:
    """Create a todo task; a root task's reply recommends creating subtasks."""
    forest = Forest(tasks)
    clean_name = _name(name)
    wanted = _order(order)
    parent_id = parent_id or None
    if parent_id is not None:
        parent = forest.require(parent_id, what="parent task")
        parent_id = parent.id
        if parent.status == "done":
            raise ToolError(
                "parent_done",
                f"parent task {parent.name!r} is done: reopen it first "
                "(updateTask with status todo), then add subtasks",
                details={"parent_id": parent_id},
            )
    task = Task(
        id=new_id,
        name=clean_name,
        description=(description or "").strip(),
        status="todo",
        parent_id=parent_id,
        order=_place(forest, parent_id, wanted, now),
        created_at=now,
        updated_at=now,
    )
    forest.add(task)
    message = ROOT_MESSAGE.format(id=task.id) if parent_id is None else None
    return forest.tasks(), CreateTaskOutput(task=task, message=message)


def repeated_create(
    tasks: Sequence[Task],
    task_id: str,
    *,
    name: str,
    description: str | None = None,
    parent_id: str | None = None,
    now: datetime,
) -> tuple[list[Task], CreateTaskOutput] | None:
    """The reply to a create that already happened, or ``None`` when it did not.

    Inside a session a task's id is derived from the call that creates it, so the re-run
    of an interrupted iteration asks to create the same task again, under the same id.
    When ``task_id`` holds a task made from the same input (name, description, parent),
    that task is the answer. One nothing changed since (still todo, never updated) is
    made again at ``now``, the re-run's time, as a replay of the session makes it; one
    the interrupted attempt went on to change is kept as it is.
    """
    for index, task in enumerate(tasks):
        if task.id == task_id:
            same = (
                task.name == _name(name)
                and task.description == (description or "").strip()
                and task.parent_id == (parent_id or None)
            )
            if not same:
                return None
            made = task
            if task.status == "todo" and task.updated_at == task.created_at:
                made = task.model_copy(update={"created_at": now, "updated_at": now})
            changed = [*tasks[:index], made, *tasks[index + 1 :]]
            message = ROOT_MESSAGE.format(id=made.id) if made.parent_id is None else None
            return changed, CreateTaskOutput(task=made, message=message)
    return None


def get(tasks: Sequence[Task], task_id: str) -> GetTaskOutput:
    """One task by id (``task_not_found`` otherwise)."""
    for task in tasks:
        if task.id == task_id:
            return GetTaskOutput(task=task)
    return GetTaskOutput(task=find_task({t.id: t for t in tasks}, task_id))  # a prefix


def list_tasks(tasks: Sequence[Task], parent_id: str | None = None) -> ListTasksOutput:
    """Every task depth first in execution order, or the direct subtasks of ``parent_id``."""
    forest = Forest(tasks)
    if parent_id:
        parent = forest.require(parent_id, what="parent task")
        return ListTasksOutput(tasks=forest.children(parent.id))
    return ListTasksOutput(tasks=[t for t, _ in forest.walk()])


def _reopen_ancestors(forest: Forest, task_id: str, status: str, now: datetime) -> None:
    """Keep the invariants above a task that is (now) ``status`` at its position.

    In progress: every ancestor is in progress. Todo: no ancestor stays done (done
    ancestors go back to todo). Done: nothing to do.
    """
    for anc in forest.ancestors(task_id):
        if status == "in_progress" and anc.status != "in_progress":
            forest.set(anc.id, status="in_progress", resolution=None, updated_at=now)
        elif status == "todo" and anc.status == "done":
            forest.set(anc.id, status="todo", resolution=None, updated_at=now)


def update(
    tasks: Sequence[Task],
    task_id: str,
    *,
    name: str | None = None,
    description: str | None = None,
    status: str | None = None,
    resolution: str | None = None,
    parent_id: str | Unset | None = UNSET,
    order: int | None = None,
    now: datetime,
) -> tuple[list[Task], UpdateTaskOutput]:
    """Change the given fields of a task, keeping the hierarchy consistent.

    A status change keeps every invariant: done needs every subtask done; todo is
    refused while a subtask is in progress; in progress (or todo) reopens the ancestors.
    An in-progress task is the current one: every other in-progress task that is not
    its ancestor or below it goes back to todo (see :mod:`loop.tasks.focus`). Moving a
    task under one of its own descendants (a cycle) is refused.
    """
    forest = Forest(tasks)
    task = forest.require(task_id)
    task_id = task.id  # a prefix names it
    changes: dict[str, Any] = {"updated_at": now}
    if name is not None:
        changes["name"] = _name(name)
    if description is not None:
        changes["description"] = description.strip()
    wanted = _order(order)

    new_status = task.status if status is None else status
    if new_status not in STATUSES:
        raise ToolError(
            "invalid_status",
            f"invalid status {new_status!r}: use one of {', '.join(STATUSES)}",
            details={"status": new_status, "allowed": list(STATUSES)},
        )
    kids = forest.children(task_id)
    if new_status == "done":
        unfinished = [k for k in kids if k.status != "done"]
        if unfinished:
            raise unfinished_error(task, unfinished)
        if resolution is not None and resolution.strip():
            changes["resolution"] = resolution.strip()
    else:
        if resolution is not None and resolution.strip():
            raise ToolError(
                "invalid_resolution",
                f"a resolution belongs to a done task; {task.name!r} would be {new_status} "
                "(use completeTask to finish it)",
            )
        changes["resolution"] = None
    if new_status == "todo" and task.status != "todo":
        busy = [t for t in forest.descendants(task_id) if t.status == "in_progress"]
        if busy:
            raise ToolError(
                "subtasks_in_progress",
                f"cannot set {task.name!r} back to todo while subtasks are in progress: "
                + ", ".join(repr(t.name) for t in busy),
                details={"subtasks": [brief(t) for t in busy]},
            )
    changes["status"] = new_status

    new_parent = task.parent_id if isinstance(parent_id, Unset) else (parent_id or None)
    if new_parent != task.parent_id:
        if new_parent is not None:
            target = forest.require(new_parent, what="parent task")
            new_parent = target.id
            path = [target, *forest.ancestors(target.id)]
            if any(t.id == task_id for t in path):
                chain = " -> ".join(repr(t.name) for t in reversed(path))
                raise ToolError(
                    "cycle",
                    f"cannot move {task.name!r} under {target.name!r}: {target.name!r} is "
                    f"the task itself or one of its subtasks ({chain})",
                    details={"id": task_id, "parent_id": new_parent},
                )
        changes["parent_id"] = new_parent
        changes["order"] = _place(forest, new_parent, wanted, now, exclude=task_id)
    elif wanted is not None and wanted != task.order:
        changes["order"] = _place(forest, new_parent, wanted, now, exclude=task_id)

    updated = forest.set(task_id, **changes)
    _reopen_ancestors(forest, task_id, new_status, now)
    reset: list[Task] = []
    if new_status == "in_progress":
        reset = make_current(forest, chain_through(forest, task_id), now=now)
    return forest.tasks(), UpdateTaskOutput(task=updated, reset_tasks=reset)


def delete(
    tasks: Sequence[Task], task_id: str, *, cascade: bool = False
) -> tuple[list[Task], DeleteTaskOutput]:
    """Delete a task; one with subtasks only when ``cascade`` is asked for explicitly."""
    forest = Forest(tasks)
    task = forest.require(task_id)
    task_id = task.id  # a prefix names it
    below = forest.descendants(task_id)
    if below and not cascade:
        kids = forest.children(task_id)
        raise ToolError(
            "has_subtasks",
            f"cannot delete {task.name!r}: it has {len(kids)} subtask(s) "
            f"({len(below)} task(s) below it). Delete them first, or pass cascade=true "
            "to delete the whole subtree",
            details={"subtasks": [brief(k) for k in kids], "descendants": len(below)},
        )
    # Reversed depth-first order removes every subtask before its parent.
    for victim in reversed([task, *below]):
        forest.remove(victim.id)
    ids = [task.id, *(t.id for t in below)]
    return forest.tasks(), DeleteTaskOutput(id=task_id, deleted_ids=ids)


def brief(task: Task) -> dict[str, Any]:
    """The fields that identify a task in an error's details."""
    return {"id": task.id, "name": task.name, "status": task.status, "order": task.order}


def unfinished_error(task: Task, unfinished: list[Task]) -> ToolError:
    """``subtasks_unfinished``: ``task`` cannot be done while these subtasks are open."""
    listed = ", ".join(f"{t.name!r} ({t.status})" for t in unfinished)
    return ToolError(
        "subtasks_unfinished",
        f"cannot complete {task.name!r}: {len(unfinished)} subtask(s) not done: {listed}",
        details={"subtasks": [brief(t) for t in unfinished]},
    )
