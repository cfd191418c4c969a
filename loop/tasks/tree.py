"""A working copy of the task list with the indexes the operations need.

Operations never change the tasks they are given: :class:`Forest` keeps the original
models and swaps in changed copies, so ``Forest(tasks).tasks()`` after an operation
is the new list in storage order (new tasks last, deleted ones gone).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from loop.errors import ToolError
from loop.tasks.models import Task

__all__ = ["Forest", "integrity_problem"]


class Forest:
    """Tasks by id, children by parent (sorted by ``order``), and storage positions."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self._by_id: dict[str, Task] = {}
        self._pos: dict[str, int] = {}
        self._children: dict[str | None, list[str]] = {}
        for pos, task in enumerate(tasks):
            self._by_id[task.id] = task
            self._pos[task.id] = pos
            self._children.setdefault(task.parent_id, []).append(task.id)
        self._next_pos = len(tasks)
        self._sorted: dict[str | None, list[Task]] = {}  # children() memo; cleared on change
        self._complete = False  # whether _sorted holds every parent

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, task_id: str) -> Task | None:
        """The task with ``task_id``, or ``None``."""
        return self._by_id.get(task_id)

    def require(self, task_id: str, *, what: str = "task") -> Task:
        """The task with ``task_id``; a missing one is ``task_not_found``/``parent_not_found``."""
        task = self._by_id.get(task_id)
        if task is None:
            code = "parent_not_found" if what == "parent task" else "task_not_found"
            raise ToolError(code, f"{what} {task_id!r} not found", details={"id": task_id})
        return task

    def children(self, parent_id: str | None) -> list[Task]:
        """Direct subtasks of ``parent_id`` (``None``: root tasks), by order then age."""
        kids = self._sorted.get(parent_id)
        if kids is None and self._complete:
            return []
        if kids is None:
            kids = [self._by_id[i] for i in self._children.get(parent_id, ())]
            kids.sort(key=lambda t: (t.order, self._pos[t.id]))
            self._sorted[parent_id] = kids
        return list(kids)

    def has_children(self, task_id: str) -> bool:
        """Whether the task has at least one subtask."""
        return bool(self._children.get(task_id))

    def ancestors(self, task_id: str) -> list[Task]:
        """The parent, grandparent, ... up to the root task."""
        out: list[Task] = []
        parent = self._by_id[task_id].parent_id
        while parent is not None:
            task = self._by_id[parent]
            out.append(task)
            parent = task.parent_id
        return out

    def descendants(self, task_id: str) -> list[Task]:
        """Every task below ``task_id``, depth first in order."""
        return [task for task, _ in self.walk(task_id)]

    def walk(self, parent_id: str | None = None, depth: int = 0) -> Iterator[tuple[Task, int]]:
        """Depth-first, in execution order, below ``parent_id``: ``(task, depth)`` pairs."""
        kids = self._all_children()
        stack = [(t, depth) for t in reversed(kids.get(parent_id, ()))]
        while stack:
            task, d = stack.pop()
            yield task, d
            below = kids.get(task.id)
            if below:
                stack.extend((c, d + 1) for c in reversed(below))

    def _all_children(self) -> dict[str | None, list[Task]]:
        # One sort of every task, then grouping, beats sorting each sibling list apart.
        if not self._complete:
            pos = self._pos
            ordered = sorted(self._by_id.values(), key=lambda t: (t.order, pos[t.id]))
            grouped: dict[str | None, list[Task]] = {}
            for task in ordered:
                grouped.setdefault(task.parent_id, []).append(task)
            self._sorted = grouped
            self._complete = True
        return self._sorted

    def root_of(self, task_id: str) -> Task:
        """The root task whose tree holds ``task_id``."""
        chain = self.ancestors(task_id)
        return chain[-1] if chain else self._by_id[task_id]

    def add(self, task: Task) -> None:
        """Add a new task at the end of storage order."""
        self._sorted.clear()
        self._complete = False
        self._by_id[task.id] = task
        self._pos[task.id] = self._next_pos
        self._next_pos += 1
        self._children.setdefault(task.parent_id, []).append(task.id)

    def set(self, task_id: str, **changes: Any) -> Task:
        """Replace a task by a copy with ``changes`` (attribute names); returns the copy."""
        self._sorted.clear()
        self._complete = False
        old = self._by_id[task_id]
        new = old.model_copy(update=changes)
        if new.parent_id != old.parent_id:
            self._children[old.parent_id].remove(task_id)
            self._children.setdefault(new.parent_id, []).append(task_id)
        self._by_id[task_id] = new
        return new

    def remove(self, task_id: str) -> None:
        """Drop one task (its subtasks must be removed by the caller)."""
        self._sorted.clear()
        self._complete = False
        task = self._by_id.pop(task_id)
        self._children[task.parent_id].remove(task_id)
        self._children.pop(task_id, None)
        del self._pos[task_id]

    def tasks(self) -> list[Task]:
        """The tasks in storage order."""
        return sorted(self._by_id.values(), key=lambda t: self._pos[t.id])


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
