"""The seven task tools of seed 003, registered once for the CLI, MCP and the bus.

Each tool function reads or changes the store for its :class:`ToolContext` through a
pure operation (:mod:`loop.tasks.operations`, :mod:`loop.tasks.execution`). The time
and a new task's id come from the context: inside a session they are the call's own
(the same on a replay), and creating a task whose id is already taken by the same
task (the re-run of an interrupted iteration) answers with that task.
"""

from __future__ import annotations

from loop.tasks import execution, operations
from loop.tasks.models import (
    CompleteTaskInput,
    CompleteTaskOutput,
    CreateTaskInput,
    CreateTaskOutput,
    DeleteTaskInput,
    DeleteTaskOutput,
    GetTaskInput,
    GetTaskOutput,
    ListTasksInput,
    ListTasksOutput,
    StartTaskInput,
    StartTaskOutput,
    Task,
    UpdateTaskInput,
    UpdateTaskOutput,
)
from loop.tasks.store import store_for
from loop.tools.base import BusRequest, BusService, Tool, ToolContext

__all__ = [
    "BUS",
    "TOOLS",
    "complete_task",
    "create_task",
    "delete_task",
    "get_task",
    "list_tasks",
    "start_task",
    "update_task",
]

DOMAIN = "tasks"


def create_task(ctx: ToolContext, inp: CreateTaskInput) -> CreateTaskOutput:
    """``createTask``: add a todo task (a subtask with ``parent_id``)."""
    now = ctx.now()

    def change(tasks: list[Task]) -> tuple[list[Task], CreateTaskOutput]:
        taken = {t.id for t in tasks}
        attempt = 0
        new_id = ctx.new_id("task")
        while new_id in taken:  # only a derived id can be: a repeat, or another task's
            repeat = operations.repeated_create(
                tasks,
                new_id,
                name=inp.name,
                description=inp.description,
                parent_id=inp.parent_id,
                now=now,
            )
            if repeat is not None:
                return repeat
            attempt += 1
            new_id = ctx.new_id("task", attempt)
        return operations.create(
            tasks,
            name=inp.name,
            description=inp.description,
            parent_id=inp.parent_id,
            order=inp.order,
            new_id=new_id,
            now=now,
        )

    return store_for(ctx).change(change)


def get_task(ctx: ToolContext, inp: GetTaskInput) -> GetTaskOutput:
    """``getTask``: one task by id."""
    return operations.get(store_for(ctx).read(), inp.id)


def list_tasks(ctx: ToolContext, inp: ListTasksInput) -> ListTasksOutput:
    """``listTasks``: every task in execution order, or one task's direct subtasks."""
    return operations.list_tasks(store_for(ctx).read(), inp.parent_id)


def update_task(ctx: ToolContext, inp: UpdateTaskInput) -> UpdateTaskOutput:
    """``updateTask``: change the fields given."""
    parent = inp.parent_id if "parent_id" in inp.model_fields_set else operations.UNSET
    now = ctx.now()

    def change(tasks: list[Task]) -> tuple[list[Task], UpdateTaskOutput]:
        return operations.update(
            tasks,
            inp.id,
            name=inp.name,
            description=inp.description,
            status=inp.status,
            resolution=inp.resolution,
            parent_id=parent,
            order=inp.order,
            now=now,
        )

    return store_for(ctx).change(change)


def delete_task(ctx: ToolContext, inp: DeleteTaskInput) -> DeleteTaskOutput:
    """``deleteTask``: remove a task (its subtree only with ``cascade``)."""

    def change(tasks: list[Task]) -> tuple[list[Task], DeleteTaskOutput]:
        return operations.delete(tasks, inp.id, cascade=inp.cascade)

    return store_for(ctx).change(change)


def start_task(ctx: ToolContext, inp: StartTaskInput) -> StartTaskOutput:
    """``startTask``: start a task, its ancestors and its first unfinished subtask chain."""
    now = ctx.now()

    def change(tasks: list[Task]) -> tuple[list[Task], StartTaskOutput]:
        return execution.start(tasks, inp.id, now=now)

    return store_for(ctx).change(change)


def complete_task(ctx: ToolContext, inp: CompleteTaskInput) -> CompleteTaskOutput:
    """``completeTask``: finish a task and report the next one and the progress."""
    now = ctx.now()

    def change(tasks: list[Task]) -> tuple[list[Task], CompleteTaskOutput]:
        return execution.complete(tasks, inp.id, inp.resolution, now=now)

    return store_for(ctx).change(change)


_CYCLE = (
    "Work cycle: createTask (a root task, then its subtasks in order) -> startTask on the "
    "root -> do the subtask it started -> completeTask with a resolution -> startTask on "
    "next_task_id -> ... until no open tasks remain."
)

TOOLS: list[Tool] = [
    Tool(
        name="createTask",
        domain=DOMAIN,
        description=(
            "Create a task. Without parent_id it is a root task; with parent_id it is a "
            "subtask. Without order (or order 0) it goes after its last sibling; an order "
            "already taken pushes that sibling and the later ones back by one. After "
            "creating a root task, break it down into subtasks.\n" + _CYCLE
        ),
        input_model=CreateTaskInput,
        output_model=CreateTaskOutput,
        func=create_task,
    ),
    Tool(
        name="getTask",
        domain=DOMAIN,
        description="Get one task by id (its fields only; use listTasks for its subtasks).",
        input_model=GetTaskInput,
        output_model=GetTaskOutput,
        func=get_task,
        read_only=True,
    ),
    Tool(
        name="listTasks",
        domain=DOMAIN,
        description=(
            "List tasks. With parent_id: that task's direct subtasks in order. Without: "
            "every task, depth first in execution order (parents before their subtasks)."
        ),
        input_model=ListTasksInput,
        output_model=ListTasksOutput,
        func=list_tasks,
        read_only=True,
    ),
    Tool(
        name="updateTask",
        domain=DOMAIN,
        description=(
            "Update the fields given of a task: name, description, status "
            '(todo|in_progress|done), resolution (done tasks only), parent_id ("" moves it '
            "to the root; moving a task under its own subtask is refused) and order. Prefer "
            "startTask and completeTask to change status: they keep the execution order."
        ),
        input_model=UpdateTaskInput,
        output_model=UpdateTaskOutput,
        func=update_task,
    ),
    Tool(
        name="deleteTask",
        domain=DOMAIN,
        description=(
            "Delete a task. A task with subtasks is refused unless cascade is true, which "
            "deletes the whole subtree."
        ),
        input_model=DeleteTaskInput,
        output_model=DeleteTaskOutput,
        func=delete_task,
    ),
    Tool(
        name="startTask",
        domain=DOMAIN,
        description=(
            "Start a task: it and its parents become in_progress, and its first unfinished "
            "subtask (by order) is started too, recursively down to the deepest one, which "
            "is returned as subtask: work on that one. Refused while an earlier task (a "
            "lower-order sibling of the task or of any of its parents) is unfinished. The "
            "reply has a table of the task's hierarchy.\n" + _CYCLE
        ),
        input_model=StartTaskInput,
        output_model=StartTaskOutput,
        func=start_task,
    ),
    Tool(
        name="completeTask",
        domain=DOMAIN,
        description=(
            "Complete a task with a resolution (what was done and how it ended). Refused "
            "while any of its subtasks is unfinished. Parents whose subtasks are then all "
            "done are completed automatically (auto_completed_parents). The reply gives "
            "next_task_id (start it next) and a progress summary table.\n" + _CYCLE
        ),
        input_model=CompleteTaskInput,
        output_model=CompleteTaskOutput,
        func=complete_task,
    ),
]

# How hats request these tools with events (loop.tools.bus serves it). Results go to
# every subscriber: several hats share one task list. After a change, the tasks
# extension adds task.progress.
BUS = BusService(
    prefix="task",
    source=DOMAIN,
    tools=TOOLS,
    requests=(
        BusRequest("create", "createTask", "created"),
        BusRequest("get", "getTask", "found", bare="id"),
        BusRequest("list", "listTasks", "listed"),
        BusRequest("update", "updateTask", "updated"),
        BusRequest("delete", "deleteTask", "deleted", bare="id"),
        BusRequest("start", "startTask", "started", bare="id"),
        BusRequest("complete", "completeTask", "completed"),
    ),
    reply_to_requester=False,
    notices=("progress",),
)
