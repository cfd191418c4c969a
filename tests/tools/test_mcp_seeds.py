"""The seeds' tools over MCP (``mcp.Client``), true to the seeds and the originals.

One test per rule where hatloop and the original projects were compared call for call:
the one in-progress leaf, the next task, absent optional fields, strict input, file I/O
errors, the execution-order refusal, idempotent starts, ``target_filename``, the
feedbackbox, the experience paths, inclusive date filters, the export status, batch
overwrites and the total-count warning.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import AsyncIterator, Iterator, MutableMapping
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent
from structlog.testing import capture_logs

from loop.tasks.models import MAX_ORDER
from loop.themes import Workspace, write_heartbeat
from loop.tools.base import ToolContext
from loop.tools.mcp_server import build_server
from loop.tools.registry import all_tools

SUMMARY: dict[str, Any] = {
    "ai_name": "Claude(careful loop builder)",
    "ai_context": "Builds an agent loop runner",
    "experience_summary": "Compared every tool with the originals.",
    "experience_flow": ["compare", "fix", "test"],
    "main_topics": ["seeds (spec)", "originals (behaviour)"],
}
BATCH = [{"user_input": "q", "ai_response": "a", "reasoning": "because"}]


@pytest.fixture(autouse=True)
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """Keep the server's structlog events off the shared stderr."""
    with capture_logs() as captured:
        yield captured


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """Every file under tmp_path: tasks.json, the works/ workspace, exp/ experiences."""
    return ToolContext(
        root=tmp_path,
        tasks_file=Path("tasks.json"),
        workspace=Path("works"),
        experiences_base=Path("exp"),
    )


@pytest.fixture
async def client(ctx: ToolContext) -> AsyncIterator[Client]:
    """An in-process MCP client connected to a server over ``ctx``."""
    async with Client(build_server(ctx), raise_exceptions=True) as c:
        yield c


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def ok(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(name, args or {})
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def err(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must fail; its structured error."""
    result = await client.call_tool(name, args or {})
    assert result.is_error, _text(result)
    error = json.loads(_text(result))["error"]
    assert isinstance(error, dict)
    return error


async def task(client: Client, name: str, **args: Any) -> str:
    """Create a task; its id."""
    created = await ok(client, "createTask", {"name": name, **args})
    return str(created["task"]["id"])


async def statuses(client: Client) -> dict[str, str]:
    """Every task's status by name."""
    return {t["name"]: t["status"] for t in (await ok(client, "listTasks"))["tasks"]}


# -- tasks -------------------------------------------------------------------------------


async def test_only_one_leaf_task_is_in_progress(client: Client) -> None:
    """Starting RX while RA is in progress resets RA to todo and says so (item 1)."""
    r = await task(client, "R")
    ra = await task(client, "RA", parent_id=r)
    await task(client, "RB", parent_id=r)
    assert (await ok(client, "startTask", {"id": r}))["subtask"]["id"] == ra
    rx = await task(client, "RX", parent_id=r, order=1)
    started = await ok(client, "startTask", {"id": rx})
    assert await statuses(client) == {
        "R": "in_progress",
        "RX": "in_progress",
        "RA": "todo",
        "RB": "todo",
    }
    assert [t["id"] for t in started["reset_tasks"]] == [ra]
    assert "reset to todo: 'RA'" in started["message"]


async def test_next_task_is_one_that_start_task_accepts(client: Client) -> None:
    """After RX, the next task is RA (the first unfinished leaf), which starts (item 2)."""
    r = await task(client, "R")
    ra = await task(client, "RA", parent_id=r)
    await task(client, "RB", parent_id=r)
    await ok(client, "startTask", {"id": r})
    rx = await task(client, "RX", parent_id=r, order=1)
    await ok(client, "startTask", {"id": rx})
    done = await ok(client, "completeTask", {"id": rx, "resolution": "done"})
    assert done["next_task_id"] == ra
    assert (await ok(client, "startTask", {"id": done["next_task_id"]}))["task"]["id"] == ra


async def test_next_task_of_a_parent_never_started_is_its_next_child(client: Client) -> None:
    """Child 1 -> child 2 under a parent that was never started: never the parent (item 2)."""
    p = await task(client, "P")
    c1 = await task(client, "C1", parent_id=p)
    c2 = await task(client, "C2", parent_id=p)
    first = await ok(client, "completeTask", {"id": c1, "resolution": "one"})
    assert first["next_task_id"] == c2
    await ok(client, "startTask", {"id": c2})
    last = await ok(client, "completeTask", {"id": c2, "resolution": "two"})
    assert [t["id"] for t in last["auto_completed_parents"]] == [p]
    assert "next_task_id" not in last


async def test_next_task_runs_through_root_tasks_in_order(client: Client) -> None:
    """Task 1 -> task 2 -> task 3, each started from the previous next_task_id (item 2)."""
    ids = [await task(client, f"T{n}") for n in (1, 2, 3)]
    current = ids[0]
    seen = []
    for _ in ids:
        await ok(client, "startTask", {"id": current})
        done = await ok(client, "completeTask", {"id": current, "resolution": "ok"})
        seen.append(done.get("next_task_id"))
        current = done.get("next_task_id", "")
    assert seen == [ids[1], ids[2], None]


async def test_unset_optional_fields_are_absent_not_null(client: Client, ctx: ToolContext) -> None:
    """A root task has no parent_id key and an open task no resolution key (item 3)."""
    created = await ok(client, "createTask", {"name": "Solo"})
    assert "parent_id" not in created["task"]
    assert "resolution" not in created["task"]
    started = await ok(client, "startTask", {"id": created["task"]["id"]})
    assert "subtask" not in started
    done = await ok(client, "completeTask", {"id": created["task"]["id"], "resolution": "ok"})
    assert "next_task_id" not in done
    assert done["task"]["resolution"] == "ok"
    listed = await ok(client, "listTasks")
    assert all(None not in t.values() for t in listed["tasks"])
    assert ctx.tasks_file is not None
    assert "null" not in ctx.tasks_file.read_text()


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("updateTask", {"order": "5"}, "order"),
        ("updateTask", {"order": 5.0}, "order"),
        ("updateTask", {"order": True}, "order"),
        ("createTask", {"name": "x", "order": "5"}, "order"),
        ("createTask", {"name": 5}, "name"),
        ("deleteTask", {"cascade": "true"}, "cascade"),
        ("deleteTask", {"cascade": 1}, "cascade"),
        ("listTasks", {"parent_id": 7}, "parent_id"),
    ],
)
async def test_wrong_types_are_validation_errors(
    client: Client, ctx: ToolContext, tool: str, args: dict[str, Any], field: str
) -> None:
    """Strict input: nothing is coerced, and the error names the field (item 4)."""
    tid = await task(client, "t")
    assert ctx.tasks_file is not None
    before = ctx.tasks_file.read_bytes()
    error = await err(client, tool, {"id": tid, **args} if tool != "createTask" else args)
    assert error["code"] == "invalid_input", error
    assert field in [d["field"] for d in error["details"]]
    assert ctx.tasks_file.read_bytes() == before


@pytest.mark.parametrize("order", [2**70, MAX_ORDER + 1, -1])
async def test_order_out_of_range_is_a_validation_error(client: Client, order: int) -> None:
    """createTask and updateTask refuse an order outside 0..MAX_ORDER (item 4)."""
    error = await err(client, "createTask", {"name": "x", "order": order})
    assert error["code"] == "invalid_input"
    assert error["details"][0]["field"] == "order"
    tid = await task(client, "y")
    assert (await err(client, "updateTask", {"id": tid, "order": order}))["code"] == (
        "invalid_input"
    )
    assert (await ok(client, "createTask", {"name": "z", "order": MAX_ORDER}))["task"][
        "order"
    ] == MAX_ORDER


def _mistyped_arguments() -> list[tuple[str, str, Any]]:
    """(tool, argument, a value of the wrong type) for every plain str/int/bool argument."""
    wrong: dict[Any, Any] = {str: 1, int: "1", bool: "true"}
    cases = []
    for tool in all_tools().values():
        for name, info in tool.input_model.model_fields.items():
            annotation = info.annotation
            if typing.get_origin(annotation) in (typing.Union, types.UnionType):
                kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
                annotation = kinds[0] if len(kinds) == 1 else None
            if annotation in wrong:
                cases.append((tool.name, info.alias or name, wrong[annotation]))
    return cases


@pytest.mark.parametrize(("tool", "argument", "value"), _mistyped_arguments())
async def test_every_tool_refuses_a_mistyped_argument(
    client: Client, tool: str, argument: str, value: Any
) -> None:
    """No tool coerces: a number for a string, text for a number or a boolean (item 4)."""
    args = {argument: value}
    if tool == "completeTask" and argument != "resolution":
        args["resolution"] = "done"  # checked first, with its own code
    error = await err(client, tool, args)
    assert error["code"] == "invalid_input", error
    assert argument in [d["field"] for d in error["details"]], error


async def test_wrong_types_are_refused_by_theme_and_experience_tools(client: Client) -> None:
    """Strict input holds for every domain, not just tasks (item 4)."""
    theme = await err(
        client, "start_theme", {"themeName": 5, "themeDirectoryPart": "x", "reason": "r"}
    )
    assert theme["code"] == "invalid_input"
    batch = {"session_id": "s", "batch_number": "1", "conversations_batch": BATCH}
    assert (await err(client, "export_experience_conversations", batch))["code"] == (
        "invalid_input"
    )
    counts = {"filters": {"min_conversations": "2"}}
    assert (await err(client, "list_experiences", counts))["code"] == "invalid_input"


async def test_a_write_that_fails_is_a_file_error_naming_the_file(
    client: Client, ctx: ToolContext, logs: list[MutableMapping[str, Any]]
) -> None:
    """A lock file that cannot be opened is store_error with the file and cause (item 5)."""
    assert ctx.tasks_file is not None
    lock = ctx.tasks_file.with_name("tasks.json.lock")
    lock.mkdir()  # a folder where the lock file belongs (a link there is refused as a link)
    error = await err(client, "createTask", {"name": "x"})
    assert error["code"] == "store_error", error
    assert str(ctx.tasks_file) in error["message"]
    assert "tasks.json.lock" in error["message"]
    cause = error["message"].rsplit(": ", 1)[-1]
    assert cause and "see the server log" not in error["message"]
    assert not any(e["event"] == "mcp.tool_crashed" for e in logs)
    assert not ctx.tasks_file.exists()


async def test_execution_order_refusal_lists_blockers_with_descriptions(client: Client) -> None:
    """Each blocking task is shown with its description (item 6)."""
    r = await task(client, "R")
    await task(client, "Parse", parent_id=r, description="read the TOML config")
    await task(client, "Check", parent_id=r)
    last = await task(client, "Run", parent_id=r)
    error = await err(client, "startTask", {"id": last})
    assert error["code"] == "blocked_by_earlier_sibling"
    assert "'Parse' (order 1, todo, under 'R'" in error["message"]
    assert "'read the TOML config'" in error["message"]
    assert "'Check' (order 2, todo, under 'R'" in error["message"]
    assert "no description" in error["message"]
    blocking = error["details"]["blocking_tasks"]
    assert [(b["name"], b["description"]) for b in blocking] == [
        ("Parse", "read the TOML config"),
        ("Check", ""),
    ]


async def test_starting_a_task_in_progress_again_says_nothing_changed(
    client: Client, ctx: ToolContext
) -> None:
    """A repeated startTask is accepted, changes nothing and says so plainly (item 7)."""
    r = await task(client, "R")
    a = await task(client, "A", parent_id=r)
    await ok(client, "startTask", {"id": r})
    assert ctx.tasks_file is not None
    before = ctx.tasks_file.read_bytes()
    again = await ok(client, "startTask", {"id": r})
    assert again["message"].startswith("'R' is already in progress; nothing changed.")
    assert "0 nested" not in again["message"]
    assert "'A'" in again["message"]
    assert again["subtask"]["id"] == a
    assert (again["started_tasks"], again["reset_tasks"]) == ([], [])
    assert ctx.tasks_file.read_bytes() == before
    leaf = await ok(client, "startTask", {"id": a})
    assert leaf["message"].startswith("'A' is already in progress; nothing changed.")


# -- themes ------------------------------------------------------------------------------


def _themebox(ctx: ToolContext, *names: str) -> Workspace:
    (ctx.workspace / "themebox").mkdir(parents=True)
    for name in names:
        (ctx.workspace / "themebox" / name).write_text(f"# {name}\n", "utf-8")
    ws = Workspace(ctx.workspace)
    write_heartbeat(ws, datetime(2025, 8, 1, 12, 0, 0))
    return ws


async def test_start_theme_takes_target_filename_and_the_camel_case_alias(
    client: Client, ctx: ToolContext
) -> None:
    """The seed's target_filename works, and so does the original's later targetFilename."""
    ws = _themebox(ctx, "001_a.md", "002_b.md")
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert "target_filename" in listed["start_theme"].input_schema["properties"]
    theme = {"themeName": "A", "themeDirectoryPart": "a", "reason": "next"}
    both = {**theme, "target_filename": "001_a.md", "targetFilename": "001_a.md"}
    assert (await err(client, "start_theme", both))["code"] == "invalid_input"
    started = await ok(client, "start_theme", {**theme, "target_filename": "001_a.md"})
    assert started["processedFile"] == "themebox/processed.001_a.md"
    end = {"themeStartId": started["themeStartId"], "themeDirectoryPart": "a", "themeName": "A"}
    write_heartbeat(ws, datetime(2025, 8, 1, 12, 1, 0))
    await ok(client, "end_theme", {**end, "reason": "done"})
    write_heartbeat(ws, datetime(2025, 8, 1, 12, 2, 0))
    theme_b = {"themeName": "B", "themeDirectoryPart": "b", "reason": "next"}
    alias = await ok(client, "start_theme", {**theme_b, "targetFilename": "002_b.md"})
    assert alias["processedFile"] == "themebox/processed.002_b.md"


async def test_check_and_process_item_creates_a_missing_feedbackbox(
    client: Client, ctx: ToolContext
) -> None:
    """No feedbackbox folder: it is created, and there is nothing to process (item 9)."""
    assert not (ctx.workspace / "feedbackbox").exists()
    out = await ok(client, "check_and_process_item", {"type": "feedbackbox"})
    assert out["found"] is False
    assert "created" in out["message"]
    assert (ctx.workspace / "feedbackbox").is_dir()
    again = await ok(client, "check_and_process_item", {"type": "feedbackbox"})
    assert (again["found"], again["message"]) == (False, "no feedback to process")


# -- experience --------------------------------------------------------------------------


async def _export(client: Client, session_id: str) -> str:
    init = {"session_id": session_id, "metadata": {}, "summary": SUMMARY}
    directory = str((await ok(client, "export_experience_init", init))["directory_path"])
    batch = {"session_id": session_id, "batch_number": 1, "conversations_batch": BATCH}
    await ok(client, "export_experience_conversations", batch)
    await ok(client, "export_experience_finalize", {"session_id": session_id})
    return directory


def _set_manifest(directory: str, **fields: Any) -> None:
    path = Path(directory) / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}), "utf-8")


async def test_listed_directory_is_the_path_validate_accepts(client: Client) -> None:
    """list, then validate: directory_summaries[].directory validates as is (item 10)."""
    directory = await _export(client, "alpha")
    listed = await ok(client, "list_experiences")
    [summary] = listed["directory_summaries"]
    assert summary["directory"] == directory
    report = await ok(client, "validate_experience", {"directory_path": summary["directory"]})
    assert report["valid"] is True, report["errors"]


async def test_date_filters_include_their_boundary(client: Client) -> None:
    """An experience created exactly at the filter date is on or after and on or before it."""
    directory = await _export(client, "alpha")
    _set_manifest(directory, created_at="2025-08-01T12:00:00Z")
    for filters in (
        {"created_after": "2025-08-01T12:00:00Z"},
        {"created_before": "2025-08-01T12:00:00Z"},
        {"created_after": "2025-08-01T12:00:00Z", "created_before": "2025-08-01T12:00:00Z"},
        {"created_before": "2025-08-01"},
    ):
        listed = await ok(client, "list_experiences", {"filters": filters})
        assert len(listed["experience_directories"]) == 1, filters
    late = {"filters": {"created_after": "2025-08-01T12:00:01Z"}}
    assert (await ok(client, "list_experiences", late))["experience_directories"] == []


async def test_export_status_follows_the_files(client: Client, ctx: ToolContext) -> None:
    """In progress right after init (summary.json is a file); -1 once completed (item 12)."""
    empty = ctx.experiences_base / "experience_empty"
    empty.mkdir(parents=True)
    status = await ok(client, "get_export_status", {"session_id": "empty"})
    assert (status["status"], status["next_batch_number"]) == ("initializing", 1)
    init = {"session_id": "s1", "metadata": {}, "summary": SUMMARY}
    await ok(client, "export_experience_init", init)
    status = await ok(client, "get_export_status", {"session_id": "s1"})
    assert (status["status"], status["created_files"]) == ("in_progress", ["summary.json"])
    assert status["next_batch_number"] == 1
    batch = {"session_id": "s1", "batch_number": 1, "conversations_batch": BATCH}
    await ok(client, "export_experience_conversations", batch)
    await ok(client, "export_experience_finalize", {"session_id": "s1"})
    status = await ok(client, "get_export_status", {"session_id": "s1"})
    assert (status["status"], status["next_batch_number"]) == ("completed", -1)


async def test_resending_a_batch_with_other_content_overwrites_it(client: Client) -> None:
    """Different content replaces the batch and says so; the same content is a no-op."""
    init = {"session_id": "s1", "metadata": {}, "summary": SUMMARY}
    await ok(client, "export_experience_init", init)
    batch = {"session_id": "s1", "batch_number": 1, "conversations_batch": BATCH}
    first = await ok(client, "export_experience_conversations", batch)
    assert (first["overwritten"], first["already_existed"]) == (False, False)
    same = await ok(client, "export_experience_conversations", batch)
    assert (same["overwritten"], same["already_existed"]) == (False, True)
    other = [{"user_input": "q2", "ai_response": "a2", "reasoning": "r2"}] * 2
    new = await ok(
        client, "export_experience_conversations", {**batch, "conversations_batch": other}
    )
    assert (new["overwritten"], new["already_existed"]) == (True, False)
    assert (new["processed_count"], new["next_batch_number"]) == (2, 2)
    written = json.loads(await anyio.Path(first["file_path"]).read_text())
    assert [c["user_input"] for c in written["conversations"]] == ["q2", "q2"]
    assert written["batch_info"]["count"] == 2


async def test_total_conversations_mismatch_is_a_warning(client: Client) -> None:
    """A manifest total that differs from the batches warns; the directory stays valid."""
    directory = await _export(client, "alpha")
    _set_manifest(directory, total_conversations=5)
    report = await ok(client, "validate_experience", {"directory_path": directory})
    assert (report["valid"], report["cross_file_valid"], report["errors"]) == (True, True, [])
    assert (
        "manifest.json: total_conversations says 5 but the batches hold 1" in (report["warnings"])
    )
