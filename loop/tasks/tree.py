"""A working copy of the task list with the indexes the operations need.

Operations never change the tasks they are given: :class:`Forest` keeps the original
models and swaps in changed copies, so ``Forest(tasks).tasks()`` after an operation
is the new list in storage order (new tasks last, deleted ones gone).

A forest is an overlay on a shared, read-only :class:`~loop.tasks.index.TaskIndex`:
building it copies two dicts, sorting happens per parent on demand, and a parent's
sorted subtasks are recomputed only when one of them changed. So an operation costs
what it touches, not the size of the list (issue 9: 10,000 tasks).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

from loop._prefix import matches, shown
from loop.errors import ToolError
from loop.tasks.index import TaskIndex, TaskList, index_of, integrity_problem
from loop.tasks.models import Task

__all__ = ["Forest", "find_task", "integrity_problem"]

_FEW_GONE = 32  # up to this many removals, delete in place; past it, filter once
_task_id = attrgetter("id")


def find_task(by_id: Mapping[str, Task], task_id: str, *, what: str = "task") -> Task:
    """The task of ``task_id``: its id, or a unique prefix of it (4+ characters, as git).

    Raises:
        ToolError: ``task_not_found``/``parent_not_found`` for no match, ``ambiguous_id``
            (with the candidates) for a prefix several tasks share.
    """
    task = by_id.get(task_id)
    if task is not None:
        return task
    found = matches(task_id, by_id)
    if len(found) == 1:
        return by_id[found[0]]
    if found:
        raise ToolError(
            "ambiguous_id",
            f"{what} id prefix {task_id!r} is ambiguous: {shown(found)}",
            details={"id": task_id, "candidates": found[:50]},
        )
    code = "parent_not_found" if what == "parent task" else "task_not_found"
    raise ToolError(code, f"{what} {task_id!r} not found", details={"id": task_id})


class Forest:
    """Tasks by id, children by parent (sorted by ``order``), and storage positions."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        base = index_of(tasks)
        self._base = base
        self._by_id: dict[str, Task] = dict(base.by_id)
        self._pos = base.pos  # shared with the index until the first add or remove
        self._own_pos = False
        self._children: dict[str | None, list[str]] = dict(base.children)
        self._own_lists: set[str | None] = set()  # children lists copied from the index
        self._counts = dict(base.counts)
        self._dirty: set[str | None] = set()  # parents whose subtasks changed
        self._sorted: dict[str | None, list[Task]] = {}  # sorted subtasks of dirty parents
        self._changed: set[str] = set()  # ids replaced by set()
        self._added: list[str] = []  # ids added, in order (and still present)
        self._gone: list[int] = []  # base positions removed
        self._next_pos = len(base.tasks)
        self._frozen = False  # tasks() handed our dicts to a new index: copy before changing

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, task_id: str) -> Task | None:
        """The task with ``task_id``, or ``None``."""
        return self._by_id.get(task_id)

    def require(self, task_id: str, *, what: str = "task") -> Task:
        """The task with ``task_id``, or with a unique prefix of it (see :func:`find_task`).

        Callers use the returned task's ``id`` from then on, never ``task_id``.
        """
        task = self._by_id.get(task_id)
        return task if task is not None else find_task(self._by_id, task_id, what=what)

    def _kids(self, parent_id: str | None) -> Sequence[Task]:
        """Sorted direct subtasks, shared (callers must not change the sequence)."""
        if parent_id not in self._dirty:
            return self._base.kids(parent_id)
        kids = self._sorted.get(parent_id)
        if kids is None:
            by_id, pos = self._by_id, self._pos
            kids = [by_id[i] for i in self._children.get(parent_id, ())]
            kids.sort(key=lambda t: (t.order, pos[t.id]))
            self._sorted[parent_id] = kids
        return kids

    def children(self, parent_id: str | None) -> list[Task]:
        """Direct subtasks of ``parent_id`` (``None``: root tasks), by order then age."""
        return list(self._kids(parent_id))

    def has_children(self, task_id: str) -> bool:
        """Whether the task has at least one subtask."""
        return bool(self._children.get(task_id))

    def parent_ids(self) -> list[str]:
        """The ids of every task that has at least one subtask."""
        return [p for p, kids in self._children.items() if p is not None and kids]

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status."""
        return dict(self._counts)

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
        stack = [(t, depth) for t in reversed(self._kids(parent_id))]
        while stack:
            task, d = stack.pop()
            yield task, d
            below = self._kids(task.id)
            if below:
                stack.extend((c, d + 1) for c in reversed(below))

    def root_of(self, task_id: str) -> Task:
        """The root task whose tree holds ``task_id``."""
        chain = self.ancestors(task_id)
        return chain[-1] if chain else self._by_id[task_id]

    def _thaw(self) -> None:
        # After tasks() an index owns our dicts; it must never see a later change.
        if self._frozen:
            self._by_id = dict(self._by_id)
            self._children = dict(self._children)
            self._own_lists.clear()
            self._own_pos = False
            self._frozen = False

    def _own_kids(self, parent_id: str | None) -> list[str]:
        kids = self._children.get(parent_id)
        if kids is None or parent_id not in self._own_lists:
            kids = list(kids or ())
            self._children[parent_id] = kids
            self._own_lists.add(parent_id)
        return kids

    def _own_positions(self) -> dict[str, int]:
        if not self._own_pos:
            self._pos = dict(self._pos)
            self._own_pos = True
        return self._pos

    def _touch(self, parent_id: str | None) -> None:
        self._dirty.add(parent_id)
        self._sorted.pop(parent_id, None)

    def add(self, task: Task) -> None:
        """Add a new task at the end of storage order."""
        self._thaw()
        self._by_id[task.id] = task
        self._own_positions()[task.id] = self._next_pos
        self._next_pos += 1
        self._own_kids(task.parent_id).append(task.id)
        self._touch(task.parent_id)
        self._added.append(task.id)
        self._counts[task.status] += 1

    def set(self, task_id: str, **changes: Any) -> Task:
        """Replace a task by a copy with ``changes`` (attribute names); returns the copy."""
        self._thaw()
        old = self._by_id[task_id]
        new = old.model_copy(update=changes)
        self._touch(old.parent_id)
        if new.parent_id != old.parent_id:
            self._own_kids(old.parent_id).remove(task_id)
            if not self._children[old.parent_id]:
                del self._children[old.parent_id]
            self._own_kids(new.parent_id).append(task_id)
            self._touch(new.parent_id)
        self._by_id[task_id] = new
        self._changed.add(task_id)
        self._counts[old.status] -= 1
        self._counts[new.status] += 1
        return new

    def remove(self, task_id: str) -> None:
        """Drop one task (its subtasks must be removed by the caller)."""
        self._thaw()
        task = self._by_id.pop(task_id)
        self._own_kids(task.parent_id).remove(task_id)
        if not self._children[task.parent_id]:
            del self._children[task.parent_id]
        self._children.pop(task_id, None)
        p = self._own_positions().pop(task_id)
        if p < len(self._base.tasks):
            self._gone.append(p)
        else:
            self._added.remove(task_id)
        self._touch(task.parent_id)
        self._touch(task_id)
        self._counts[task.status] -= 1

    def tasks(self) -> TaskList:
        """The tasks in storage order (carrying their index for the next operation)."""
        base, by_id, pos = self._base, self._by_id, self._pos
        m = len(base.tasks)
        # Patch the base order: changed tasks in place, removed ones out, new ones last.
        out = list(base.tasks)
        for task_id in self._changed:
            p = pos.get(task_id)
            if p is not None and p < m:
                out[p] = by_id[task_id]
        if self._gone:
            if len(self._gone) <= _FEW_GONE:
                for p in sorted(self._gone, reverse=True):
                    del out[p]
            else:
                gone = set(self._gone)
                out = [t for i, t in enumerate(out) if i not in gone]
        out.extend(by_id[i] for i in self._added)
        if self._gone:
            # A new numbering keeps the relative order, so sorted subtasks stay valid.
            pos = dict(zip(map(_task_id, out), range(len(out)), strict=True))
        memo = {p: k for p, k in base.sorted_kids.items() if p not in self._dirty}
        memo.update(self._sorted)
        index = TaskIndex(tuple(out), by_id, pos, self._children, dict(self._counts), memo)
        self._frozen = True
        return TaskList.of(index)
