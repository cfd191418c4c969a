"""Where tasks live: a JSON file holding ``Task[]`` (``FILE_PATH``), or memory.

The file store re-reads the whole file on every call (several processes share it),
changes it under an exclusive lock with a re-read inside the lock, and replaces it
atomically. A file that cannot be read or parsed, or that breaks the hierarchy
(duplicate ids, unknown parents, cycles), is a :class:`StoreError` naming it: it is
never treated as empty and nothing is written.

Each process keeps the last version of each file it read or wrote (bytes, checked
index, per-task fragments), so an operation at 10,000 tasks costs what it changes plus
a few linear passes over the bytes (compare, split, join, write), not a full parse,
check and dump.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from loop._fs import atomic_write, file_lock, make_folders, read_bytes
from loop.errors import StoreError
from loop.tasks.fileformat import (
    changed_positions,
    dump_tasks,
    fragment,
    join_fragments,
    parse_whole,
    reuse_fragments,
    split_fragments,
)
from loop.tasks.index import (
    TaskIndex,
    TaskList,
    build_index,
    derive_index,
    index_of,
    index_problem,
)
from loop.tasks.models import Task
from loop.tools.base import ToolContext

__all__ = [
    "FileTaskStore",
    "MemoryTaskStore",
    "TaskStore",
    "dump_tasks",
    "store_for",
]

R = TypeVar("R")
Change = Callable[[list[Task]], tuple[list[Task], R]]


class TaskStore(Protocol):
    """Read the task list, or change it as one atomic step."""

    def read(self) -> list[Task]:
        """The current tasks, in storage order."""
        ...

    def change(self, fn: Change[R]) -> R:
        """Apply ``fn(tasks) -> (new_tasks, result)`` atomically and return ``result``.

        If ``fn`` raises, nothing is stored.
        """
        ...


@dataclass(eq=False, slots=True)
class _Snapshot:
    """One version of a file: its exact bytes, its checked index, its task fragments."""

    raw: bytes
    index: TaskIndex
    parts: list[bytes] | None  # aligned with index.tasks; None until needed
    by_task: dict[int, bytes] | None = field(default=None)

    def fragments(self) -> list[bytes]:
        """Each task's fragment of the file, in storage order."""
        if self.parts is None:
            self.parts = split_fragments(dump_tasks(self.index.tasks)) or []
        return self.parts

    def fragment_of(self) -> dict[int, bytes]:
        """Fragments by ``id()`` of this version's tasks (alive as long as the snapshot)."""
        if self.by_task is None:
            self.by_task = dict(zip(map(id, self.index.tasks), self.fragments(), strict=True))
        return self.by_task


# The last version of each file read or written, by path. A read compares the bytes (a
# memcmp): unlike mtime or inode checks this can never serve stale tasks. When another
# process changed the file, only the fragments that differ from this version are
# validated, so re-reading costs about what the change touched plus a split of the file.
_CACHE_SIZE = 8
_FEW_CHANGED = 256  # past this, match unchanged tasks by identity wherever they moved
_parsed: dict[str, _Snapshot] = {}


def _remember(key: str, snapshot: _Snapshot) -> None:
    _parsed.pop(key, None)
    if len(_parsed) >= _CACHE_SIZE:
        _parsed.pop(next(iter(_parsed)))
    _parsed[key] = snapshot


def _checked_index(tasks: list[Task], path: Path) -> TaskIndex:
    index = build_index(tasks)
    problem = index_problem(index)
    if problem:
        raise StoreError(problem, file=path)
    return index


def _parse(raw: bytes, path: Path, old: _Snapshot | None) -> _Snapshot:
    parts = split_fragments(raw)
    if parts is not None and old is not None and old.parts is not None:
        reused = reuse_fragments(parts, old.parts, old.index.tasks)
        if reused is not None:
            tasks, changed = reused
            # Tasks changed in place or appended under known parents keep the tree valid.
            index = None if changed is None else derive_index(old.index, tasks, changed)
            if index is None:
                index = _checked_index(tasks, path)
            return _Snapshot(raw, index, parts)
    tasks = parse_whole(raw, path)
    if parts is not None and len(parts) != len(tasks):
        parts = None
    return _Snapshot(raw, _checked_index(tasks, path), parts)


def _snapshot(raw: bytes, path: Path) -> _Snapshot:
    key = str(path)
    old = _parsed.get(key)
    if old is not None and old.raw == raw:
        return old
    snapshot = _parse(raw, path, old)
    _remember(key, snapshot)
    return snapshot


def _differs(before: Sequence[Task], after: Sequence[Task]) -> bool:
    # Operations keep unchanged tasks as the same objects, so identity says it all.
    return len(before) != len(after) or not all(map(operator.is_, before, after))


def _fragments(tasks: Sequence[Task], old: _Snapshot | None) -> list[bytes]:
    """The file fragments of ``tasks``: reused from ``old`` where the task is unchanged."""
    if old is None:
        return split_fragments(dump_tasks(tasks)) or []
    old_tasks, old_parts = old.index.tasks, old.fragments()
    m = len(old_tasks)
    if len(tasks) >= m:
        diff = changed_positions(tasks, old_tasks, differ=operator.is_not)
        if len(diff) <= _FEW_CHANGED:
            # Changed in place or appended (what operations other than delete do).
            parts = list(old_parts)
            for i in diff:
                parts[i] = fragment(tasks[i])
            parts.extend(fragment(t) for t in tasks[m:])
            return parts
    # Tasks removed or moved: find each unchanged task's fragment by identity.
    known = old.fragment_of()
    found: list[bytes | None] = list(map(known.get, map(id, tasks)))
    for i in compress(range(len(found)), map(operator.not_, found)):
        found[i] = fragment(tasks[i])
    return cast(list[bytes], found)  # every None was just replaced


class FileTaskStore:
    """Tasks in one JSON file shared by every process that uses it.

    The file, its lock (``<file>.lock``) and its temp file are reached from ``root``
    without following links (see :mod:`loop._fs`); ``None`` trusts the file's folder.
    """

    def __init__(self, path: Path, *, root: Path | None = None, durable: bool = True) -> None:
        self.path = path
        self.root = root
        self.durable = durable

    def _load(self) -> _Snapshot | None:
        try:
            raw = read_bytes(self.path, root=self.root)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read: {exc.strerror or exc}", file=self.path) from exc
        return _snapshot(raw, self.path)

    def read(self) -> list[Task]:
        """The tasks in the file; a missing file is an empty list."""
        snapshot = self._load()
        return [] if snapshot is None else TaskList.of(snapshot.index)

    def change(self, fn: Change[R]) -> R:
        """Lock, re-read, apply ``fn``, replace the file atomically (if anything changed)."""
        try:
            make_folders(self.path.parent, root=self.root or self.path.parent)
        except OSError as exc:
            raise StoreError(
                f"cannot create its folder: {exc.strerror or exc}", file=self.path
            ) from exc
        with file_lock(self.path, root=self.root):
            old = self._load()
            before: list[Task] = [] if old is None else TaskList.of(old.index)
            after, result = fn(before)
            if _differs(before, after):
                # Our own operations built `after`: its index needs no integrity check.
                index = index_of(after)
                parts = _fragments(index.tasks, old)
                raw = join_fragments(parts)
                try:
                    # under the lock: one fixed temp name, so a killed write leaves at
                    # most one temp file, which the next write replaces
                    atomic_write(
                        self.path, raw, root=self.root, durable=self.durable, single_writer=True
                    )
                except OSError as exc:
                    raise StoreError(
                        f"cannot write: {exc.strerror or exc}", file=self.path
                    ) from exc
                _remember(str(self.path), _Snapshot(raw, index, parts))
        return result


class MemoryTaskStore:
    """Tasks kept in this process only (``FILE_PATH`` unset, as the seed says)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self._state = state
        self._lock: threading.Lock = state.setdefault("tasks_lock", threading.Lock())

    def read(self) -> list[Task]:
        """The tasks held in memory."""
        tasks = self._state.get("tasks")
        if not isinstance(tasks, list):
            return []
        out = TaskList(tasks)
        out.tree_index = getattr(tasks, "tree_index", None)  # index_of checks it before use
        return out

    def change(self, fn: Change[R]) -> R:
        """Apply ``fn`` under a lock; keep the new list."""
        with self._lock:
            after, result = fn(self.read())
            self._state["tasks"] = after
        return result


def store_for(ctx: ToolContext) -> FileTaskStore | MemoryTaskStore:
    """The file store for ``ctx.tasks_file``, or the in-memory store in ``ctx.state``."""
    if ctx.tasks_file is None:
        return MemoryTaskStore(ctx.state)
    return FileTaskStore(ctx.tasks_file, root=ctx.trusted_root(ctx.tasks_file.parent))
