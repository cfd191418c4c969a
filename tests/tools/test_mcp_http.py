"""The session's MCP endpoint through real clients: the SDK's over streamable HTTP, raw HTTP.

Every request needs a live per-iteration secret; a call runs in its iteration's
context; a secret dies with its iteration's backend call; the loop serves the endpoint
before the first iteration and stops it at the end.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CLIENT_CAPABILITIES_META_KEY,
    LATEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION_META_KEY,
    TextContent,
)
from pydantic import BaseModel

from loop.backends.claude import ClaudeBackend, ClaudeConfig
from loop.backends.command import CommandBackend
from loop.config import McpSection, load_config
from loop.errors import ConfigError, ToolError
from loop.extensions import RunningIteration
from loop.runner import serves_tools
from loop.testing import make_config, run_hats, scripted
from loop.tools.base import Tool, ToolContext
from loop.tools.endpoint import SessionEndpoint
from loop.tools.grants import bearer_token
from loop.tools.registry import all_tools

AGENT = Path(__file__).parent / "agents" / "http_agent.py"
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def running(tmp_path: Path, iteration: int, hat: str = "builder") -> RunningIteration:
    """An iteration of session ``s`` whose events file is under tmp_path."""
    folder = tmp_path / "sessions" / "s"
    return RunningIteration(
        session_id="s",
        session_dir=folder,
        hat=hat,
        iteration=iteration,
        activation=0,
        events_file=folder / "iterations" / f"{iteration:06d}" / "events.jsonl",
    )


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[SessionEndpoint]:
    """A served endpoint over a tool context under tmp_path."""
    served = SessionEndpoint(ToolContext(root=tmp_path, tasks_file=Path("tasks.json")))
    async with anyio.create_task_group() as tg:
        await tg.start(served.serve)
        yield served
        tg.cancel_scope.cancel()


def grant(endpoint: SessionEndpoint, iteration: RunningIteration) -> str:
    """The secret the endpoint gives ``iteration``'s children (its events folder made)."""
    iteration.events_file.parent.mkdir(parents=True, exist_ok=True)
    env = endpoint.child_env(iteration)
    assert env["LOOP_MCP_URL"] == endpoint.url
    return env["LOOP_MCP_TOKEN"]


@asynccontextmanager
async def connect(url: str, token: str | None) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, presenting ``token`` when given."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, raise_exceptions=True) as client:
            yield client


async def post(url: str, authorization: str | None) -> httpx2.Response:
    """One raw JSON-RPC POST (tools/list), with the given Authorization header."""
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with httpx2.AsyncClient() as http:
        return await http.post(url, headers=headers, json=LIST_TOOLS)


def events(iteration: RunningIteration) -> list[Any]:
    """The payloads of the events in the iteration's events file (not its tool calls)."""
    lines = [json.loads(line) for line in iteration.events_file.read_text().splitlines()]
    return [line["payload"] for line in lines if line.get("kind") != "tool.call"]


def journaled(iteration: RunningIteration) -> list[Any]:
    """The tool calls journaled in the iteration's events file."""
    lines = [json.loads(line) for line in iteration.events_file.read_text().splitlines()]
    return [line["call"] for line in lines if line.get("kind") == "tool.call"]


async def test_with_its_token_a_client_lists_and_calls_every_tool(
    endpoint: SessionEndpoint, tmp_path: Path
) -> None:
    """The iteration's secret opens every tool; emit_event writes to that iteration."""
    it = running(tmp_path, 1)
    assert endpoint.url is not None
    async with connect(endpoint.url, grant(endpoint, it)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        created = await client.call_tool("createTask", {"name": "over http"})
        emitted = await client.call_tool("emit_event", {"topic": "work.done", "payload": [1]})
    assert names == list(all_tools())
    assert created.structured_content is not None
    assert created.structured_content["task"]["name"] == "over http"
    assert [t["name"] for t in json.loads((tmp_path / "tasks.json").read_text())] == ["over http"]
    assert emitted.structured_content is not None
    assert emitted.structured_content["events_file"] == str(it.events_file)
    assert events(it) == [[1]]
    # the call is the iteration's: journaled with its input and result, over mcp
    [call] = journaled(it)
    assert (call["tool"], call["channel"], call["input"]) == (
        "createTask",
        "mcp",
        {"name": "over http"},
    )
    assert call["result"] == created.structured_content


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer wrong-secret", "Basic dXNlcjpwYXNz", "Token abc"],
    ids=["none", "empty", "wrong", "basic", "other-scheme"],
)
async def test_without_a_live_token_every_request_gets_401(
    endpoint: SessionEndpoint, tmp_path: Path, authorization: str | None
) -> None:
    """No token, a malformed one or a wrong one: 401 with a Bearer challenge, no JSON-RPC."""
    grant(endpoint, running(tmp_path, 1))  # a live secret exists; it is just not presented
    assert endpoint.url is not None
    reply = await post(endpoint.url, authorization)
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith("Bearer ")
    assert reply.json()["error"] == "invalid_token"
    other = await post(endpoint.url.removesuffix("/mcp") + "/anything", authorization)
    assert other.status_code == 401  # every path, not only the MCP one


async def test_the_sdk_client_without_the_token_can_do_nothing(
    endpoint: SessionEndpoint, tmp_path: Path
) -> None:
    """Neither no token nor a wrong one gets past the handshake; nothing is written."""
    it = running(tmp_path, 1)
    grant(endpoint, it)
    assert endpoint.url is not None
    for token in (None, "wrong"):
        with pytest.raises(ExceptionGroup) as caught:
            async with connect(endpoint.url, token) as client:
                await client.call_tool("emit_event", {"topic": "forged"})
        assert caught.value.subgroup(MCPError) is not None  # the handshake failed
    assert not it.events_file.exists()
    assert not (tmp_path / "tasks.json").exists()


async def test_two_iterations_tokens_each_write_to_their_own_iteration(
    endpoint: SessionEndpoint, tmp_path: Path
) -> None:
    """Two live secrets (two iterations in flight) each run in their own context; one
    revoked is refused at once while the other still works."""
    first, second = running(tmp_path, 1, "planner"), running(tmp_path, 2, "builder")
    first_token, second_token = grant(endpoint, first), grant(endpoint, second)
    assert first_token != second_token
    assert endpoint.url is not None
    async with connect(endpoint.url, first_token) as a, connect(endpoint.url, second_token) as b:
        await a.call_tool("emit_event", {"topic": "plan.ready", "payload": "from 1"})
        await b.call_tool("emit_event", {"topic": "build.done", "payload": "from 2"})
        endpoint.release_child_env(first)
        with pytest.raises(MCPError):  # refused at the HTTP layer (401)
            await a.call_tool("emit_event", {"topic": "late", "payload": "stale"})
        await b.call_tool("emit_event", {"topic": "build.more", "payload": "still 2"})
    assert events(first) == ["from 1"]
    assert events(second) == ["from 2", "still 2"]
    assert (await post(endpoint.url, f"Bearer {first_token}")).status_code == 401
    assert (await post(endpoint.url, f"Bearer {second_token}")).status_code == 200


async def test_a_call_whose_iteration_ended_meanwhile_is_refused(
    endpoint: SessionEndpoint, tmp_path: Path
) -> None:
    """The context is looked up again when the tool runs: a secret revoked between the
    HTTP check and the call gets a not_authorized tool error, not the iteration's file."""
    it = running(tmp_path, 1)
    token = grant(endpoint, it)
    request = SimpleNamespace(headers={"authorization": f"Bearer {token}"})
    context: Any = SimpleNamespace(headers=request.headers)
    assert endpoint.server.tool_context(context).events_file == it.events_file
    endpoint.release_child_env(it)
    with pytest.raises(ToolError) as refused:
        endpoint.server.tool_context(context)
    assert refused.value.code == "not_authorized"
    result = await endpoint.server.call_tool("emit_event", {"topic": "late"}, context)
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert json.loads(block.text)["error"]["code"] == "not_authorized"
    assert not it.events_file.exists()


async def test_a_call_whose_json_spells_a_lone_surrogate_is_answered(
    endpoint: SessionEndpoint, tmp_path: Path
) -> None:
    """JSON text may spell a lone surrogate ("\\ud800"). A request of the current
    protocol reaches its tool, which refuses the text as invalid_input naming the field
    (journaled in the iteration, nothing written); one of the earlier protocols is
    refused by the SDK's parser before any tool, with the JSON-RPC parse error. Either
    way the call is answered."""
    it = running(tmp_path, 1)
    token = grant(endpoint, it)
    assert endpoint.url is not None
    arguments = {"name": "x", "description": "\ud800"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "createTask", "arguments": arguments}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {token}", "Content-Type": "application/json"}  # fmt: skip
    modern = {**headers, "MCP-Protocol-Version": LATEST_PROTOCOL_VERSION,
              "Mcp-Method": "tools/call", "Mcp-Name": "createTask"}  # fmt: skip
    envelope = {
        PROTOCOL_VERSION_META_KEY: LATEST_PROTOCOL_VERSION,
        CLIENT_CAPABILITIES_META_KEY: {},
    }
    current = {**body, "params": {**body["params"], "_meta": envelope}}
    async with httpx2.AsyncClient(timeout=60) as http:
        # json.dumps escapes the surrogate: ASCII JSON text holding "\ud800"
        answered = await http.post(endpoint.url, headers=modern, content=json.dumps(current))
        legacy = await http.post(
            endpoint.url, headers={**headers, "MCP-Protocol-Version": "2025-11-25"},
            content=json.dumps(body),
        )  # fmt: skip
    result = answered.json()["result"]
    assert answered.status_code == 200 and result["isError"] is True, answered.text
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "invalid_input"
    assert [d["field"] for d in error["details"]] == ["description"]
    assert [c["error"]["code"] for c in journaled(it)] == ["invalid_input"]
    assert legacy.status_code == 400 and legacy.json()["error"]["code"] == -32700
    assert not (tmp_path / "tasks.json").exists()


class _Nth(BaseModel):
    n: int = 0


async def test_calls_sent_while_one_runs_are_made_in_the_order_they_arrived(
    tmp_path: Path,
) -> None:
    """Requests that arrive while a call runs wait their turn in arrival order.

    Over HTTP each request has its own connection; the calls of an iteration are
    journaled under its events file's lock, which waiting threads won in any order.
    """
    first_may_end = threading.Event()
    ran: list[int] = []

    def nth(ctx: ToolContext, inp: _Nth) -> _Nth:
        if inp.n == 0:
            first_may_end.wait(30)
        ran.append(inp.n)
        return inp

    served = SessionEndpoint(
        ToolContext(root=tmp_path), {"nth": Tool("nth", "test", "the nth call", _Nth, _Nth, nth)}
    )
    it = running(tmp_path, 1)
    async with anyio.create_task_group() as tg:
        await tg.start(served.serve)
        assert served.url is not None
        async with (
            connect(served.url, grant(served, it)) as client,
            anyio.create_task_group() as calls,
        ):
            for n in range(8):  # sent at once, but surely one after another
                calls.start_soon(client.call_tool, "nth", {"n": n})
                await anyio.sleep(0.3)
            first_may_end.set()
        tg.cancel_scope.cancel()
    assert ran == list(range(8))


def test_bearer_token_parsing() -> None:
    """Only ``Bearer <token>`` (any case) gives a token."""
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None


def test_the_loop_serves_the_tools_when_a_hat_hands_them_to_its_agent(tmp_path: Path) -> None:
    """auto: served for a claude hat with mcp = true only; true and false decide alone."""
    auto = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    assert auto.mcp.serve == "auto"
    claude, plain = ClaudeBackend(ClaudeConfig()), ClaudeBackend(ClaudeConfig(mcp=False))
    assert serves_tools(auto, {"a": claude})
    assert not serves_tools(auto, {"a": plain})
    assert not serves_tools(auto, {"a": scripted("x")})
    assert not serves_tools(replace(auto, mcp=McpSection(serve=False)), {"a": claude})
    assert serves_tools(replace(auto, mcp=McpSection(serve=True)), {"a": scripted("x")})


def test_mcp_serve_is_read_from_loop_toml(tmp_path: Path) -> None:
    """``[mcp] serve`` takes true, false or "auto"; anything else names the key."""
    hat = '[hats.a]\ntriggers = ["task.start"]\n'
    path = tmp_path / "loop.toml"
    path.write_text(f'[loop]\nprompt = "p"\n{hat}[mcp]\nserve = false\n')
    assert load_config(path, root=tmp_path).mcp.serve is False
    path.write_text(f'[loop]\nprompt = "p"\n{hat}[mcp]\nserve = "yes"\n')
    with pytest.raises(ConfigError, match=r"mcp.serve: serve must be true, false or \"auto\""):
        load_config(path, root=tmp_path)


async def test_a_loop_serves_its_agents_and_stops_serving_at_the_end(tmp_path: Path) -> None:
    """Real subprocess agents reach the endpoint with their iteration's secret: the event
    they emit is the hat's, get_session_status reports this running session, the secret
    of the previous iteration is refused, and nothing answers once the run is over."""
    cfg = make_config(
        {
            "first": {"triggers": ["task.start"], "publishes": ["first.done"]},
            "second": {"triggers": ["first.done"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
    )
    cfg = replace(cfg, mcp=McpSection(serve=True))  # command hats: not served on auto
    agents = {
        "first": CommandBackend([sys.executable, str(AGENT), "first.done"]),
        "second": CommandBackend([sys.executable, str(AGENT), "LOOP_COMPLETE"]),
    }
    summary, cap = await run_hats(cfg, agents, workdir=tmp_path, session_id="served")
    assert summary.reason == "completed", summary
    done = [(e.topic, e.payload, e.source) for e in cap.events if not e.topic.startswith("loop.")]
    assert done == [
        ("first.done", {"via": "mcp"}, "first"),
        ("LOOP_COMPLETE", {"via": "mcp"}, "second"),
    ]
    first, second = (json.loads((tmp_path / f"seen-{i}.json").read_text()) for i in (1, 2))
    assert first["status"] == {"session_id": "served", "status": "running"}
    assert first["events_file"].endswith("served/iterations/000001/attempt-1/events.jsonl")
    assert second["events_file"].endswith("served/iterations/000002/attempt-1/events.jsonl")
    assert "old_token_status" not in first
    assert second["old_token_status"] == 401
    assert first["url"] == second["url"]  # one endpoint for the whole session
    with pytest.raises(httpx2.ConnectError):
        await post(first["url"], None)


async def test_the_tools_of_a_domain_turned_off_are_not_served(tmp_path: Path) -> None:
    """With ``[tasks] enabled = false`` the session's agents are not handed the task
    tools (listed or called: an unknown tool, and nothing written), as a hat's task
    request on the bus is answered ``domain_off``; the other domains' tools are served."""
    served = SessionEndpoint(
        ToolContext(root=tmp_path, tasks_file=Path("tasks.json")), off=["tasks"]
    )
    async with anyio.create_task_group() as tg:
        await tg.start(served.serve)
        it = running(tmp_path, 1)
        assert served.url is not None
        async with connect(served.url, grant(served, it)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            refused = await client.call_tool("createTask", {"name": "over http"})
        tg.cancel_scope.cancel()
    tasks = {t.name for t in all_tools().values() if t.domain == "tasks"}
    assert tasks and not tasks & set(names)
    assert "emit_event" in names and "get_theme_status" in names
    assert refused.is_error
    assert not (tmp_path / "tasks.json").exists()
