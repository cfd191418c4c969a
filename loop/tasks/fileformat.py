"""The ``Task[]`` file's bytes: parse, check and dump, one task's fragment at a time.

The file is pydantic's ``indent=2`` dump of the list, so it is a head, the tasks'
fragments joined by one separator, and a tail. A raw newline can never occur inside a
JSON string, and a valid task holds no nested object, so the separator occurs exactly
between two tasks: splitting on it yields one fragment per task. That lets a store
re-read a file another process changed by validating only the fragments it has not
seen, and write a file by re-serialising only the tasks that changed. Anything that is
not in this form (hand-edited, or broken) takes the whole-file path, whose error
messages name the problem.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loop.errors import StoreError
from loop.tasks.models import Task, task_list_adapter

__all__ = [
    "changed_positions",
    "dump_tasks",
    "fragment",
    "join_fragments",
    "parse_whole",
    "reuse_fragments",
    "split_fragments",
]

_HEAD = b"[\n  {\n"
_SEP = b"\n  },\n  {\n"
_TAIL = b"\n  }\n]\n"
_EMPTY = b"[]\n"
_ONE_TAIL = len(b"\n  }\n]")  # a one-task dump, without the file's final newline
# Up to this many tasks changed in place, patch the old version position by position.
_FEW = 256
# Past this many fragments to look at one by one, one whole-file parse is faster.
_MANY = 2000


def dump_tasks(tasks: Sequence[Task]) -> bytes:
    """The file form: a pretty JSON array, unset optional fields left out."""
    raw = task_list_adapter().dump_json(list(tasks), indent=2, by_alias=True, exclude_none=True)
    return raw + b"\n"


def fragment(task: Task) -> bytes:
    """One task's part of the file: the bytes between its braces (same serializer)."""
    one = task_list_adapter().dump_json([task], indent=2, by_alias=True, exclude_none=True)
    return one[len(_HEAD) : -_ONE_TAIL]


def join_fragments(parts: Sequence[bytes]) -> bytes:
    """The file whose tasks have these fragments (byte for byte what ``dump_tasks`` gives)."""
    if not parts:
        return _EMPTY
    return _HEAD + _SEP.join(parts) + _TAIL


def split_fragments(raw: bytes) -> list[bytes] | None:
    """The fragments of a file in dump form, or ``None`` when it is not in that form."""
    if len(raw) < len(_HEAD) + len(_TAIL) or not raw.startswith(_HEAD) or not raw.endswith(_TAIL):
        return None
    return raw[len(_HEAD) : -len(_TAIL)].split(_SEP)


def _fragment_task(part: bytes) -> Task | None:
    # A fragment that is a whole valid object on its own is that object in the file too.
    try:
        return Task.model_validate_json(b"{\n" + part + b"\n}")
    except ValidationError:
        return None


def changed_positions(new: Sequence[Any], old: Sequence[Any], *, differ: Any) -> list[int]:
    """Positions of both where ``differ(new[i], old[i])`` is true (a C-speed scan)."""
    return list(compress(range(min(len(new), len(old))), map(differ, new, old)))


def reuse_fragments(
    parts: list[bytes], old_parts: Sequence[bytes], old_tasks: Sequence[Task]
) -> tuple[list[Task], list[int] | None] | None:
    """Tasks for ``parts``, reusing the tasks of identical fragments of an earlier version.

    When the file only changed tasks in place and appended some, returns the tasks and
    the ascending positions that differ from ``old_tasks``. Otherwise (tasks removed or
    moved) only the changed middle, after the common head and before the common tail,
    is matched against the old middle's fragments, and the positions are ``None``. New
    fragments are validated one by one. Returns ``None`` when one is not a valid task,
    or when so many are new that parsing the whole file is faster: the caller then
    parses the whole file (which also reports the problem).
    """
    n, m = len(parts), len(old_parts)
    if n - m > _FEW:
        return None
    if n >= m:
        diff = changed_positions(parts, old_parts, differ=operator.ne)
        if len(diff) <= _FEW:
            tasks = list(old_tasks)
            changed = [*diff, *range(m, n)]
            for i in changed:
                task = _fragment_task(parts[i])
                if task is None:
                    return None
                if i < m:
                    tasks[i] = task
                else:
                    tasks.append(task)
            return tasks, changed
    limit = min(n, m)
    head = 0
    while head < limit and parts[head] == old_parts[head]:
        head += 1
    tail = 0
    while tail < limit - head and parts[n - 1 - tail] == old_parts[m - 1 - tail]:
        tail += 1
    if n - tail - head > _MANY:
        return None
    known = dict(zip(old_parts[head : m - tail], old_tasks[head : m - tail], strict=True))
    middle: list[Task] = []
    for part in parts[head : n - tail]:
        task = known.get(part)
        if task is None:
            task = _fragment_task(part)
        if task is None:
            return None
        middle.append(task)
    return [*old_tasks[:head], *middle, *old_tasks[m - tail :]], None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    if err["type"] == "json_invalid":
        return f"invalid JSON: {err['msg'].removeprefix('Invalid JSON: ')}"
    loc = ".".join(str(p) for p in err["loc"])
    where = f"task {loc}" if loc else "the file"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not a list of tasks: {where}: {err['msg']}{more}"


def parse_whole(raw: bytes, path: Path) -> list[Task]:
    """Validate a whole file's bytes as ``Task[]``; a problem is a ``StoreError`` naming it."""
    try:
        return task_list_adapter().validate_json(raw)
    except ValidationError as exc:
        raise StoreError(_first_error(exc), file=path) from exc
