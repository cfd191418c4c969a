"""``python -m loop mcp`` as a real stdio subprocess: flags, environment, list and call."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from loop.session.store import SessionState
from loop.tools.registry import all_tools


def _server(tmp_path: Path, *args: str, **env: str) -> StdioServerParameters:
    base = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "FILE_PATH",
            "LOOP_WORKSPACE",
            "LOOP_EXPERIENCES_DIR",
            "LOOP_EVENTS_FILE",
            "LOOP_SESSION_DIR",
            "LOOP_SESSION_ID",
        )
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "loop", "mcp", *args], env={**base, **env}, cwd=tmp_path
    )


async def test_stdio_server_lists_and_calls_tools(tmp_path: Path) -> None:
    """Over stdio every tool is listed; calls reach the flagged files and the events file."""
    events = tmp_path / "it" / "events.jsonl"
    events.parent.mkdir()
    server = _server(
        tmp_path,
        "--tasks-file",
        "flag-tasks.json",
        "--workspace",
        "ws",
        FILE_PATH=str(tmp_path / "env-tasks.json"),
        LOOP_EVENTS_FILE=str(events),
    )
    async with Client(server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        created = await client.call_tool("createTask", {"name": "over stdio"})
        listed = await client.call_tool("listTasks", {})
        missing = await client.call_tool("getTask", {"id": "nope"})
        emitted = await client.call_tool("emit_event", {"topic": "work.done", "payload": [1]})
        status = await client.call_tool("get_theme_status", {})
    assert names == list(all_tools())
    assert not created.is_error
    assert created.structured_content is not None
    task_id = created.structured_content["task"]["id"]
    assert [t["id"] for t in json.loads((tmp_path / "flag-tasks.json").read_text())] == [task_id]
    assert not (tmp_path / "env-tasks.json").exists()
    assert listed.structured_content is not None
    assert [t["name"] for t in listed.structured_content["tasks"]] == ["over stdio"]
    assert missing.is_error
    block = missing.content[0]
    assert isinstance(block, TextContent)
    assert json.loads(block.text)["error"]["code"] == "task_not_found"
    assert not emitted.is_error
    assert [json.loads(line)["payload"] for line in events.read_text().splitlines()] == [[1]]
    assert not status.is_error
    assert status.structured_content is not None
    assert status.structured_content["activeThemes"] == []


async def test_stdio_server_takes_settings_from_the_environment(tmp_path: Path) -> None:
    """Without flags FILE_PATH names the tasks file, as the seed says."""
    server = _server(tmp_path, FILE_PATH=str(tmp_path / "env-tasks.json"))
    async with Client(server) as client:
        result = await client.call_tool("createTask", {"name": "from env"})
        no_session = await client.call_tool("emit_event", {"topic": "x"})
    assert not result.is_error
    saved = json.loads((tmp_path / "env-tasks.json").read_text())
    assert [t["name"] for t in saved] == ["from env"]
    assert no_session.is_error


async def _reply(stdout: BufferedByteReceiveStream, request_id: int, lines: list[str]) -> Any:
    """Read stdout lines until the reply to ``request_id``; keep every line read."""
    while True:
        line = (await stdout.receive_until(b"\n", 1 << 20)).decode()
        lines.append(line)
        message = json.loads(line)
        if message.get("id") == request_id:
            return message


async def test_stdout_carries_only_json_rpc_and_logs_go_to_stderr(tmp_path: Path) -> None:
    """Raw JSON-RPC in and out: every stdout line is a JSON-RPC message; logs are on stderr."""
    server = _server(tmp_path, "--tasks-file", "tasks.json", "--log-format", "json")
    requests: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "getTask", "arguments": {"id": "nope"}},
        },
    ]
    lines: list[str] = []
    async with await anyio.open_process(
        [server.command, *server.args], cwd=tmp_path, env=server.env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdout = BufferedByteReceiveStream(proc.stdout)
        for request in requests:
            await proc.stdin.send((json.dumps(request) + "\n").encode())
            if "id" in request:
                reply = await _reply(stdout, request["id"], lines)
        await proc.stdin.aclose()  # only after the last reply: EOF ends the server
        tail = b"".join([chunk async for chunk in stdout]).decode()
        lines += tail.splitlines()
        errors = b"".join([chunk async for chunk in proc.stderr]).decode()
    assert proc.returncode == 0
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert reply["result"]["isError"] is True
    error = json.loads(reply["result"]["content"][0]["text"])
    assert error["error"]["code"] == "task_not_found"
    assert '"mcp.tool_error"' in errors


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_signal_stops_the_server_while_stdin_is_open(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """Ctrl-C (or SIGTERM) ends a server whose client keeps stdin open: exit 130."""
    server = _server(tmp_path, "--log-format", "json")
    async with await anyio.open_process(
        [server.command, *server.args], cwd=tmp_path, env=server.env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdout = BufferedByteReceiveStream(proc.stdout)
        await proc.stdin.send((json.dumps(INITIALIZE) + "\n").encode())
        reply = await _reply(stdout, 1, [])  # serving: the signal comes mid-session
        proc.send_signal(signum)
        with anyio.fail_after(60):  # stdin stays open: only the signal can end it
            code = await proc.wait()
        errors = b"".join([chunk async for chunk in proc.stderr]).decode()
    assert reply["result"]["serverInfo"]["name"] == "hatloop"
    assert code == 130
    assert '"mcp.stopping"' in errors and "Traceback" not in errors


@pytest.mark.parametrize("source", ["/dev/null", "file"])
def test_stdin_that_cannot_block_ends_the_server_at_once(tmp_path: Path, source: str) -> None:
    """Stdin from /dev/null or an empty file: the server sees EOF and exits 0, no trace."""
    server = _server(tmp_path)
    path = Path(os.devnull) if source == "/dev/null" else tmp_path / "empty.jsonl"
    if source == "file":
        path.write_text("")
    with path.open("rb") as stdin:
        proc = subprocess.run(
            [server.command, *server.args],
            stdin=stdin,
            capture_output=True,
            cwd=tmp_path,
            env=server.env,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr
    assert proc.stdout == b""


async def _pipelined(
    server: StdioServerParameters, cwd: Path, calls: list[dict[str, Any]]
) -> dict[int, dict[str, Any]]:
    """Send the handshake and ``calls`` at once, before any reply (one line each, as
    ``json.dumps`` writes it); the reply to each call, by its id."""
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *calls]
    ids = {c["id"] for c in calls}
    async with await anyio.open_process(
        [server.command, *server.args], cwd=cwd, env=server.env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        stdout = BufferedByteReceiveStream(proc.stdout)
        await proc.stdin.send("".join(json.dumps(m) + "\n" for m in lines).encode())
        replies = {}
        with anyio.fail_after(60):
            while len(replies) < len(ids):
                message = json.loads(await stdout.receive_until(b"\n", 1 << 20))
                if message.get("id") in ids:
                    replies[message["id"]] = message
        await proc.stdin.aclose()
    return replies


async def test_calls_a_client_pipelines_are_made_in_the_order_they_were_sent(
    tmp_path: Path,
) -> None:
    """Twenty createTask sent at once, before any reply: the orders follow the sending.

    Seed 003 gives a task without ``order`` its siblings' largest order + 1, and the tasks
    guide has agents create subtasks in the order they should run; run concurrently, the
    calls took the tasks file's lock in any order (fast1, fast16, fast15, ...).
    """
    server = _server(tmp_path, "--tasks-file", "tasks.json")
    calls = [
        {
            "jsonrpc": "2.0",
            "id": 100 + i,
            "method": "tools/call",
            "params": {"name": "createTask", "arguments": {"name": f"fast{i}"}},
        }
        for i in range(1, 21)
    ]
    replies = await _pipelined(server, tmp_path, calls)
    assert not any(r["result"]["isError"] for r in replies.values())
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    by_order = sorted(tasks, key=lambda t: t["order"])
    assert [t["name"] for t in by_order] == [f"fast{i}" for i in range(1, 21)]


async def test_relative_paths_resolve_against_the_project_folder_not_the_servers(
    tmp_path: Path,
) -> None:
    """Started in a subfolder of a project (its loop.toml is a folder up), FILE_PATH and
    --workspace name files in the project folder, as docs/mcp.md says."""
    (tmp_path / "loop.toml").write_text("")
    (tmp_path / ".git").mkdir()  # the repository's root: the search stops here
    sub = tmp_path / "src" / "pkg"
    sub.mkdir(parents=True)
    server = _server(sub, "--workspace", "ws", FILE_PATH="tasks.json")
    async with Client(server) as client:
        created = await client.call_tool("createTask", {"name": "where"})
        feedback = await client.call_tool("check_and_process_item", {"type": "feedbackbox"})
    assert not created.is_error and not feedback.is_error
    assert (tmp_path / "tasks.json").is_file() and (tmp_path / "ws" / "feedbackbox").is_dir()
    assert sorted(p.name for p in sub.iterdir()) == []


def test_mcp_md_lists_every_session_status_with_its_meaning() -> None:
    """docs/mcp.md's table of get_session_status statuses names every status the output
    schema allows (it listed five of the eight)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)` \| [^|]+\|$", doc, re.MULTILINE)
    assert set(typing.get_args(SessionState)) <= set(rows)


async def test_a_call_whose_json_spells_a_lone_surrogate_is_answered_invalid_input(
    tmp_path: Path,
) -> None:
    """JSON text may spell a lone surrogate ("\\ud800"), which the SDK's parser refuses:
    such a line was dropped without a reply or a log line. Read again, each call gets
    the tool error invalid_input naming the field, nothing is written, and the server
    goes on answering."""
    server = _server(tmp_path, "--tasks-file", "tasks.json")
    calls = {
        2: ("createTask", {"name": "x", "description": "\ud800"}, "description"),
        3: ("getTask", {"id": "\ud800"}, "id"),
        4: ("export_experience_thoughts", {"session_id": "zz", "thoughts": {"a": "\ud800"}},
            "thoughts.a"),
        5: ("start_theme", {"themeName": "\ud800", "themeDirectoryPart": "p", "reason": "r"},
            "themeName"),
    }  # fmt: skip
    lines = [
        *(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call",
             "params": {"name": name, "arguments": args}}
            for i, (name, args, _) in calls.items()
        ),
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
         "params": {"name": "listTasks", "arguments": {}}},
    ]  # fmt: skip
    # json.dumps escapes the surrogate: each line is ASCII JSON text with "\ud800"
    replies = await _pipelined(server, tmp_path, lines)
    for i, (_, _, field) in calls.items():
        assert replies[i]["result"]["isError"] is True, replies[i]
        error = json.loads(replies[i]["result"]["content"][0]["text"])["error"]
        assert error["code"] == "invalid_input"
        assert [d["field"] for d in error["details"]] == [field]
    assert replies[6]["result"]["structuredContent"] == {"tasks": []}
    assert not (tmp_path / "tasks.json").exists() and not (tmp_path / ".loop").exists()


async def test_a_line_that_is_no_message_is_logged_and_the_next_call_answered(
    tmp_path: Path,
) -> None:
    """A line that is not a JSON-RPC message gets no reply (the SDK's rule), but a
    warning on stderr says it was dropped, and the calls after it are answered."""
    server = _server(tmp_path, "--log-format", "json")
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "listTasks", "arguments": {}}}  # fmt: skip
    async with await anyio.open_process(
        [server.command, *server.args], cwd=tmp_path, env=server.env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdout = BufferedByteReceiveStream(proc.stdout)
        await proc.stdin.send((json.dumps(INITIALIZE) + "\nnot json\n").encode())
        await proc.stdin.send((json.dumps(call) + "\n").encode())
        with anyio.fail_after(60):
            reply = await _reply(stdout, 2, [])
        await proc.stdin.aclose()
        errors = b"".join([chunk async for chunk in proc.stderr]).decode()
    assert reply["result"]["structuredContent"] == {"tasks": []}
    [dropped] = [json.loads(e) for e in errors.splitlines() if "mcp.message_dropped" in e]
    assert dropped["level"] == "warning" and "Invalid JSON" in dropped["reason"]
