"""The current task and the next one: the two rules that keep a single line of work.

* **One in-progress leaf.** The in-progress tasks form one chain, from a root task down
  to the *current* task, so at most one leaf task is in progress at a time. Making a
  task current (``startTask``, or ``updateTask`` to ``in_progress``) puts it and its
  ancestors in progress and sets every other in-progress task back to ``todo``.
* **The next task** is the first unfinished task in execution order (depth first,
  siblings by ``order``) that has no unfinished subtask: the first unfinished root,
  then its first unfinished subtask, and so on down. The in-progress one counts. Every
  earlier sibling on its path is done, so ``startTask`` always accepts it.

Pure functions over a :class:`~loop.tasks.tree.Forest`; the callers pass ``now``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from loop.tasks.models import Task
from loop.tasks.tree import Forest

__all__ = [
    "active_path",
    "chain_through",
    "first_open_path",
    "in_progress",
    "make_current",
    "next_task",
]


def first_open_path(forest: Forest, parent_id: str | None) -> list[Task]:
    """Below ``parent_id`` (``None``: the roots), the chain of first unfinished tasks.

    Each step takes the lowest-order subtask that is not done; the last task of the
    chain has no unfinished subtask. Empty when every task below is done.
    """
    chain: list[Task] = []
    current = parent_id
    while True:
        first = next((t for t in forest.children(current) if t.status != "done"), None)
        if first is None:
            return chain
        chain.append(first)
        current = first.id


def next_task(forest: Forest) -> Task | None:
    """The next unfinished leaf in execution order (the in-progress one included).

    A task whose subtasks are all done counts as a leaf: it is next to be completed.
    ``None`` when every task is done.
    """
    chain = first_open_path(forest, None)
    return chain[-1] if chain else None


def in_progress(forest: Forest) -> list[Task]:
    """Every in-progress task, in execution order.

    In-progress tasks hang from in-progress parents, so following in-progress subtasks
    down from the roots finds them all without visiting the rest of the tree; a list
    that breaks that rule (edited by hand) is searched in full.
    """
    found: list[Task] = []
    stack = [t for t in reversed(forest.children(None)) if t.status == "in_progress"]
    while stack:
        task = stack.pop()
        found.append(task)
        stack.extend(t for t in reversed(forest.children(task.id)) if t.status == "in_progress")
    if len(found) != forest.status_counts()["in_progress"]:
        found = [t for t, _ in forest.walk() if t.status == "in_progress"]
    return found


def chain_through(forest: Forest, task_id: str) -> set[str]:
    """The ids that stay in progress when ``task_id`` is current: its ancestors, itself
    and the in-progress tasks below it."""
    keep = {task_id, *(t.id for t in forest.ancestors(task_id))}
    stack = [task_id]
    while stack:
        for kid in forest.children(stack.pop()):
            if kid.status == "in_progress":
                keep.add(kid.id)
                stack.append(kid.id)
    return keep


def make_current(forest: Forest, keep: Collection[str], *, now: datetime) -> list[Task]:
    """Set every in-progress task whose id is not in ``keep`` back to ``todo``.

    ``keep`` is the chain that is now in progress: the current task, its ancestors and
    (for a task that was already current) its in-progress subtasks. Returns the tasks
    set back, in execution order.
    """
    stale = [t for t in in_progress(forest) if t.id not in keep]
    return [forest.set(t.id, status="todo", updated_at=now) for t in stale]


def active_path(forest: Forest) -> list[Task]:
    """The chain of in-progress tasks from the in-progress root down to the current task."""
    path: list[Task] = []
    parent: str | None = None
    while True:
        current = next((t for t in forest.children(parent) if t.status == "in_progress"), None)
        if current is None:
            return path
        path.append(current)
        parent = current.id
