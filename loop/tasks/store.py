"""Where tasks live: a JSON file holding ``Task[]`` (``FILE_PATH``), or memory.

The file store re-reads the whole file on every call (several processes share it),
changes it under an exclusive lock with a re-read inside the lock, and replaces it
atomically. A file that cannot be read or parsed, or that breaks the hierarchy
(duplicate ids, unknown parents, cycles), is a :class:`StoreError` naming it: it is
never treated as empty and nothing is written.

The file is pydantic's ``indent=2`` dump of the list, unset optional fields left out,
so a person can read it and a diff shows what changed. A long-lived tool context (a
loop, an MCP server) remembers the last version of the file it read or wrote (its bytes
and checked index): when the bytes read are those, the parse and the checks are
skipped. Comparing the bytes, unlike an mtime, can never serve stale tasks.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from loop._fs import atomic_write, file_lock, make_folders, read_bytes
from loop.errors import StoreError
from loop.tasks.index import TaskIndex, TaskList, build_index, index_of, index_problem
from loop.tasks.models import Task, task_list_adapter
from loop.tools.base import ToolContext

__all__ = [
    "FileTaskStore",
    "MemoryTaskStore",
    "TaskStore",
    "dump_tasks",
    "parse_tasks",
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


def dump_tasks(tasks: Sequence[Task]) -> bytes:
    """The file form: a pretty JSON array, unset optional fields left out."""
    raw = task_list_adapter().dump_json(list(tasks), indent=2, by_alias=True, exclude_none=True)
    return raw + b"\n"


def parse_tasks(raw: bytes, path: Path) -> TaskIndex:
    """A file's bytes as checked tasks; any problem is a ``StoreError`` naming the file."""
    try:
        tasks = task_list_adapter().validate_json(raw, strict=True)  # "1" is not an order
    except ValidationError as exc:
        raise StoreError(_first_error(exc), file=path) from exc
    index = build_index(tasks)
    problem = index_problem(index)
    if problem:
        raise StoreError(problem, file=path)
    return index


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    if err["type"] == "json_invalid":
        return f"invalid JSON: {err['msg'].removeprefix('Invalid JSON: ')}"
    loc = ".".join(str(p) for p in err["loc"])
    where = f"task {loc}" if loc else "the file"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not a list of tasks: {where}: {err['msg']}{more}"


@dataclass(frozen=True, slots=True, eq=False)
class _Version:
    """One version of a file: its exact bytes and its checked index."""

    raw: bytes
    index: TaskIndex


def _differs(before: Sequence[Task], after: Sequence[Task]) -> bool:
    # Operations keep unchanged tasks as the same objects, so identity says it all.
    return len(before) != len(after) or not all(map(operator.is_, before, after))


class FileTaskStore:
    """Tasks in one JSON file shared by every process that uses it.

    The file, its lock (``<file>.lock``) and its temp file are reached from ``root``
    without following links (see :mod:`loop._fs`); ``None`` trusts the file's folder.
    ``versions`` is where the last version of the file read or written is kept (a tool
    context's state); without it every call parses the file.
    """

    def __init__(
        self,
        path: Path,
        *,
        root: Path | None = None,
        durable: bool = True,
        versions: MutableMapping[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.root = root
        self.durable = durable
        self._versions = versions
        self._key = f"tasks_file:{path}"

    def _load(self) -> _Version | None:
        try:
            raw = read_bytes(self.path, root=self.root)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read: {exc.strerror or exc}", file=self.path) from exc
        known = self._versions.get(self._key) if self._versions is not None else None
        if isinstance(known, _Version) and known.raw == raw:
            return known
        return self._remember(_Version(raw, parse_tasks(raw, self.path)))

    def _remember(self, version: _Version) -> _Version:
        if self._versions is not None:
            self._versions[self._key] = version
        return version

    def read(self) -> list[Task]:
        """The tasks in the file; a missing file is an empty list."""
        version = self._load()
        return [] if version is None else TaskList.of(version.index)

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
                raw = dump_tasks(index.tasks)
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
                self._remember(_Version(raw, index))
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
    root = ctx.trusted_root(ctx.tasks_file.parent)
    return FileTaskStore(ctx.tasks_file, root=root, versions=ctx.state)
