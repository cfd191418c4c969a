"""``python -m loop task ...``: the task tools as subcommands, plus ``task progress``.

Readable output by default, the tool's JSON with ``--json``. ``loop/cli.py`` calls
:func:`register` with its subparsers when the `task` command runs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from loop.commands.tools import (
    Renderer,
    add_context_options,
    add_tool_group,
    context_from_args,
    report_tool_error,
)
from loop.errors import LoopError
from loop.exits import EXIT_OK
from loop.tasks.store import store_for
from loop.tasks.summary import active_path, next_task, progress_summary
from loop.tasks.tools import TOOLS
from loop.tasks.tree import Forest

__all__ = ["register"]

COMMANDS = {
    "create": "createTask",
    "get": "getTask",
    "list": "listTasks",
    "update": "updateTask",
    "delete": "deleteTask",
    "start": "startTask",
    "complete": "completeTask",
}
POSITIONALS = {
    "create": ["name"],
    "get": ["id"],
    "update": ["id"],
    "delete": ["id"],
    "start": ["id"],
    "complete": ["id", "resolution"],
}


def _task_block(task: dict[str, Any]) -> str:
    lines = [
        f"id:          {task['id']}",
        f"name:        {task['name']}",
        f"status:      {task['status']}",
        f"order:       {task['order']}",
        f"parent_id:   {task.get('parent_id') or '-'}",
    ]
    if task.get("description"):
        lines.append(f"description: {task['description']}")
    if task.get("resolution"):
        lines.append(f"resolution:  {task['resolution']}")
    lines.append(f"updatedAt:   {task['updatedAt']}")
    return "\n".join(lines)


def _render_task(out: dict[str, Any]) -> str:
    text = _task_block(out["task"])
    if out.get("message"):
        text += "\n\n" + out["message"]
    return text


def _render_list(out: dict[str, Any]) -> str:
    tasks: list[dict[str, Any]] = out["tasks"]
    if not tasks:
        return "no tasks"
    parents = {t["id"]: t.get("parent_id") for t in tasks}

    def depth(task_id: str) -> int:
        d, parent = 0, parents.get(task_id)
        while parent in parents:
            d, parent = d + 1, parents[parent]
        return d

    rows = [("ID", "STATUS", "ORDER", "NAME")]
    rows += [
        (t["id"], t["status"], str(t["order"]), "  " * depth(t["id"]) + t["name"]) for t in tasks
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:3])) + "  " + r[3] for r in rows
    )


def _render_delete(out: dict[str, Any]) -> str:
    ids: list[str] = out["deleted_ids"]
    return f"deleted {len(ids)} task(s):\n" + "\n".join(ids)


def _render_start(out: dict[str, Any]) -> str:
    parts = [out.get("message") or "", out.get("hierarchy_summary") or ""]
    return "\n\n".join(p for p in parts if p)


def _summary_text(summary: dict[str, Any]) -> str:
    return (
        f"{summary['completed_tasks']}/{summary['total_tasks']} done "
        f"({summary['completion_percentage']}%), {summary['in_progress_tasks']} in progress, "
        f"{summary['todo_tasks']} todo\n\n{summary['table']}"
    )


def _render_complete(out: dict[str, Any]) -> str:
    text = str(out["message"])
    if out.get("progress_summary"):
        text += "\n\n" + _summary_text(out["progress_summary"])
    return text


RENDERERS: dict[str, Renderer] = {
    "create": _render_task,
    "get": _render_task,
    "update": _render_task,
    "list": _render_list,
    "delete": _render_delete,
    "start": _render_start,
    "complete": _render_complete,
}


def _progress(args: argparse.Namespace) -> int:
    """``task progress``: the summary table, the active path and the next task."""
    try:
        forest = Forest(store_for(context_from_args(args)).read())
    except LoopError as exc:
        return report_tool_error(exc, as_json=args.json)
    summary = progress_summary(forest).model_dump(mode="json")
    upcoming = next_task(forest)
    path = active_path(forest)
    out = {**summary, "active_path": [{"id": t.id, "name": t.name} for t in path]}
    if upcoming:  # absent once no task is left, as in the tools' replies
        out["next_task_id"] = upcoming.id
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return EXIT_OK
    text = _summary_text(summary)
    if path:
        text += "\n\nactive: " + " > ".join(t.name for t in path)
    if upcoming:
        text += f"\nnext:   {upcoming.name} ({upcoming.id})"
    print(text)
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``task`` with ``create|get|list|update|delete|start|complete|progress``."""
    group = add_tool_group(
        subparsers,
        "task",
        help="hierarchical tasks: create, start, complete, progress",
        tools=TOOLS,
        commands=COMMANDS,
        positionals=POSITIONALS,
        renderers=RENDERERS,
    )
    progress = group.subcommands.add_parser(
        "progress",
        help="progress summary: counts, the per-parent table, the active path, the next task",
    )
    progress.add_argument("--json", action="store_true", help="print the result as JSON")
    add_context_options(progress)
    progress.set_defaults(handler=_progress)
