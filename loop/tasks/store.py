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


# Parsed files by path, with the exact bytes they were parsed from. A read compares
# the bytes (a memcmp) instead of parsing again: unlike mtime or inode checks this can
# never serve stale tasks, and at 10,000 tasks it is ~100x cheaper than validation.
_CACHE_SIZE = 8
_parsed: dict[str, tuple[bytes, tuple[Task, ...]]] = {}


def parse_tasks(raw: bytes, path: Path) -> list[Task]:
    """Parse and check a ``Task[]`` file's bytes; any problem is a ``StoreError`` naming it."""
    key = str(path)
    hit = _parsed.get(key)
    if hit is not None and hit[0] == raw:
        return list(hit[1])
    tasks = _validate(raw, path)
    _remember(key, raw, tasks)
    return tasks


def _remember(key: str, raw: bytes, tasks: list[Task]) -> None:
    _parsed.pop(key, None)
    if len(_parsed) >= _CACHE_SIZE:
        _parsed.pop(next(iter(_parsed)))
    _parsed[key] = (raw, tuple(tasks))


def _validate(raw: bytes, path: Path) -> list[Task]:
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
                raw = dump_tasks(after)
                try:
                    atomic_write(self.path, raw, durable=self.durable)
                except OSError as exc:
                    raise StoreError(
                        f"cannot write: {exc.strerror or exc}", file=self.path
                    ) from exc
                _remember(str(self.path), raw, after)
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
