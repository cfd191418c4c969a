"""Immutable indexes over a task list, shared between operations on the same list.

Building the indexes of 10,000 tasks (by id, storage position, children) costs a few
milliseconds, as much as an operation itself. The store builds one :class:`TaskIndex` per
file version it reads and hands out :class:`TaskList` copies carrying it, so that an operation's
:class:`~loop.tasks.tree.Forest` starts from it instead of rebuilding it. An index is
never changed once built (only its memo of sorted children fills up, with values that
depend on the index alone), so sharing it between threads is safe.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from loop.tasks.models import STATUSES, Task

__all__ = [
    "TaskIndex",
    "TaskList",
    "build_index",
    "index_of",
    "index_problem",
    "integrity_problem",
]

_NO_KIDS: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class TaskIndex:
    """Tasks in storage order with their lookups; read-only once built.

    Attributes:
        tasks: the tasks in storage order.
        by_id: each task by id.
        pos: each id's position in ``tasks``.
        children: the ids of each parent's direct subtasks (``None``: root tasks), in
            storage order; only parents with at least one subtask are keys.
        counts: how many tasks have each status.
    """

    tasks: tuple[Task, ...]
    by_id: dict[str, Task]
    pos: dict[str, int]
    children: dict[str | None, list[str]]
    counts: dict[str, int]
    sorted_kids: dict[str | None, list[Task]] = field(default_factory=dict)

    def kids(self, parent_id: str | None) -> Sequence[Task]:
        """Direct subtasks of ``parent_id`` by order then storage position (do not change)."""
        found = self.sorted_kids.get(parent_id)
        if found is not None:
            return found
        ids = self.children.get(parent_id)
        if not ids:
            return _NO_KIDS
        by_id, pos = self.by_id, self.pos
        kids = [by_id[i] for i in ids]
        kids.sort(key=lambda t: (t.order, pos[t.id]))
        # Two threads may both compute this; they store equal lists, so either wins.
        self.sorted_kids[parent_id] = kids
        return kids


class TaskList(list[Task]):
    """A task list that remembers the :class:`TaskIndex` it was made from.

    It is an ordinary list to every caller; :func:`index_of` checks that the contents
    are still exactly the index's tasks before trusting the index.
    """

    tree_index: TaskIndex | None = None

    @classmethod
    def of(cls, index: TaskIndex) -> TaskList:
        """A new list of the index's tasks, carrying the index."""
        out = cls(index.tasks)
        out.tree_index = index
        return out


def build_index(tasks: Iterable[Task]) -> TaskIndex:
    """Index ``tasks`` (no checks: a later duplicate id replaces an earlier one)."""
    ordered = tuple(tasks)
    ids = [t.id for t in ordered]
    by_id = dict(zip(ids, ordered, strict=True))
    pos = dict(zip(ids, range(len(ids)), strict=True))
    children: dict[str | None, list[str]] = {}
    counts = dict.fromkeys(STATUSES, 0)
    for task in ordered:
        kids = children.get(task.parent_id)
        if kids is None:
            children[task.parent_id] = [task.id]
        else:
            kids.append(task.id)
        counts[task.status] += 1
    return TaskIndex(ordered, by_id, pos, children, counts)


def index_of(tasks: Sequence[Task]) -> TaskIndex:
    """The index carried by a :class:`TaskList` if it still matches, else a new one."""
    index = getattr(tasks, "tree_index", None)
    if (
        isinstance(index, TaskIndex)
        and len(index.tasks) == len(tasks)
        # Identity, not equality: unchanged tasks must stay the very same objects.
        and all(map(operator.is_, tasks, index.tasks))
    ):
        return index
    return build_index(tasks)


def index_problem(index: TaskIndex) -> str | None:
    """Why an index read from a file cannot be used, or ``None`` (linear, no recursion)."""
    n = len(index.tasks)
    unknown = [p for p in index.children if p is not None and p not in index.by_id]
    if len(index.by_id) != n or unknown:
        return integrity_problem(index.tasks) or "the tasks do not form a tree"
    # With unique ids and known parents, every task reaches a root unless a cycle exists.
    reached = 0
    stack = list(index.children.get(None, ()))
    children = index.children
    while stack:
        task_id = stack.pop()
        reached += 1
        below = children.get(task_id)
        if below:
            stack.extend(below)
    if reached != n:
        return integrity_problem(index.tasks) or "the tasks do not form a tree"
    return None


def integrity_problem(tasks: Sequence[Task]) -> str | None:
    """Why a task list read from a file cannot be used (duplicate ids, bad parents, cycles)."""
    by_id: dict[str, Task] = {}
    for task in tasks:
        if task.id in by_id:
            return f"duplicate task id {task.id!r}"
        by_id[task.id] = task
    for task in tasks:
        if task.parent_id is not None and task.parent_id not in by_id:
            return f"task {task.id!r} has an unknown parent_id {task.parent_id!r}"
    # Each chain is followed once: "done" ids are known to reach a root.
    reaches_root: set[str] = set()
    for task in tasks:
        seen: list[str] = []
        on_path: set[str] = set()
        current: str | None = task.id
        while current is not None and current not in reaches_root:
            if current in on_path:
                return f"tasks form a parent_id cycle through {current!r}"
            on_path.add(current)
            seen.append(current)
            current = by_id[current].parent_id
        reaches_root.update(seen)
    return None
