"""Task tool latency: createTask, startTask and completeTask on a file of N tasks."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["task_ops", "write_task_file"]


def write_task_file(path: Path, count: int) -> None:
    """Write ``count`` done tasks: roots with nine subtasks each (a realistic tree)."""
    from loop.tasks.models import Task
    from loop.tasks.store import dump_tasks

    now = datetime.now(UTC)
    tasks: list[Task] = []
    root_id = ""
    for i in range(count):
        is_root = i % 10 == 0
        tid = str(uuid.uuid4())
        tasks.append(
            Task(
                id=tid,
                name=f"task {i}",
                description=f"bench task number {i}",
                status="done",
                resolution="done in the bench",
                parent_id=None if is_root else root_id,
                order=i // 10 if is_root else i % 10,
                created_at=now,
                updated_at=now,
            )
        )
        if is_root:
            root_id = tid
    path.write_bytes(dump_tasks(tasks))


def _caller() -> tuple[str, Callable[..., dict[str, Any]]]:
    """``call_tool`` from the registry; the tasks domain alone if another domain fails to load."""
    from loop.tools.registry import call_tool

    try:
        from loop.tools.registry import all_tools

        all_tools()
    except ImportError:
        from loop.tasks.tools import TOOLS

        by_name = {t.name: t for t in TOOLS}

        def direct(ctx: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
            result = by_name[name].run(ctx, args)
            return result.model_dump(mode="json", by_alias=True)

        return "tasks.tools (registry import failed)", direct
    return "registry.call_tool", call_tool


def task_ops(params: dict[str, Any]) -> dict[str, Any]:
    """Median latency of create, start and complete at ``count`` tasks, warm and cold.

    Warm: this tool context wrote the file last (it remembers that version). Cold:
    another writer changed the file since (one task renamed, the bytes rewritten behind
    the context's back, as an agent's CLI call would). Fresh: a context that never read
    the file (a new one per call, as each CLI command is), reported for information.
    """
    from loop.tasks.store import dump_tasks, parse_tasks
    from loop.tools.base import ToolContext

    count = int(params["count"])
    reps = int(params.get("reps", 10))
    via, call = _caller()
    results: dict[str, Any] = {"count": count, "reps": reps, "via": via}
    with tempfile.TemporaryDirectory(prefix="hatloop-tasks-") as tmp:
        path = Path(tmp) / "tasks.json"
        write_task_file(path, count)
        results["file_bytes"] = path.stat().st_size
        ctx = ToolContext(root=Path(tmp), tasks_file=path)
        for temp in ("warm", "cold", "fresh"):
            times: dict[str, list[float]] = {"createTask": [], "startTask": [], "completeTask": []}

            def timed(
                name: str,
                args: dict[str, Any],
                temp: str = temp,
                times: dict[str, list[float]] = times,
            ) -> dict[str, Any]:
                if temp == "fresh":
                    ctx.state.clear()
                elif temp == "cold":  # another writer: same layout, one task renamed
                    tasks = list(parse_tasks(path.read_bytes(), path).tasks)
                    tasks[0] = tasks[0].model_copy(update={"name": f"renamed {time.time()}"})
                    path.write_bytes(dump_tasks(tasks))
                else:
                    call(ctx, "listTasks", {})  # make sure the cache holds the file
                t0 = time.perf_counter()
                out = call(ctx, name, args)
                times[name].append((time.perf_counter() - t0) * 1e3)
                return out

            for i in range(reps):
                created = timed(
                    "createTask", {"name": f"bench {temp} {i}", "description": "measured"}
                )
                task_id = created["task"]["id"]
                timed("startTask", {"id": task_id})
                timed("completeTask", {"id": task_id, "resolution": "measured"})
            results[temp] = {
                k: {"median_ms": statistics.median(v), "max_ms": max(v)} for k, v in times.items()
            }
    return results
