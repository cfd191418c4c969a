"""Pure operations that drive execution: start a task, complete a task.

Tasks run in order: depth first, siblings by ``order``. Starting a task starts its
ancestors and walks down to the deepest unfinished subtask, which becomes the one
in-progress leaf; completing the last open subtask of a parent completes the parent,
recursively up the tree, and names the next unfinished leaf (:mod:`loop.tasks.focus`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from loop.errors import ToolError
from loop.tasks.focus import first_open_path, make_current, next_task
from loop.tasks.models import CompleteTaskOutput, StartTaskOutput, Task
from loop.tasks.operations import brief, unfinished_error
from loop.tasks.summary import hierarchy_table, progress_summary
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


_DESCRIPTION_CAP = 300  # characters of a blocking task's description shown in the message


def _described(task: Task) -> str:
    text = " ".join(task.description.split())
    if not text:
        return "no description"
    if len(text) > _DESCRIPTION_CAP:
        text = text[: _DESCRIPTION_CAP - 1] + "…"
    return repr(text)


def _blocked_error(forest: Forest, task: Task, blockers: list[Task]) -> ToolError:
    def where(t: Task) -> str:
        if t.parent_id is None:
            return "at the root"
        parent = forest.get(t.parent_id)
        return f"under {parent.name!r}" if parent else "under an unknown parent"

    listed = "; ".join(
        f"{t.name!r} (order {t.order}, {t.status}, {where(t)}, id {t.id}): {_described(t)}"
        for t in blockers
    )
    return ToolError(
        "blocked_by_earlier_sibling",
        f"Execution order violation: {task.name!r} (order {task.order}, {where(task)}) cannot "
        f"start before {len(blockers)} earlier task(s) are done: {listed}. Finish them "
        "first, in order.",
        details={
            "blocking_tasks": [
                {**brief(t), "description": t.description, "parent_id": t.parent_id}
                for t in blockers
            ]
        },
    )


def _start_message(
    main: Task,
    *,
    started: list[Task],
    opened_parents: list[Task],
    chain: list[Task],
    reset: list[Task],
    has_children: bool,
) -> str:
    deepest = chain[-1] if chain else None
    nested = [t for t in chain if t in started]
    if main in started:
        parts = [f"Started {main.name!r}."]
    elif not started and not reset:
        parts = [f"{main.name!r} is already in progress; nothing changed."]
    else:
        parts = [f"{main.name!r} was already in progress."]
    if opened_parents:
        parts.append(
            "Its parent task(s) are now in progress too: "
            + ", ".join(repr(p.name) for p in opened_parents)
            + "."
        )
    if deepest is not None and nested:
        parts.append(
            f"Automatically started {len(nested)} nested subtask(s) down to the first "
            f"unfinished one, {deepest.name!r} (id {deepest.id}): work on it now, then "
            "call completeTask on it."
        )
    elif deepest is not None:
        parts.append(
            f"Its current subtask is {deepest.name!r} (id {deepest.id}), already in "
            "progress: work on it, then call completeTask on it."
        )
    elif has_children:
        parts.append("All its subtasks are done: call completeTask on it.")
    else:
        parts.append("Work on it now, then call completeTask on it.")
    if reset:
        parts.append(
            "Only one leaf task is in progress at a time, so these previously in-progress "
            "tasks were reset to todo: " + ", ".join(repr(t.name) for t in reset) + "."
        )
    return " ".join(parts)


def start(
    tasks: Sequence[Task], task_id: str, *, now: datetime
) -> tuple[list[Task], StartTaskOutput]:
    """Start a task, its ancestors and its deepest first unfinished subtask (by order).

    Refused for a done task and while an earlier sibling of the task or of any of its
    ancestors is unfinished. The deepest task started becomes the one in-progress leaf:
    every other in-progress task off its path goes back to todo (see
    :mod:`loop.tasks.focus`). Starting a task that is already in progress is allowed
    (a re-run iteration may repeat it): it walks down again and reports where the work is.
    """
    forest = Forest(tasks)
    task = forest.require(task_id)
    task_id = task.id  # a prefix names it
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

    parents = [begin(a) for a in reversed(forest.ancestors(task_id))]
    main = begin(task)
    chain = [begin(t) for t in first_open_path(forest, task_id)]
    keep = {t.id for t in (*parents, main, *chain)}
    reset = make_current(forest, keep, now=now)
    message = _start_message(
        main,
        started=started,
        opened_parents=[p for p in parents if p in started],
        chain=chain,
        reset=reset,
        has_children=forest.has_children(task_id),
    )
    return forest.tasks(), StartTaskOutput(
        task=main,
        subtask=chain[-1] if chain else None,
        message=message,
        hierarchy_summary=hierarchy_table(forest, task_id),
        started_tasks=started,
        reset_tasks=reset,
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
    task_id = task.id  # a prefix names it
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
    counts = forest.status_counts()
    still_open = counts.get("todo", 0) + counts.get("in_progress", 0)
    parts = [f"Task {done.name!r} completed."]
    if auto:
        parts.append(
            "All subtasks done, so these parent tasks were completed too: "
            + ", ".join(repr(t.name) for t in auto)
            + "."
        )
    if still_open:
        parts.append(
            f"{still_open} task(s) still open: {counts.get('in_progress', 0)} in progress, "
            f"{counts.get('todo', 0)} todo."
        )
    if upcoming is None:
        if still_open:  # open tasks under a done parent: none is next in execution order
            parts.append("None of them is next in execution order: see listTasks.")
        else:
            parts.append("No open tasks remain.")
    elif forest.has_children(upcoming.id):
        parts.append(
            f"Next: {upcoming.name!r} (id {upcoming.id}) has all its subtasks "
            "done; complete it with completeTask."
        )
    elif upcoming.status == "in_progress":
        parts.append(
            f"Next task: {upcoming.name!r} (id {upcoming.id}), already in progress: "
            "continue with it (startTask on it is safe)."
        )
    else:
        parts.append(f"Next task: {upcoming.name!r} (id {upcoming.id}); start it with startTask.")
    return forest.tasks(), CompleteTaskOutput(
        next_task_id=upcoming.id if upcoming else None,
        message=" ".join(parts),
        progress_summary=progress_summary(forest),
        auto_completed_parents=auto,
        task=done,
    )
