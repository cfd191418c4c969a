"""Pure operations that drive execution: start a task, complete a task.

Tasks run in order: depth first, siblings by ``order``. Starting a task starts its
ancestors and walks down to the deepest unfinished subtask; completing the last open
subtask of a parent completes the parent, recursively up the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from loop.errors import ToolError
from loop.tasks.models import CompleteTaskOutput, StartTaskOutput, Task
from loop.tasks.operations import brief, unfinished_error
from loop.tasks.summary import hierarchy_table, next_task, progress_summary
from loop.tasks.tree import Forest

__all__ = ["AUTO_RESOLUTION", "complete", "start"]

AUTO_RESOLUTION = "Auto-completed: All subtasks completed"


def _blockers(forest: Forest, task: Task) -> list[Task]:
    """Unfinished earlier siblings of the task and of each of its ancestors."""
    found: list[Task] = []
    for node in [task, *forest.ancestors(task.id)]:
        found.extend(
            sib
            for sib in forest.children(node.parent_id)
            if sib.id != node.id and sib.order < node.order and sib.status != "done"
        )
    return found


def _blocked_error(forest: Forest, task: Task, blockers: list[Task]) -> ToolError:
    def where(t: Task) -> str:
        if t.parent_id is None:
            return "at the root"
        parent = forest.get(t.parent_id)
        return f"under {parent.name!r}" if parent else "under an unknown parent"

    listed = "; ".join(
        f"{t.name!r} (order {t.order}, {t.status}, {where(t)}, id {t.id})" for t in blockers
    )
    return ToolError(
        "blocked_by_earlier_sibling",
        f"Execution order violation: {task.name!r} cannot start before earlier tasks are "
        f"done: {listed}. Finish them first, in order.",
        details={"blocking_tasks": [{**brief(t), "parent_id": t.parent_id} for t in blockers]},
    )


def start(
    tasks: Sequence[Task], task_id: str, *, now: datetime
) -> tuple[list[Task], StartTaskOutput]:
    """Start a task, its ancestors and its deepest first unfinished subtask (by order).

    Refused for a done task and while an earlier sibling of the task or of any of its
    ancestors is unfinished. Starting a task that is already in progress is allowed:
    it walks down again and reports where the work is.
    """
    forest = Forest(tasks)
    task = forest.require(task_id)
    if task.status == "done":
        raise ToolError(
            "task_already_done",
            f"task {task.name!r} is already done (reopen it with updateTask to redo it)",
            details={"id": task_id},
        )
    blockers = _blockers(forest, task)
    if blockers:
        raise _blocked_error(forest, task, blockers)

    started: list[Task] = []

    def begin(t: Task) -> Task:
        if t.status == "in_progress":
            return t
        new = forest.set(t.id, status="in_progress", resolution=None, updated_at=now)
        started.append(new)
        return new

    parents_started = [begin(a) for a in reversed(forest.ancestors(task_id))]
    main = begin(task)
    chain: list[Task] = []
    current = main
    while True:
        first_open = next((c for c in forest.children(current.id) if c.status != "done"), None)
        if first_open is None:
            break
        current = begin(first_open)
        chain.append(current)

    deepest = chain[-1] if chain else None
    auto = [t for t in started if t.id != task_id]
    parts: list[str] = []
    if main in started:
        parts.append(f"Started {main.name!r}.")
    else:
        parts.append(f"{main.name!r} was already in progress.")
    opened_parents = [p for p in parents_started if p in started]
    if opened_parents:
        parts.append(
            "Its parent task(s) are now in progress too: "
            + ", ".join(repr(p.name) for p in opened_parents)
            + "."
        )
    if deepest is not None:
        nested = [t for t in auto if t in chain]
        parts.append(
            f"Automatically started {len(nested)} nested subtask(s) down to the first "
            f"unfinished one, {deepest.name!r} (id {deepest.id}): work on it now, then "
            "call completeTask on it."
        )
    elif forest.has_children(task_id):
        parts.append("All its subtasks are done: call completeTask on it.")
    else:
        parts.append("Work on it now, then call completeTask on it.")
    return forest.tasks(), StartTaskOutput(
        task=main,
        subtask=deepest,
        message=" ".join(parts),
        hierarchy_summary=hierarchy_table(forest, task_id),
        started_tasks=started,
    )


def complete(
    tasks: Sequence[Task], task_id: str, resolution: str, *, now: datetime
) -> tuple[list[Task], CompleteTaskOutput]:
    """Complete a task whose subtasks are all done; complete parents that become finished.

    Returns the parents completed automatically, the next task to start and the
    progress summary.
    """
    forest = Forest(tasks)
    task = forest.require(task_id)
    text = resolution.strip()
    if not text:
        raise ToolError(
            "resolution_required",
            "completeTask needs a resolution: say briefly what was done and how",
        )
    if task.status == "done":
        raise ToolError(
            "task_already_done", f"task {task.name!r} is already done", details={"id": task_id}
        )
    unfinished = [k for k in forest.children(task_id) if k.status != "done"]
    if unfinished:
        raise unfinished_error(task, unfinished)

    done = forest.set(task_id, status="done", resolution=text, updated_at=now)
    auto: list[Task] = []
    parent_id = done.parent_id
    while parent_id is not None:
        parent = forest.require(parent_id)
        if parent.status == "done" or any(k.status != "done" for k in forest.children(parent_id)):
            break
        auto.append(
            forest.set(parent_id, status="done", resolution=AUTO_RESOLUTION, updated_at=now)
        )
        parent_id = parent.parent_id

    upcoming = next_task(forest)
    parts = [f"Task {done.name!r} completed."]
    if auto:
        parts.append(
            "All subtasks done, so these parent tasks were completed too: "
            + ", ".join(repr(t.name) for t in auto)
            + "."
        )
    if upcoming is None:
        parts.append("No open tasks remain.")
    elif upcoming.status == "todo":
        parts.append(f"Next task: {upcoming.name!r} (id {upcoming.id}); start it with startTask.")
    else:
        parts.append(
            f"Next: {upcoming.name!r} (id {upcoming.id}) has all its subtasks "
            "done; complete it with completeTask."
        )
    return forest.tasks(), CompleteTaskOutput(
        next_task_id=upcoming.id if upcoming else None,
        message=" ".join(parts),
        progress_summary=progress_summary(forest),
        auto_completed_parents=auto,
        task=done,
    )
