"""The task model of seed 003 and the inputs and outputs of its seven tools.

Field names on disk and in tool I/O are the seed's: ``parent_id`` (snake case) next to
``createdAt``/``updatedAt`` (camel case). Optional fields that are unset (the seed's
``resolution?``, ``parent_id?``, ``message?``...) are left out, never ``null``: in the
file and in every tool reply, as the original's ``Task[]`` JSON did.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from loop.errors import ToolError

__all__ = [
    "MAX_ORDER",
    "STATUSES",
    "CompleteTaskInput",
    "CompleteTaskOutput",
    "CreateTaskInput",
    "CreateTaskOutput",
    "DeleteTaskInput",
    "DeleteTaskOutput",
    "GetTaskInput",
    "GetTaskOutput",
    "ListTasksInput",
    "ListTasksOutput",
    "ProgressSummary",
    "StartTaskInput",
    "StartTaskOutput",
    "Task",
    "TaskStatus",
    "UpdateTaskInput",
    "UpdateTaskOutput",
    "task_list_adapter",
]

TaskStatus = Literal["todo", "in_progress", "done"]
STATUSES: tuple[str, ...] = ("todo", "in_progress", "done")
# The largest order a tool accepts or assigns: it fits a signed 32-bit integer, so any
# client's integer type holds it exactly.
MAX_ORDER = 2**31 - 1


def _unset_if_none(value: object) -> bool:
    return value is None


def _optional(description: str | None = None) -> Any:
    """An optional field that is left out of dumps while unset (``None``)."""
    return Field(default=None, description=description, exclude_if=_unset_if_none)


class Task(BaseModel):
    """One task (seed 003 ``Task``): a node of the hierarchy, ordered among its siblings."""

    # Frozen: a parsed file's tasks are shared between reads (see the store's cache).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    id: str = Field(description="UUID of the task")
    name: str = Field(description="short name")
    description: str = Field(default="", description="what the task is about")
    status: TaskStatus = Field(description="todo, in_progress or done")
    resolution: str | None = _optional("how it ended (done tasks only); absent while unset")
    parent_id: str | None = _optional("parent task id; absent at the root")
    order: int = Field(description="execution order among siblings (lower runs first)")
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")


_task_list = TypeAdapter(list[Task])


def task_list_adapter() -> TypeAdapter[list[Task]]:
    """The adapter that parses and dumps a whole ``Task[]`` file in one call (fast)."""
    return _task_list


class ProgressSummary(BaseModel):
    """Overall counts and the per-parent Markdown table (seed 003 ``ProgressSummary``)."""

    table: str = Field(description="| Task Name | Status | Subtasks | Progress | per parent task")
    total_tasks: int
    completed_tasks: int
    in_progress_tasks: int
    todo_tasks: int
    completion_percentage: int = Field(description="completed / total x 100, rounded (0-100)")


def _check_status(data: Any) -> Any:
    # A bad status gets its own stable code instead of a generic validation error.
    if isinstance(data, dict):
        status = data.get("status")
        if status is not None and status not in STATUSES:
            raise ToolError(
                "invalid_status",
                f"invalid status {status!r}: use one of {', '.join(STATUSES)}",
                details={"status": status, "allowed": list(STATUSES)},
            )
    return data


_ORDER_HELP = (
    f"position among siblings (1 to {MAX_ORDER}, lower runs first); unset or 0: after the "
    "last sibling"
)


def _order_field() -> Any:
    return Field(default=None, ge=0, le=MAX_ORDER, description=_ORDER_HELP)


class CreateTaskInput(BaseModel):
    """Arguments of ``createTask``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(description="short name of the task")
    description: str | None = Field(default=None, description="details: goal, done criteria")
    parent_id: str | None = Field(default=None, description="id of the parent task (subtask)")
    order: int | None = _order_field()


class CreateTaskOutput(BaseModel):
    """Result of ``createTask``."""

    model_config = ConfigDict(defer_build=True)

    task: Task
    message: str | None = _optional("for a root task: break it down into subtasks")


class GetTaskInput(BaseModel):
    """Arguments of ``getTask``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="task id")


class GetTaskOutput(BaseModel):
    """Result of ``getTask``."""

    model_config = ConfigDict(defer_build=True)

    task: Task


class ListTasksInput(BaseModel):
    """Arguments of ``listTasks``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    parent_id: str | None = Field(
        default=None, description="only the direct subtasks of this task; unset: every task"
    )


class ListTasksOutput(BaseModel):
    """Result of ``listTasks``."""

    model_config = ConfigDict(defer_build=True)

    tasks: list[Task]


class UpdateTaskInput(BaseModel):
    """Arguments of ``updateTask``; only the fields given change."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="task id")
    name: str | None = Field(default=None, description="new name")
    description: str | None = Field(default=None, description="new description")
    status: TaskStatus | None = Field(default=None, description="todo, in_progress or done")
    resolution: str | None = Field(default=None, description="result text (done tasks only)")
    parent_id: str | None = Field(
        default=None, description='new parent id; "" moves the task to the root'
    )
    order: int | None = _order_field()

    @model_validator(mode="before")
    @classmethod
    def _valid_status(cls, data: Any) -> Any:
        return _check_status(data)


class UpdateTaskOutput(BaseModel):
    """Result of ``updateTask``."""

    model_config = ConfigDict(defer_build=True)

    task: Task
    reset_tasks: list[Task] = Field(
        default_factory=list,
        description="tasks set back to todo because this one became the in-progress task",
    )


class DeleteTaskInput(BaseModel):
    """Arguments of ``deleteTask``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="task id")
    cascade: bool = Field(
        default=False, description="also delete every subtask (refused without it)"
    )


class DeleteTaskOutput(BaseModel):
    """Result of ``deleteTask``: the id, plus every id removed (the task and its subtree)."""

    model_config = ConfigDict(defer_build=True)

    id: str
    deleted_ids: list[str]


class StartTaskInput(BaseModel):
    """Arguments of ``startTask``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="task id")


class StartTaskOutput(BaseModel):
    """Result of ``startTask``: the task, the deepest subtask started, and the hierarchy."""

    model_config = ConfigDict(defer_build=True)

    task: Task
    subtask: Task | None = _optional("the deepest subtask started: work on this one")
    message: str | None = _optional()
    hierarchy_summary: str | None = _optional()
    started_tasks: list[Task] = Field(default_factory=list)
    reset_tasks: list[Task] = Field(
        default_factory=list,
        description="tasks set back to todo: only one leaf task is in progress at a time",
    )


def _require_resolution(data: Any) -> Any:
    # "Without a resolution" is one refusal whether the key is missing, null or blank.
    if isinstance(data, dict):
        resolution = data.get("resolution")
        if resolution is None or (isinstance(resolution, str) and not resolution.strip()):
            raise ToolError(
                "resolution_required",
                "completeTask needs a resolution: say briefly what was done and how",
            )
    return data


class CompleteTaskInput(BaseModel):
    """Arguments of ``completeTask``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="task id")
    resolution: str = Field(description="what was done and how it ended (required)")

    @model_validator(mode="before")
    @classmethod
    def _has_resolution(cls, data: Any) -> Any:
        return _require_resolution(data)


class CompleteTaskOutput(BaseModel):
    """Result of ``completeTask``."""

    model_config = ConfigDict(defer_build=True)

    next_task_id: str | None = _optional("the next unfinished leaf task; absent when none is left")
    message: str
    progress_summary: ProgressSummary | None = _optional()
    auto_completed_parents: list[Task] = Field(default_factory=list)
    task: Task | None = _optional("the task completed")
