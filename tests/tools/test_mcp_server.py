"""The MCP server in process (``mcp.Client``): every tool's schemas, results and errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, MutableMapping
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel
from structlog.testing import capture_logs

from loop.config import load_config
from loop.errors import SessionError
from loop.runner import RunOptions, run_loop
from loop.themes import Workspace, write_heartbeat
from loop.tools.base import Tool, ToolContext
from loop.tools.mcp_server import build_server, pre_parse
from loop.tools.registry import all_tools

SUMMARY: dict[str, Any] = {
    "ai_name": "Claude(careful loop builder)",
    "ai_context": "Builds an agent loop runner",
    "experience_summary": "Served every tool over MCP and tested it.",
    "experience_flow": ["design", "implementation", "tests"],
    "main_topics": ["MCP schemas (typed)", "errors (structured)", "locks (concurrency)"],
}


@pytest.fixture(autouse=True)
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """Capture the server's structlog events (and keep them off the shared stderr)."""
    with capture_logs() as captured:
        yield captured


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """A context whose files all live under tmp_path, inside a running iteration."""
    return ToolContext(
        root=tmp_path,
        tasks_file=Path("tasks.json"),
        workspace=Path("works"),
        experiences_base=Path("exp"),
        events_file=tmp_path / "events.jsonl",
    )


@pytest.fixture
async def client(ctx: ToolContext) -> AsyncIterator[Client]:
    """An in-process client connected to a server over ``ctx``."""
    async with Client(build_server(ctx), raise_exceptions=True) as c:
        yield c


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def ok(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content (equal to its JSON text)."""
    result = await client.call_tool(name, args or {})
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    assert json.loads(_text(result)) == result.structured_content
    return result.structured_content


async def err(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must fail; the structured error carried by its text."""
    result = await client.call_tool(name, args or {})
    assert result.is_error, _text(result)
    assert result.structured_content is None
    body = json.loads(_text(result))
    assert set(body) == {"error"}
    assert isinstance(body["error"]["code"], str)
    assert body["error"]["message"]
    return dict(body["error"])


# -- generic: every registered tool ------------------------------------------------------


async def test_every_registered_tool_is_listed_with_typed_schemas(client: Client) -> None:
    """Each tool keeps the seed's name, description, input field names and output schema."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    tools = all_tools()
    assert list(listed) == list(tools)
    for name, tool in tools.items():
        mcp_tool = listed[name]
        fields = [info.alias or f for f, info in tool.input_model.model_fields.items()]
        assert mcp_tool.description == tool.description
        assert mcp_tool.input_schema["type"] == "object"
        assert list(mcp_tool.input_schema.get("properties", {})) == fields
        assert mcp_tool.input_schema.get("additionalProperties") is False
        assert mcp_tool.output_schema is not None
        assert mcp_tool.output_schema["type"] == "object"
        out_fields = [i.alias or f for f, i in tool.output_model.model_fields.items()]
        assert list(mcp_tool.output_schema["properties"]) == out_fields
        assert mcp_tool.annotations is not None
        assert mcp_tool.annotations.read_only_hint is tool.read_only


async def test_tool_titles_are_readable(client: Client) -> None:
    """Clients that show a title get one made from the seed's name."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    titles = {n: t.annotations.title for n, t in listed.items() if t.annotations}
    assert titles["createTask"] == "Create task"
    assert titles["get_theme_status"] == "Get theme status"


def test_session_tools_are_registered() -> None:
    """emit_event and get_session_status are in the registry next to the domains' tools."""
    tools = all_tools()
    assert tools["emit_event"].domain == "session"
    assert tools["get_session_status"].read_only


@pytest.mark.parametrize("name", list(all_tools()))
async def test_unknown_argument_is_a_structured_invalid_input(client: Client, name: str) -> None:
    """Every tool refuses an argument it does not define with a structured error, no crash.

    A domain may check a required argument first (completeTask's resolution); otherwise
    the error is ``invalid_input`` naming the unknown argument.
    """
    error = await err(client, name, {"no_such_argument": 1})
    codes = [error["code"]]
    assert error["code"] != "internal_error"
    if error["code"] == "resolution_required":  # checked first; with it, the same refusal
        error = await err(client, name, {"no_such_argument": 1, "resolution": "done"})
        codes.append(error["code"])
    assert codes[-1] == "invalid_input", codes
    assert "no_such_argument" in error["message"]
    assert {"field": "no_such_argument", "message": "Extra inputs are not permitted"} in error[
        "details"
    ]


async def test_unknown_tool_is_a_structured_error(client: Client) -> None:
    """A name no tool has is a tool error listing the known names."""
    error = await err(client, "createTasks", {})
    assert error["code"] == "unknown_tool"
    assert "createTask" in error["details"]["known"]


async def test_legacy_json_rpc_transport_carries_errors_and_structured_content(
    ctx: ToolContext,
) -> None:
    """Over the JSON-RPC in-memory transport (2025-11-25) results and errors keep their form."""
    async with Client(build_server(ctx), mode="legacy") as c:
        created = await ok(c, "createTask", {"name": "wire"})
        error = await err(c, "getTask", {"id": "missing"})
    assert created["task"]["name"] == "wire"
    assert error["code"] == "task_not_found"


# -- tasks (seed 003) --------------------------------------------------------------------


async def test_task_tools_success_path(client: Client, ctx: ToolContext) -> None:
    """Create, list, get, update, start, complete and delete, all reaching the tasks file."""
    root = await ok(client, "createTask", {"name": "Ship", "description": "the MCP server"})
    root_id = root["task"]["id"]
    sub = await ok(client, "createTask", {"name": "Write tests", "parent_id": root_id})
    sub_id = sub["task"]["id"]
    assert sub["task"]["parent_id"] == root_id
    assert ctx.tasks_file is not None
    on_disk = json.loads(ctx.tasks_file.read_text())
    assert {t["id"] for t in on_disk} == {root_id, sub_id}
    listed = await ok(client, "listTasks", {"parent_id": root_id})
    assert [t["id"] for t in listed["tasks"]] == [sub_id]
    got = await ok(client, "getTask", {"id": sub_id})
    assert got["task"]["name"] == "Write tests"
    updated = await ok(client, "updateTask", {"id": sub_id, "description": "in process"})
    assert updated["task"]["description"] == "in process"
    started = await ok(client, "startTask", {"id": root_id})
    assert started["subtask"]["id"] == sub_id
    done = await ok(client, "completeTask", {"id": sub_id, "resolution": "all green"})
    assert [t["id"] for t in done["auto_completed_parents"]] == [root_id]
    assert done["progress_summary"]["completion_percentage"] == 100
    deleted = await ok(client, "deleteTask", {"id": root_id, "cascade": True})
    assert set(deleted["deleted_ids"]) == {root_id, sub_id}
    assert json.loads(ctx.tasks_file.read_text()) == []


async def test_task_tools_error_paths(client: Client, ctx: ToolContext) -> None:
    """Each task tool's refusal is a structured tool error, and the file is left as it was."""
    parent = (await ok(client, "createTask", {"name": "Parent"}))["task"]["id"]
    child = (await ok(client, "createTask", {"name": "Child", "parent_id": parent}))["task"]["id"]
    assert ctx.tasks_file is not None
    before = ctx.tasks_file.read_bytes()
    assert (await err(client, "createTask", {"description": "no name"}))["code"] == "invalid_input"
    assert (await err(client, "getTask", {"id": "nope"}))["code"] == "task_not_found"
    assert (await err(client, "listTasks", {"parent_id": "nope"}))["code"] == "parent_not_found"
    bad_status = await err(client, "updateTask", {"id": child, "status": "finished"})
    assert bad_status["code"] == "invalid_status"
    assert bad_status["details"]["allowed"] == ["todo", "in_progress", "done"]
    assert (await err(client, "deleteTask", {"id": parent}))["code"] == "has_subtasks"
    assert (await err(client, "startTask", {"id": "nope"}))["code"] == "task_not_found"
    unfinished = await err(client, "completeTask", {"id": parent, "resolution": "too early"})
    assert unfinished["code"] == "subtasks_unfinished"
    assert ctx.tasks_file.read_bytes() == before


async def test_concurrent_calls_are_serialised_by_the_domain_locks(
    client: Client, ctx: ToolContext
) -> None:
    """Twenty concurrent createTask calls (worker threads) all land, with distinct orders."""
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(ok, client, "createTask", {"name": f"t{i}"})
    assert ctx.tasks_file is not None
    tasks = json.loads(ctx.tasks_file.read_text())
    assert sorted(t["name"] for t in tasks) == sorted(f"t{i}" for i in range(20))
    assert sorted(t["order"] for t in tasks) == list(range(1, 21))


# -- themes (seed 001) -------------------------------------------------------------------


def _theme_workspace(ctx: ToolContext) -> Workspace:
    (ctx.workspace / "themebox").mkdir(parents=True)
    (ctx.workspace / "themebox" / "001_mcp.md").write_text("# Serve the tools\n", "utf-8")
    (ctx.workspace / "feedbackbox").mkdir()
    (ctx.workspace / "feedbackbox" / "001_note.md").write_text("use JSON errors\n", "utf-8")
    ws = Workspace(ctx.workspace)
    write_heartbeat(ws, datetime(2025, 8, 1, 12, 0, 0))
    return ws


async def test_theme_tools_lifecycle(client: Client, ctx: ToolContext) -> None:
    """Preview, start, status, feedback and end run the theme lifecycle over MCP."""
    ws = _theme_workspace(ctx)
    preview = await ok(client, "preview_next_theme")
    assert (preview["found"], preview["filename"]) == (True, "001_mcp.md")
    theme = {"themeName": "Serve the tools", "themeDirectoryPart": "serve_tools"}
    start = {**theme, "targetFilename": "001_mcp.md", "reason": "next", "activityContent": ["a"]}
    started = await ok(client, "start_theme", start)
    assert started["themeStartId"] == "20250801120000"
    assert (ctx.workspace / started["historyFile"]).is_file()
    status = await ok(client, "get_theme_status")
    assert [t["themeName"] for t in status["activeThemes"]] == ["Serve the tools"]
    assert status["cooldown"] is True
    item = await ok(client, "check_and_process_item", {"type": "feedbackbox"})
    assert (item["found"], item["content"]) == (True, "use JSON errors\n")
    write_heartbeat(ws, datetime(2025, 8, 1, 12, 5, 0))
    end = {**theme, "themeStartId": started["themeStartId"], "reason": "done"}
    ended = await ok(client, "end_theme", {**end, "achievements": ["served"]})
    assert ended["themeEndId"] == "20250801120500"
    assert (await ok(client, "get_theme_status"))["activeThemes"] == []


async def test_theme_tools_error_paths(client: Client, ctx: ToolContext) -> None:
    """Missing targets, the cooldown and unpaired parent ids are structured tool errors."""
    _theme_workspace(ctx)
    start = {"themeName": "X", "themeDirectoryPart": "x", "reason": "r"}
    missing = await err(client, "start_theme", {**start, "targetFilename": "404.md"})
    assert missing["code"] == "theme_file_not_found"
    assert "404.md" in missing["message"]
    await ok(client, "start_theme", {**start, "targetFilename": "001_mcp.md"})
    end = {"themeStartId": "20250801120000", "themeDirectoryPart": "x", "themeName": "X"}
    cooldown = await err(client, "end_theme", {**end, "reason": "too soon"})
    assert cooldown["code"] == "cooldown"
    unpaired = await err(client, "start_theme", {**start, "parentThemeStartId": "20250801120000"})
    assert unpaired["code"] == "invalid_input"
    wrong_box = await err(client, "check_and_process_item", {"type": "themebox"})
    assert wrong_box["code"] == "unsupported_type"


# -- experience (seeds 000 and 002) ------------------------------------------------------


async def test_experience_tools_export_then_import(client: Client, ctx: ToolContext) -> None:
    """Guides, init, a batch, thoughts, finalize, status, list and validate, over MCP."""
    guide = await ok(client, "get_ai_experience_export_guide", {"lang": "ja"})
    assert guide["guide_content"]
    assert (await ok(client, "get_ai_experience_import_guide"))["guide_content"]
    assert (await ok(client, "get_export_status", {"session_id": "s1"}))["status"] == "not_found"
    init_args = {"session_id": "s1", "metadata": {"platform": "tests"}, "summary": SUMMARY}
    init = await ok(client, "export_experience_init", init_args)
    batch = [{"user_input": "q", "ai_response": "a", "reasoning": "because"}]
    batch_args = {"session_id": "s1", "batch_number": 1, "conversations_batch": batch}
    written = await ok(client, "export_experience_conversations", batch_args)
    assert written["next_batch_number"] == 2
    thoughts = {"session_id": "s1", "thoughts": {"insights": ["typed schemas help"]}}
    await ok(client, "export_experience_thoughts", thoughts)
    final = await ok(client, "export_experience_finalize", {"session_id": "s1"})
    assert final["total_conversations"] == 1
    assert (await ok(client, "get_export_status", {"session_id": "s1"}))["status"] == "completed"
    listed = await ok(client, "list_experiences")
    assert len(listed["experience_directories"]) == 1
    report = await ok(client, "validate_experience", {"directory_path": init["directory_path"]})
    assert report["valid"] is True, report["errors"]


async def test_experience_tools_error_paths(client: Client, ctx: ToolContext) -> None:
    """Out-of-order calls, bad ids, paths outside the roots and bad languages are refused."""
    early = await err(client, "export_experience_finalize", {"session_id": "s2"})
    assert early["code"] == "session_not_found"
    bad_id = await err(client, "get_export_status", {"session_id": "../up"})
    assert bad_id["code"] == "invalid_session_id"
    outside = await err(client, "validate_experience", {"directory_path": "/etc"})
    assert outside["code"] == "path_outside_roots"
    assert (await err(client, "get_ai_experience_export_guide", {"lang": "fr"}))[
        "code"
    ] == "invalid_input"
    bad_batch = await err(
        client,
        "export_experience_conversations",
        {
            "session_id": "s2",
            "batch_number": 0,
            "conversations_batch": [],
        },
    )
    assert bad_batch["code"] == "invalid_input"
    assert not (ctx.experiences_base / "experience_s2").exists()
    bad_filter = await err(client, "list_experiences", {"filter": "ai_name=x"})
    assert bad_filter["code"] == "invalid_input"
    assert bad_filter["details"] == [{"field": "filter", "message": "Input should be an object"}]
    assert "Filters" not in bad_filter["message"]  # no class name of ours


# -- session: emit_event, get_session_status ---------------------------------------------


async def test_emit_event_appends_to_the_iteration_events_file(
    client: Client, ctx: ToolContext
) -> None:
    """Text and JSON payloads, with and without a target, land in order in the events file."""
    first = await ok(client, "emit_event", {"topic": "plan.ready", "payload": "1. do it"})
    assert "published when this iteration ends" in first["message"]
    await ok(
        client,
        "emit_event",
        {"topic": "review.done", "payload": {"ok": True, "n": 2}, "target": "builder"},
    )
    assert ctx.events_file is not None
    lines = [json.loads(line) for line in ctx.events_file.read_text().splitlines()]
    assert [(r["topic"], r["payload"], r.get("target")) for r in lines] == [
        ("plan.ready", "1. do it", None),
        ("review.done", {"ok": True, "n": 2}, "builder"),
    ]


async def test_emit_event_errors(client: Client, ctx: ToolContext, tmp_path: Path) -> None:
    """A bad topic, an empty target and no running iteration are structured tool errors."""
    bad = await err(client, "emit_event", {"topic": "plan..ready"})
    assert bad["code"] == "invalid_topic"
    assert (await err(client, "emit_event", {"topic": "a", "target": ""}))[
        "code"
    ] == "invalid_input"
    assert ctx.events_file is not None
    assert not ctx.events_file.exists()
    outside = ToolContext(root=tmp_path, tasks_file=Path("tasks.json"))
    async with Client(build_server(outside), raise_exceptions=True) as c:
        assert (await err(c, "emit_event", {"topic": "plan.ready"}))["code"] == "no_session"


LOOP_TOML = """
[loop]
prompt = "say done"
max_iterations = 3
[hats.solo]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = { type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">done</event>'] }
"""


async def _run_session(root: Path, session_id: str) -> Path:
    (root / "loop.toml").write_text(LOOP_TOML, "utf-8")
    summary = await run_loop(
        load_config(root / "loop.toml", root=root),
        RunOptions(workdir=root, session_id=session_id, progress=False, handle_signals=False),
    )
    assert summary.reason == "completed"
    return Path(summary.session_dir)


async def test_get_session_status_for_running_explicit_and_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The iteration's session by default, any session by id, else the most recent one."""
    monkeypatch.delenv("LOOP_SESSION_ID", raising=False)
    first = await _run_session(tmp_path, "s-one")
    await _run_session(tmp_path, "s-two")
    inside = ToolContext(root=tmp_path, session_dir=first)
    async with Client(build_server(inside), raise_exceptions=True) as c:
        own = await ok(c, "get_session_status")
        other = await ok(c, "get_session_status", {"session_id": "s-two"})
        missing = await ok(c, "get_session_status", {"session_id": "s-three"})
        bad = await err(c, "get_session_status", {"session_id": "../s-one"})
    assert (own["session_id"], own["status"], own["iterations"]) == ("s-one", "completed", 1)
    assert own["termination"] == "completed"
    assert (other["session_id"], other["status"]) == ("s-two", "completed")
    assert missing["status"] == "not_found"
    assert bad["code"] == "invalid_path"
    twin = first.parent / "s-onex"  # a copy: two sessions share the prefix s-on
    twin.mkdir()
    (twin / "journal.jsonl").write_bytes((first / "journal.jsonl").read_bytes())
    async with Client(build_server(inside), raise_exceptions=True) as c:
        prefixed = await ok(c, "get_session_status", {"session_id": "s-tw"})
        ambiguous = await err(c, "get_session_status", {"session_id": "s-on"})
        short = await ok(c, "get_session_status", {"session_id": "s-t"})
    assert (prefixed["session_id"], prefixed["status"]) == ("s-two", "completed")
    assert ambiguous["code"] == "ambiguous_id" and "s-one, s-onex" in ambiguous["message"]
    assert short["status"] == "not_found"  # shorter than 4 characters: never a prefix
    async with Client(build_server(ToolContext(root=tmp_path))) as c:
        assert (await ok(c, "get_session_status"))["session_id"] == "s-two"
        monkeypatch.setenv("LOOP_SESSION_ID", "s-one")  # the engine sets it for its agents
        assert (await ok(c, "get_session_status"))["session_id"] == "s-one"
        monkeypatch.delenv("LOOP_SESSION_ID")
    async with Client(build_server(ToolContext(root=tmp_path / "empty"))) as c:
        none = await ok(c, "get_session_status")
    assert (none["session_id"], none["status"]) == (None, "not_found")


# -- adapter behaviour ---------------------------------------------------------------------


class _In(BaseModel):
    items: list[str] = []
    note: str | None = None


class _Out(BaseModel):
    items: list[str]
    note: str | None


def _echo(ctx: ToolContext, inp: Any) -> _Out:
    return _Out(items=inp.items, note=inp.note)


def _crash(ctx: ToolContext, inp: Any) -> _Out:
    raise RuntimeError("secret detail")


def _session_down(ctx: ToolContext, inp: Any) -> _Out:
    raise SessionError("session s1 is already running")


def _tool(name: str, func: Any) -> Tool:
    return Tool(
        name=name,
        domain="test",
        description=f"{name} for tests",
        input_model=_In,
        output_model=_Out,
        func=func,
    )


def test_pre_parse_decodes_json_text_only_for_fields_that_take_no_text() -> None:
    """A JSON array sent as text is decoded for a list field; a text field keeps its JSON."""
    args = pre_parse(_In, {"items": '["a", "b"]', "note": '["kept"]', "other": "[1]"})
    assert args == {"items": ["a", "b"], "note": '["kept"]', "other": "[1]"}
    assert pre_parse(_In, {"items": "[not json"}) == {"items": "[not json"}


async def test_json_text_arguments_are_accepted(ctx: ToolContext) -> None:
    """A client that sends a list as JSON text still gets the call through."""
    tools = {"echo": _tool("echo", _echo)}
    async with Client(build_server(ctx, tools), raise_exceptions=True) as c:
        out = await ok(c, "echo", {"items": '["x"]', "note": "{}"})
    assert out == {"items": ["x"], "note": "{}"}


async def test_crash_is_internal_error_without_its_text(
    ctx: ToolContext, logs: list[MutableMapping[str, Any]]
) -> None:
    """A bug in a tool is reported as internal_error; its message stays in the server log."""
    tools = {"crash": _tool("crash", _crash), "down": _tool("down", _session_down)}
    async with Client(build_server(ctx, tools), raise_exceptions=True) as c:
        crash = await err(c, "crash")
        down = await err(c, "down")
    assert crash["code"] == "internal_error"
    assert "secret" not in json.dumps(crash)
    crashed = [e for e in logs if e["event"] == "mcp.tool_crashed"]
    assert [(e["tool"], e["log_level"]) for e in crashed] == [("crash", "error")]
    assert crashed[0]["exc_info"] is True
    assert down == {"code": "session_error", "message": "session s1 is already running"}


async def test_sdk_tools_are_served_next_to_registry_tools(ctx: ToolContext) -> None:
    """A tool added with the SDK's decorator is listed and called as usual."""
    server = build_server(ctx, {"echo": _tool("echo", _echo)})

    @server.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    async with Client(server, raise_exceptions=True) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        result = await c.call_tool("ping", {})
    assert names == ["echo", "ping"]
    assert result.structured_content == {"result": "pong"}
