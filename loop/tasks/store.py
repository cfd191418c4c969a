"""Where tasks live: a JSON file holding ``Task[]`` (``FILE_PATH``), or memory.

The file store re-reads the whole file on every call (several processes share it),
changes it under an exclusive lock with a re-read inside the lock, and replaces it
atomically. A file that cannot be read or parsed, or that breaks the hierarchy
(duplicate ids, unknown parents, cycles), is a :class:`StoreError` naming it: it is
never treated as empty and nothing is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from loop._fs import atomic_write, file_lock
from loop.errors import StoreError
from loop.tasks.models import Task, task_list_adapter
from loop.tasks.tree import integrity_problem
from loop.tools.registry import ToolContext

__all__ = ["FileTaskStore", "MemoryTaskStore", "TaskStore", "store_for"]

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


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    if err["type"] == "json_invalid":
        return f"invalid JSON: {err['msg'].removeprefix('Invalid JSON: ')}"
    loc = ".".join(str(p) for p in err["loc"])
    where = f"task {loc}" if loc else "the file"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not a list of tasks: {where}: {err['msg']}{more}"


def parse_tasks(raw: bytes, path: Path) -> list[Task]:
    """Parse and check a ``Task[]`` file's bytes; any problem is a ``StoreError`` naming it."""
    try:
        tasks = task_list_adapter().validate_json(raw)
    except ValidationError as exc:
        raise StoreError(_first_error(exc), file=path) from exc
    problem = integrity_problem(tasks)
    if problem:
        raise StoreError(problem, file=path)
    return tasks


def dump_tasks(tasks: list[Task]) -> bytes:
    """The file form: a pretty JSON array, unset optional fields left out."""
    raw = task_list_adapter().dump_json(tasks, indent=2, by_alias=True, exclude_none=True)
    return raw + b"\n"


def _differs(before: list[Task], after: list[Task]) -> bool:
    # Operations keep unchanged tasks as the same objects, so identity says it all.
    return len(before) != len(after) or any(a is not b for a, b in zip(before, after, strict=True))


class FileTaskStore:
    """Tasks in one JSON file shared by every process that uses it."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable

    def read(self) -> list[Task]:
        """The tasks in the file; a missing file is an empty list."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read: {exc.strerror or exc}", file=self.path) from exc
        return parse_tasks(raw, self.path)

    def change(self, fn: Change[R]) -> R:
        """Lock, re-read, apply ``fn``, replace the file atomically (if anything changed)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create its folder: {exc.strerror or exc}", file=self.path
            ) from exc
        with file_lock(self.path):
            before = self.read()
            after, result = fn(before)
            if _differs(before, after):
                try:
                    atomic_write(self.path, dump_tasks(after), durable=self.durable)
                except OSError as exc:
                    raise StoreError(
                        f"cannot write: {exc.strerror or exc}", file=self.path
                    ) from exc
        return result


class MemoryTaskStore:
    """Tasks kept in this process only (``FILE_PATH`` unset, as the seed says)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self._state = state
        self._lock: threading.Lock = state.setdefault("tasks_lock", threading.Lock())

    def read(self) -> list[Task]:
        """The tasks held in memory."""
        tasks = self._state.get("tasks")
        return list(tasks) if isinstance(tasks, list) else []

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
    return FileTaskStore(ctx.tasks_file)
