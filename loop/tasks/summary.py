"""Progress: the seed's summary table, the start hierarchy, the next task, the active path.

Tables are bounded (``MAX_ROWS``) so that a reply stays readable for a model even with
thousands of tasks; a last line says how many rows were left out. The next task and
the active path are the rules of :mod:`loop.tasks.focus`, re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from loop.tasks.focus import active_path, next_task
from loop.tasks.models import ProgressSummary, Task
from loop.tasks.tree import Forest

__all__ = [
    "MAX_ROWS",
    "TaskProgressRow",
    "active_path",
    "hierarchy_table",
    "next_task",
    "progress_summary",
]

MAX_ROWS = 100
_HEADER = "| Task Name | Status | Subtasks | Progress |\n| --- | --- | --- | --- |"


@dataclass(frozen=True, slots=True)
class TaskProgressRow:
    """One row of a progress table (seed 003 ``TaskProgressRow``)."""

    task_name: str
    status: str
    completed_subtasks: int
    total_subtasks: int
    progress_percentage: int

    def markdown(self, indent: int = 0) -> str:
        """The row as a Markdown table line; ``indent`` marks the depth in the hierarchy."""
        name = _cell(self.task_name)
        if indent:
            name = "  " * (indent - 1) + "└ " + name
        subtasks = (
            f"{self.completed_subtasks}/{self.total_subtasks}" if self.total_subtasks else "-"
        )
        return f"| {name} | {self.status} | {subtasks} | {self.progress_percentage}% |"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _percent(part: int, whole: int) -> int:
    return round(part * 100 / whole) if whole else 0


def _row(forest: Forest, task: Task) -> TaskProgressRow:
    kids = forest.children(task.id)
    done = sum(1 for k in kids if k.status == "done")
    # A leaf is all or nothing.
    leaf_pct = 100 if task.status == "done" else 0
    pct = _percent(done, len(kids)) if kids else leaf_pct
    return TaskProgressRow(task.name, task.status, done, len(kids), pct)


def _table(lines: list[str], total: int, what: str) -> str:
    shown = lines[:MAX_ROWS]
    out = "\n".join([_HEADER, *shown])
    if total > len(shown):
        out += f"\n\n… {total - len(shown)} more {what} not shown"
    return out


def progress_summary(forest: Forest) -> ProgressSummary:
    """Counts over every task and a table with one row per task that has subtasks."""
    counts = forest.status_counts()
    parents = len(forest.parent_ids())
    lines: list[str] = []
    # Only the rows shown are walked to: the counts come from the forest's index.
    if parents:
        for task, _depth in forest.walk():
            if forest.has_children(task.id):
                lines.append(_row(forest, task).markdown())
                if len(lines) >= MAX_ROWS:
                    break
    total = len(forest)
    return ProgressSummary(
        table=_table(lines, parents, "parent tasks"),
        total_tasks=total,
        completed_tasks=counts["done"],
        in_progress_tasks=counts["in_progress"],
        todo_tasks=counts["todo"],
        completion_percentage=_percent(counts["done"], total),
    )


def hierarchy_table(forest: Forest, task_id: str) -> str:
    """The tree holding ``task_id`` (from its root), depth first, one row per task."""
    root = forest.root_of(task_id)
    lines = [_row(forest, root).markdown()]
    total = 1
    for task, depth in forest.walk(root.id, 1):
        total += 1
        if len(lines) < MAX_ROWS:
            lines.append(_row(forest, task).markdown(depth))
    return _table(lines, total, "tasks")
