"""The seven tools as registered: names, I/O field names, error shape, stores."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from loop.errors import ToolError
from loop.tasks.tools import TOOLS
from loop.tools.base import Tool, ToolContext

BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}


def call(ctx: ToolContext, tool: str, /, **args: Any) -> dict[str, Any]:
    """Call a tool the way the registry does and return its JSON-ready output."""
    return BY_NAME[tool].run(ctx, args).model_dump(mode="json", by_alias=True)


def error(ctx: ToolContext, tool: str, /, **args: Any) -> dict[str, Any]:
    """The structured error a refused call produces."""
    with pytest.raises(ToolError) as exc:
        BY_NAME[tool].run(ctx, args)
    return exc.value.to_dict()


@pytest.fixture(params=["memory", "file"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> ToolContext:
    """A context with an in-memory store, or with a tasks file."""
    if request.param == "memory":
        return ToolContext(root=tmp_path)
    return ToolContext(root=tmp_path, tasks_file=Path("tasks.json"))


def test_the_seven_seed_tools_are_registered() -> None:
    """TOOLS has the seed's seven names, domain tasks, and descriptions for a model."""
    assert [t.name for t in TOOLS] == [
        "createTask",
        "getTask",
        "listTasks",
        "updateTask",
        "deleteTask",
        "startTask",
        "completeTask",
    ]
    assert {t.domain for t in TOOLS} == {"tasks"}
    assert all(len(t.description) > 40 for t in TOOLS)
    assert {t.name for t in TOOLS if t.read_only} == {"getTask", "listTasks"}


def test_input_parameter_names_are_the_seeds() -> None:
    """Inputs use the seed's parameter names."""
    fields = {t.name: set(t.input_model.model_fields) for t in TOOLS}
    assert fields["createTask"] == {"name", "description", "parent_id", "order"}
    assert fields["getTask"] == {"id"}
    assert fields["listTasks"] == {"parent_id"}
    assert fields["updateTask"] >= {
        "id",
        "name",
        "description",
        "status",
        "resolution",
        "parent_id",
        "order",
    }
    assert fields["deleteTask"] == {"id", "cascade"}
    assert fields["startTask"] == {"id"}
    assert fields["completeTask"] == {"id", "resolution"}


def test_full_cycle_through_tools(ctx: ToolContext) -> None:
    """create, start, complete through the tools, with the seed's output fields."""
    root = call(ctx, "createTask", name="Ship")
    assert set(root) == {"task", "message"}
    rid = root["task"]["id"]
    uuid.UUID(rid)
    assert set(root["task"]) == {
        "id",
        "name",
        "description",
        "status",
        "order",
        "createdAt",
        "updatedAt",
    }  # parent_id and resolution are unset: absent, not null
    a = call(ctx, "createTask", name="a", parent_id=rid)["task"]["id"]
    b = call(ctx, "createTask", name="b", parent_id=rid)["task"]["id"]
    started = call(ctx, "startTask", id=rid)
    assert set(started) >= {"task", "subtask", "message", "hierarchy_summary"}
    assert started["subtask"]["id"] == a
    done = call(ctx, "completeTask", id=a, resolution="ok")
    assert set(done) >= {"next_task_id", "message", "progress_summary", "auto_completed_parents"}
    assert done["next_task_id"] == b
    assert set(done["progress_summary"]) == {
        "table",
        "total_tasks",
        "completed_tasks",
        "in_progress_tasks",
        "todo_tasks",
        "completion_percentage",
    }
    call(ctx, "startTask", id=b)
    last = call(ctx, "completeTask", id=b, resolution="ok")
    assert [t["id"] for t in last["auto_completed_parents"]] == [rid]
    assert call(ctx, "getTask", id=rid)["task"]["status"] == "done"
    assert [t["id"] for t in call(ctx, "listTasks")["tasks"]] == [rid, a, b]
    assert [t["id"] for t in call(ctx, "listTasks", parent_id=rid)["tasks"]] == [a, b]


def test_error_shape_and_codes(ctx: ToolContext) -> None:
    """Errors have the seed's shape {error: {code, message, details?}} with stable codes."""
    err = error(ctx, "getTask", id="nope")
    assert err == {
        "error": {
            "code": "task_not_found",
            "message": "task 'nope' not found",
            "details": {"id": "nope"},
        }
    }
    rid = call(ctx, "createTask", name="r")["task"]["id"]
    call(ctx, "createTask", name="c", parent_id=rid)
    assert error(ctx, "deleteTask", id=rid)["error"]["code"] == "has_subtasks"
    assert error(ctx, "completeTask", id=rid)["error"]["code"] == "resolution_required"
    assert (
        error(ctx, "completeTask", id=rid, resolution="x")["error"]["code"] == "subtasks_unfinished"
    )
    assert error(ctx, "updateTask", id=rid, status="nope")["error"]["code"] == "invalid_status"
    assert error(ctx, "createTask")["error"]["code"] == "invalid_input"
    assert error(ctx, "createTask", name="x", bogus=1)["error"]["code"] == "invalid_input"


def test_update_parent_id_absent_keeps_parent_but_null_moves_to_root(ctx: ToolContext) -> None:
    """An absent parent_id changes nothing; an explicit null or "" moves to the root."""
    rid = call(ctx, "createTask", name="r")["task"]["id"]
    cid = call(ctx, "createTask", name="c", parent_id=rid)["task"]["id"]
    assert call(ctx, "updateTask", id=cid, name="c2")["task"]["parent_id"] == rid
    assert "parent_id" not in call(ctx, "updateTask", id=cid, parent_id=None)["task"]


def test_delete_cascade_through_tool(ctx: ToolContext) -> None:
    """deleteTask with cascade=true removes the subtree and returns the ids."""
    rid = call(ctx, "createTask", name="r")["task"]["id"]
    cid = call(ctx, "createTask", name="c", parent_id=rid)["task"]["id"]
    out = call(ctx, "deleteTask", id=rid, cascade=True)
    assert out == {"id": rid, "deleted_ids": [rid, cid]}
    assert call(ctx, "listTasks")["tasks"] == []


def test_file_store_is_shared_between_contexts(tmp_path: Path) -> None:
    """Two contexts on one file see each other's changes (the file is the truth)."""
    one = ToolContext(root=tmp_path, tasks_file=Path("t.json"))
    two = ToolContext(root=tmp_path, tasks_file=Path("t.json"))
    rid = call(one, "createTask", name="r")["task"]["id"]
    assert call(two, "getTask", id=rid)["task"]["name"] == "r"
