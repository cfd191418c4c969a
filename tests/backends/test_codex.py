"""The codex backend: argv, MCP overrides and JSONL parsing (pure), then the real CLI offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.backends._process import ProcessResult
from loop.backends.codex import CodexBackend, build_argv, mcp_overrides, parse_stream, summarize
from loop.config.backends import CodexConfig
from loop.testing.openai_mock import (
    ErrorTurn,
    MockOpenAI,
    StallTurn,
    TextTurn,
    ToolUseTurn,
    shell_call,
)
from loop.tools.base import ToolContext
from tests.backends.conftest import MakeCodex, MakeRequest, marked_processes
from tests.backends.mcp_http import HttpMCP

FIXED = ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]


def _line(**fields: Any) -> str:
    return json.dumps(fields)


def _proc(stdout: str = "", stderr: str = "", rc: int | None = 0, **kw: Any) -> ProcessResult:
    return ProcessResult(returncode=rc, stdout=stdout.encode(), stderr=stderr.encode(), **kw)


def _item(**fields: Any) -> str:
    return _line(type="item.completed", item=fields)


USAGE = {"input_tokens": 120, "cached_input_tokens": 100, "output_tokens": 30}
TURN_OK = _line(type="turn.completed", usage=USAGE)


# -- pure: argv, overrides, stream --------------------------------------------------------


def test_argv_defaults_run_anywhere_and_write_the_workspace() -> None:
    """exec --json, outside git too, workspace-write sandbox, prompt on stdin (`-`)."""
    assert build_argv(CodexConfig()) == ["codex", *FIXED, "-"]


def test_argv_overrides_come_before_the_users_args() -> None:
    """hatloop's -c pairs, then the user's args (a later -c wins), then --model and `-`."""
    config = CodexConfig(
        args=["-c", "x=1"], model="gpt-x", sandbox="read-only", skip_git_repo_check=False
    )
    argv = build_argv(config, ["a=1"], Path("/elsewhere/it-1"))
    assert argv == [
        "codex", "exec", "--json", "--sandbox", "read-only", "--add-dir", "/elsewhere/it-1",
        "-c", "a=1", "-c", "x=1", "--model", "gpt-x", "-",
    ]  # fmt: skip


def test_mcp_overrides_http_reads_the_token_from_the_environment() -> None:
    """With the session endpoint: url, bearer_token_env_var, required, approved tools."""
    env = {"LOOP_MCP_URL": "http://127.0.0.1:9/mcp", "LOOP_MCP_TOKEN": "s3cret"}
    pairs = mcp_overrides(CodexConfig(), env)
    assert pairs == [
        'mcp_servers.hatloop.url="http://127.0.0.1:9/mcp"',
        'mcp_servers.hatloop.bearer_token_env_var="LOOP_MCP_TOKEN"',
        "mcp_servers.hatloop.required=true",
        'mcp_servers.hatloop.default_tools_approval_mode="approve"',
    ]
    assert not any("s3cret" in p for p in pairs)


def test_mcp_overrides_stdio_passes_the_loop_variables_through() -> None:
    """Without an endpoint: the stdio command and env_vars naming the LOOP_* variables."""
    env = {"LOOP_HAT": "h", "LOOP_EVENTS_FILE": "/e", "OTHER": "x"}
    pairs = mcp_overrides(CodexConfig(mcp_command=["srv", "-v"]), env)
    assert pairs == [
        'mcp_servers.hatloop.command="srv"',
        'mcp_servers.hatloop.args=["-v"]',
        'mcp_servers.hatloop.env_vars=["LOOP_EVENTS_FILE", "LOOP_HAT"]',
        "mcp_servers.hatloop.startup_timeout_sec=60",
        "mcp_servers.hatloop.required=true",
        'mcp_servers.hatloop.default_tools_approval_mode="approve"',
    ]


def test_prepare_adds_the_events_folder_only_when_outside_the_workspace(
    make_request: MakeRequest, tmp_path: Path
) -> None:
    """Events under the workspace need nothing; elsewhere their folder becomes writable."""
    inside = make_request(events_file=tmp_path / "work" / ".loop" / "ev.jsonl")
    argv, _ = CodexBackend(CodexConfig(mcp=False)).prepare(inside)
    assert "--add-dir" not in argv
    outside = make_request()  # tmp_path/session/iter-1, beside tmp_path/work
    argv, env = CodexBackend(CodexConfig(mcp=False)).prepare(outside)
    assert argv[argv.index("--add-dir") + 1] == str(outside.events_file.parent)
    assert env["LOOP_EVENTS_FILE"] == str(outside.events_file)


def test_parse_stream_keeps_every_message_tools_and_usage() -> None:
    """Agent messages in order; tool calls by name; warnings; usage summed over turns."""
    stdout = "\n".join([
        "WARNING: proceeding, even though we could not create PATH aliases",
        _line(type="thread.started", thread_id="th1"),
        _item(type="error", message="Model metadata for `m` not found."),
        _line(type="turn.started"),
        _item(type="agent_message", text='<event topic="a.b">1</event>'),
        _item(type="command_execution", command="bash -lc ls", exit_code=0, status="completed"),
        _item(type="mcp_tool_call", server="hatloop", tool="getTask", status="failed"),
        _item(type="reasoning", text="hmm"),
        _item(type="agent_message", text="Done."),
        TURN_OK,
    ])  # fmt: skip
    stream = parse_stream(stdout)
    assert stream.messages == ['<event topic="a.b">1</event>', "Done."]
    assert stream.tool_uses == ["exec_command", "mcp__hatloop__getTask"]
    assert (stream.tool_errors, stream.turns, stream.thread_id) == (1, 1, "th1")
    assert stream.warnings == ["Model metadata for `m` not found."]
    assert stream.usage == USAGE
    result = summarize(_proc(stdout), None)
    assert result.ok and result.notes == ("codex: Model metadata for `m` not found.",)


def test_summarize_success_takes_messages_and_tokens() -> None:
    """Output is every agent message; tokens from turn.completed; no cost reported."""
    stdout = "\n".join(
        [_item(type="agent_message", text="a"), _item(type="agent_message", text="b"), TURN_OK]
    )
    result = summarize(_proc(stdout), None)
    assert (result.ok, result.output, result.turns) == (True, "a\n\nb", 1)
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (120, 30, None)


def test_summarize_turn_failed_is_one_clean_line() -> None:
    """turn.failed with an API error body: the reason is its message, on one line."""
    body = '{"error": {"message": "bad\\nmodel", "type": "invalid_request_error"}}'
    stdout = _line(type="turn.failed", error={"message": body})
    result = summarize(_proc(stdout, rc=1), None)
    assert (result.ok, result.reason) == (False, "codex turn failed: bad model")


def test_summarize_no_turn_names_the_cause() -> None:
    """A CLI that stops before any turn (bad flag, auth) fails with its stderr line."""
    stderr = (
        "WARNING: proceeding\nerror: unexpected argument '--full-auto' found\n\n  tip: x\n\n"
        "Usage: codex exec [OPTIONS] [PROMPT]\n\nFor more information, try '--help'.\n"
    )
    result = summarize(_proc("", stderr=stderr, rc=2), None)
    assert result.reason == (
        "codex finished no turn (exit status 2): error: unexpected argument '--full-auto' found"
    )
    top = _line(type="error", message="\x1b[31mnot logged in\x1b[0m")
    assert summarize(_proc(top, rc=1), None).reason == (
        "codex finished no turn (exit status 1): not logged in"
    )


def test_summarize_timeout_wins() -> None:
    """A timed-out run fails with 'timeout after Ns' whatever it printed."""
    assert summarize(_proc(TURN_OK, timed_out=True, rc=-15), 2).reason == "timeout after 2s"


# -- the real CLI against the mock API ----------------------------------------------------


@pytest.mark.codex
async def test_real_cli_text_reply_with_a_200_kb_prompt(
    make_codex: MakeCodex, make_request: MakeRequest
) -> None:
    """A 200 KB prompt goes whole on stdin, outside any git repository; tokens come back."""
    prompt = "x" * 200_000 + "\nEND-OF-PROMPT-9c1"
    reply = 'Plan written. <event topic="plan.ready">three steps</event>'
    with MockOpenAI(turns=[TextTurn(reply, input_tokens=42, output_tokens=7)]) as mock:
        result = await make_codex(mock, mcp=False).run(make_request(prompt))
        texts = [t for r in mock.turn_requests for t in r.user_texts()]
    assert result.ok, result.reason
    assert result.output == reply
    assert (result.input_tokens, result.output_tokens, result.turns) == (42, 7, 1)
    assert any(t.rstrip().endswith("END-OF-PROMPT-9c1") and len(t) > 200_000 for t in texts)


@pytest.mark.codex
async def test_real_cli_login_shell_emits_and_a_tag_before_the_call_counts(
    make_codex: MakeCodex, make_request: MakeRequest, tmp_path: Path
) -> None:
    """`bash -lc` (Codex's default) with "$LOOP_PYTHON": the emit reaches an events file
    under the workspace (sandbox workspace-write); text before the call is output."""
    events = tmp_path / "work" / ".loop" / "sessions" / "s" / "events.jsonl"
    events.parent.mkdir(parents=True)
    request = make_request(events_file=events, env={"LOOP_PYTHON": sys.executable})
    emit = shell_call('"$LOOP_PYTHON" -m loop emit build.done built && touch made.txt')
    turns = [
        ToolUseTurn(emit.name, emit.input, text='<event topic="a.b">1</event>'),
        "Finished.",
    ]
    with MockOpenAI(turns=turns) as mock:
        result = await make_codex(mock, mcp=False).run(request)
        results = mock.turn_requests[-1].tool_results()
    assert result.ok, result.reason
    assert result.output == '<event topic="a.b">1</event>\n\nFinished.'
    assert "exited with code 0" in json.dumps(results), results
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [(e["topic"], e["payload"]) for e in lines] == [("build.done", "built")]
    assert (request.workdir / "made.txt").exists()


def _tool_context(request: Any) -> ToolContext:
    return ToolContext(
        root=request.workdir,
        tasks_file=request.workdir / "tasks.json",
        events_file=request.events_file,
    )


@pytest.mark.codex
async def test_real_cli_uses_the_session_http_endpoint_with_its_token(
    make_codex: MakeCodex, make_request: MakeRequest
) -> None:
    """With LOOP_MCP_URL/TOKEN the agent calls hatloop's tools over HTTP, approved."""
    probe = make_request()
    turns = [
        ToolUseTurn("mcp__hatloop__createTask", {"name": "Write the docs"}),
        ToolUseTurn("mcp__hatloop__emit_event", {"topic": "work.done", "payload": "ok"}),
        "Reported.",
    ]
    with HttpMCP(_tool_context(probe)) as server, MockOpenAI(turns=turns) as mock:
        request = make_request(env=server.env)
        backend = make_codex(mock)
        argv, _ = backend.prepare(request)
        result = await backend.run(request)
        first_tools = json.dumps(mock.turn_requests[0].body.get("tools"))
    assert result.ok, result.reason
    assert '"mcp__hatloop"' in first_tools  # the namespace is there from the first request
    assert result.meta["tool_uses"] == ["mcp__hatloop__createTask", "mcp__hatloop__emit_event"]
    assert "tool_errors" not in result.meta
    assert server.token not in " ".join(argv)
    assert server.refused == []
    tasks = json.loads((probe.workdir / "tasks.json").read_text())
    assert [t["name"] for t in tasks] == ["Write the docs"]
    events = [json.loads(x) for x in request.events_file.read_text().splitlines()]
    assert [e["topic"] for e in events] == ["work.done"]


@pytest.mark.codex
async def test_real_cli_stdio_fallback_passes_the_iteration(
    make_codex: MakeCodex, make_request: MakeRequest
) -> None:
    """Without an endpoint, `python -m loop mcp` gets the iteration's LOOP_* variables."""
    request = make_request()
    turns = [ToolUseTurn("mcp__hatloop__emit_event", {"topic": "work.done"}), "ok"]
    with MockOpenAI(turns=turns) as mock:
        result = await make_codex(mock).run(request)
    assert result.ok, result.reason
    assert result.meta["tool_uses"] == ["mcp__hatloop__emit_event"]
    assert "tool_errors" not in result.meta, result.meta
    events = [json.loads(x) for x in request.events_file.read_text().splitlines()]
    assert [e["topic"] for e in events] == ["work.done"]


@pytest.mark.codex
@pytest.mark.parametrize(
    ("turn", "reason"),
    [
        (ErrorTurn(500), "codex turn failed: We’re currently experiencing high demand"),
        (ErrorTurn(429), "codex turn failed: exceeded retry limit, last status: 429"),
        (ErrorTurn(400, message="no such model"), "codex turn failed: no such model"),
        (ErrorTurn(None, message="cut"), "codex turn failed: stream disconnected before"),
    ],
)
async def test_real_cli_api_error_fails_with_a_clean_reason(
    make_codex: MakeCodex, make_request: MakeRequest, turn: ErrorTurn, reason: str
) -> None:
    """An API error (retries off) is a failed iteration with the CLI's message, one line."""
    with MockOpenAI(default=turn) as mock:
        result = await make_codex(mock, mcp=False).run(make_request())
    assert (result.ok, result.exit_code) == (False, 1)
    assert result.reason is not None and result.reason.startswith(reason), result.reason


@pytest.mark.codex
async def test_real_cli_timeout_kills_the_group(
    make_codex: MakeCodex, make_request: MakeRequest, process_mark: str
) -> None:
    """A hanging API call hits the timeout: failed result, and no CLI process is left."""
    with MockOpenAI(default=StallTurn()) as mock:
        result = await make_codex(mock, mcp=False, timeout_seconds=6).run(make_request())
        leftovers = marked_processes(process_mark)
    assert (result.ok, result.reason) == (False, "timeout after 6s")
    assert leftovers == []
