"""The claude backend: argv and stream parsing (pure), then the real CLI against the mock API."""

from __future__ import annotations

import json
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from loop.backends._process import ProcessResult
from loop.backends.claude import (
    ClaudeBackend,
    ClaudeConfig,
    build_argv,
    effective_timeout,
    mcp_config,
    parse_stream,
    summarize,
)
from loop.errors import BackendUnavailable
from loop.testing.anthropic_mock import (
    ErrorTurn,
    MockAnthropic,
    StallTurn,
    TextTurn,
    ToolUseTurn,
    classify_request,
)
from tests.backends.conftest import MakeClaude, MakeRequest, marked_processes

FIXED = ["-p", "--output-format", "stream-json", "--verbose"]


def _line(**fields: Any) -> str:
    return json.dumps(fields)


def _proc(stdout: str = "", stderr: str = "", rc: int | None = 0, **kw: Any) -> ProcessResult:
    return ProcessResult(returncode=rc, stdout=stdout.encode(), stderr=stderr.encode(), **kw)


RESULT_OK = _line(
    type="result",
    subtype="success",
    is_error=False,
    result="done",
    total_cost_usd=0.25,
    num_turns=3,
    session_id="abc",
    usage={"input_tokens": 120, "output_tokens": 30},
)


# -- pure: argv, MCP config, stream -------------------------------------------------------


def test_argv_minimal_without_mcp() -> None:
    """Without MCP or options the argv is the command plus the fixed headless flags."""
    assert build_argv(ClaudeConfig(mcp=False)) == ["claude", *FIXED]


def test_argv_with_options_mcp_and_allowed_tools(tmp_path: Path) -> None:
    """Model, permission mode, user args, --mcp-config and one comma-joined --allowedTools."""
    config = ClaudeConfig(
        command=["npx", "claude"],
        args=["--max-turns", "5"],
        model="sonnet",
        permission_mode="acceptEdits",
        allowed_tools=["Bash(git diff:*)", "Edit"],
    )
    argv = build_argv(config, tmp_path / "mcp.json")
    assert argv == [
        "npx", "claude", *FIXED, "--max-turns", "5", "--model", "sonnet",
        "--permission-mode", "acceptEdits", "--mcp-config", str(tmp_path / "mcp.json"),
        "--allowedTools", "mcp__hatloop,Bash(git diff:*),Edit",
    ]  # fmt: skip


def test_mcp_config_passes_only_loop_variables() -> None:
    """The MCP server entry runs `python -m loop mcp` with the LOOP_* variables only."""
    env = {"LOOP_HAT": "builder", "LOOP_WORKSPACE": "/w", "FILE_PATH": "t.json", "SECRET": "x"}
    doc = mcp_config(ClaudeConfig(), env)
    server = doc["mcpServers"]["hatloop"]
    assert server == {
        "command": sys.executable,
        "args": ["-m", "loop", "mcp"],
        "env": {"LOOP_HAT": "builder", "FILE_PATH": "t.json", "LOOP_WORKSPACE": "/w"},
    }


def test_prepare_writes_mcp_config_in_iteration_folder(make_request: MakeRequest) -> None:
    """prepare() writes the MCP file in the iteration folder and names it in the argv."""
    request = make_request(env={"LOOP_SESSION_DIR": "/s", "LOOP_EXPERIENCES_DIR": "/e"})
    backend = ClaudeBackend(ClaudeConfig(env={"HOME": "/tmp/h"}))
    argv, env = backend.prepare(request)
    assert request.iteration_dir is not None
    path = request.iteration_dir / "claude-mcp.json"
    assert argv[argv.index("--mcp-config") + 1] == str(path)
    server_env = json.loads(path.read_text())["mcpServers"]["hatloop"]["env"]
    assert server_env == {
        "LOOP_EVENTS_FILE": str(request.events_file),
        "LOOP_ITERATION_DIR": str(request.iteration_dir),
        "LOOP_SESSION_ID": "s-test",
        "LOOP_ITERATION": "1",
        "LOOP_ATTEMPT": "1",
        "LOOP_HAT": "planner",
        "LOOP_SESSION_DIR": "/s",
        "LOOP_EXPERIENCES_DIR": "/e",
    }
    assert env["HOME"] == "/tmp/h"
    assert env["LOOP_EVENTS_FILE"] == str(request.events_file)


ENDPOINT = {"LOOP_MCP_URL": "http://127.0.0.1:4321/mcp", "LOOP_MCP_TOKEN": "s3cret"}


def test_mcp_config_names_the_session_endpoint_when_the_loop_serves_it() -> None:
    """With LOOP_MCP_URL and LOOP_MCP_TOKEN the entry is HTTP; the CLI expands both."""
    doc = mcp_config(ClaudeConfig(), {"LOOP_HAT": "builder", **ENDPOINT})
    assert doc == {
        "mcpServers": {
            "hatloop": {
                "type": "http",
                "url": "${LOOP_MCP_URL}",
                "headers": {"Authorization": "Bearer ${LOOP_MCP_TOKEN}"},
            }
        }
    }
    half = mcp_config(ClaudeConfig(), {"LOOP_MCP_URL": ENDPOINT["LOOP_MCP_URL"]})
    assert half["mcpServers"]["hatloop"]["args"] == ["-m", "loop", "mcp"]  # stdio fallback
    own = mcp_config(ClaudeConfig(mcp_command=["my-server"]), ENDPOINT)
    assert own == doc  # mcp_command is the stdio fallback's, as on the other backends
    alone = mcp_config(ClaudeConfig(mcp_command=["my-server"]), {"LOOP_HAT": "builder"})
    assert alone["mcpServers"]["hatloop"]["command"] == "my-server"


def test_prepare_keeps_the_secret_off_disk(make_request: MakeRequest) -> None:
    """The file names the variables; the secret is only in the CLI's environment, which
    also waits for the server before the first turn (unless the user set the wait)."""
    request = make_request(env=ENDPOINT)
    argv, env = ClaudeBackend(ClaudeConfig()).prepare(request)
    text = Path(argv[argv.index("--mcp-config") + 1]).read_text()
    assert "s3cret" not in text and "4321" not in text
    assert env["LOOP_MCP_TOKEN"] == "s3cret"
    assert env["LOOP_MCP_URL"] == ENDPOINT["LOOP_MCP_URL"]
    assert env["MCP_CONNECTION_NONBLOCKING"] == "false"
    assert env["MCP_CONNECT_TIMEOUT_MS"] == "60000"
    own = ClaudeBackend(ClaudeConfig(env={"MCP_CONNECT_TIMEOUT_MS": "9"}))
    assert own.prepare(request)[1]["MCP_CONNECT_TIMEOUT_MS"] == "9"


def test_prepare_without_mcp_writes_nothing(make_request: MakeRequest) -> None:
    """With mcp = false no config file is written and no --mcp-config is passed."""
    request = make_request()
    argv, _ = ClaudeBackend(ClaudeConfig(mcp=False)).prepare(request)
    assert "--mcp-config" not in argv
    assert request.iteration_dir is not None
    assert not (request.iteration_dir / "claude-mcp.json").exists()


def test_config_rejects_unknown_keys() -> None:
    """An unknown key in the claude backend settings is a validation error."""
    with pytest.raises(ValueError, match="modle"):
        ClaudeConfig.model_validate({"type": "claude", "modle": "x"})


def test_parse_stream_tolerates_noise_and_collects_tool_uses() -> None:
    """Non-JSON lines are skipped; tool uses, init MCP status and the result are kept."""
    stdout = "\n".join([
        "warning: something",
        _line(type="system", subtype="init", session_id="abc",
              mcp_servers=[{"name": "hatloop", "status": "connected"}]),
        "[1, 2]",
        _line(type="assistant", message={"content": [
            {"type": "text", "text": "let me look"},
            {"type": "tool_use", "name": "mcp__hatloop__task_list", "input": {}},
        ]}),
        RESULT_OK,
    ])  # fmt: skip
    summary = parse_stream(stdout)
    assert summary.bad_lines == 2
    assert summary.tool_uses == ["mcp__hatloop__task_list"]
    assert summary.mcp_servers == [{"name": "hatloop", "status": "connected"}]
    assert summary.result is not None and summary.result["result"] == "done"


def test_summarize_success_takes_result_cost_tokens_turns() -> None:
    """A result line gives the output, cost, tokens, turns and session id."""
    result = summarize(_proc(RESULT_OK + "\n"), timeout=None)
    assert (result.ok, result.output, result.cost_usd) == (True, "done", 0.25)
    assert (result.input_tokens, result.output_tokens, result.turns) == (120, 30, 3)
    assert result.meta["session_id"] == "abc"


@pytest.mark.parametrize(
    ("cost", "usage"),
    [(-1.0, {"input_tokens": -5, "output_tokens": 7}), ("0.25", {"input_tokens": True})],
)
def test_summarize_drops_usage_that_is_no_count(cost: object, usage: dict[str, object]) -> None:
    """A negative token count or cost (it would give a budget back) and values of the
    wrong type are not reported; the counts that are counts are."""
    line = _line(type="result", subtype="success", is_error=False, result="done",
                 total_cost_usd=cost, usage=usage)  # fmt: skip
    result = summarize(_proc(line + "\n"), timeout=None)
    assert (result.ok, result.cost_usd, result.input_tokens) == (True, None, None)
    assert result.output_tokens == usage.get("output_tokens")


def test_summarize_is_error_fails_with_api_status() -> None:
    """An is_error result is a failed iteration whose reason carries the API status."""
    line = _line(type="result", is_error=True, api_error_status=400, result="API Error: 400 x")
    result = summarize(_proc(line, rc=1), timeout=None)
    assert not result.ok
    assert result.reason == "claude reported an API error 400: API Error: 400 x"


def test_summarize_missing_result_names_last_stderr_line() -> None:
    """No result line is a failure naming the exit status and the last stderr line."""
    result = summarize(_proc("not json\n", stderr="boot\nError: invalid model\n", rc=1), None)
    assert not result.ok
    assert result.reason == "claude printed no result line (exit status 1): Error: invalid model"


def test_summarize_nonzero_exit_after_result_fails() -> None:
    """A result that is not an error still fails when the CLI exits non-zero."""
    result = summarize(_proc(RESULT_OK, stderr="crash on exit", rc=2), None)
    assert (result.ok, result.output, result.reason) == (
        False, "done", "claude exit status 2: crash on exit"
    )  # fmt: skip


def test_summarize_timeout_wins() -> None:
    """A timed-out run fails with 'timeout after Ns' whatever it printed."""
    result = summarize(_proc(RESULT_OK, rc=-15, timed_out=True), timeout=2.5)
    assert (result.ok, result.reason) == (False, "timeout after 2.5s")


def test_effective_timeout_is_the_tightest() -> None:
    """The backend's own timeout and the iteration's combine as the smaller one."""
    assert effective_timeout(None, None) is None
    assert effective_timeout(30.0, None) == 30.0
    assert effective_timeout(30.0, 5.0) == 5.0


# -- run() on stand-in programs --------------------------------------------------------------


async def test_missing_binary_is_unavailable(make_request: MakeRequest) -> None:
    """A CLI that does not exist raises BackendUnavailable."""
    backend = ClaudeBackend(ClaudeConfig(command=["/nonexistent/claude"], mcp=False))
    with pytest.raises(BackendUnavailable, match="/nonexistent/claude"):
        await backend.run(make_request())


async def test_fake_cli_without_result_line_fails(
    make_request: MakeRequest, tmp_path: Path
) -> None:
    """A program that exits 3 with no result line fails with its last stderr line."""
    script = tmp_path / "fake.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        sys.stdin.read()
        print('{"type": "system", "subtype": "init"}')
        sys.stderr.write("first\\nAPI key invalid\\n")
        sys.exit(3)
    """)
    )
    backend = ClaudeBackend(ClaudeConfig(command=[sys.executable, str(script)], mcp=False))
    result = await backend.run(make_request())
    assert not result.ok
    assert result.exit_code == 3
    assert result.reason == "claude printed no result line (exit status 3): API key invalid"


# -- the mock API on its own -----------------------------------------------------------------


def _post(url: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.headers["content-type"], resp.read()


def test_mock_serves_turns_in_order_then_default() -> None:
    """Non-streaming turns come in script order; past the end the default answers."""
    turns = [ToolUseTurn("Bash", {"command": "ls"}), TextTurn("second")]
    body = {"model": "m", "max_tokens": 100, "tools": [{"name": "Bash"}], "messages": []}
    with MockAnthropic(turns=turns, default="fallback") as mock:
        url = mock.base_url + "/v1/messages"
        replies = [json.loads(_post(url, body)[2]) for _ in range(3)]
        assert mock.exhausted and mock.remaining == 0
    assert replies[0]["stop_reason"] == "tool_use"
    assert replies[0]["content"][0]["input"] == {"command": "ls"}
    assert [r["content"][0].get("text") for r in replies[1:]] == ["second", "fallback"]


def test_mock_streams_sse_and_counts_tokens() -> None:
    """A streaming request gets SSE in the documented order; count_tokens a number."""
    body = {"model": "m", "stream": True, "tools": [{"name": "X"}], "messages": []}
    with MockAnthropic(turns=["hello"]) as mock:
        _, ctype, raw = _post(mock.base_url + "/v1/messages?beta=true", body)
        _, _, counted = _post(mock.base_url + "/v1/messages/count_tokens", body)
    names = [ln.split(": ", 1)[1] for ln in raw.decode().splitlines() if ln.startswith("event:")]
    assert ctype == "text/event-stream"
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert json.loads(counted)["input_tokens"] > 0


def test_mock_answers_side_requests_without_consuming_turns() -> None:
    """A title request (structured output, no tools) gets schema JSON, not a scripted turn."""
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    side = {
        "model": "m",
        "tools": [],
        "messages": [],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    assert classify_request("POST", "/v1/messages", side) == "side"
    assert classify_request("POST", "/v1/messages", {"max_tokens": 1}) == "side"
    with MockAnthropic(turns=["scripted"], side_text="Mock title") as mock:
        reply = json.loads(_post(mock.base_url + "/v1/messages", side)[2])
        assert mock.remaining == 1
    assert json.loads(reply["content"][0]["text"]) == {"title": "Mock title"}


# -- the real CLI against the mock -----------------------------------------------------------


@pytest.mark.claude
async def test_real_cli_text_reply(make_claude: MakeClaude, make_request: MakeRequest) -> None:
    """A text reply with an event tag comes back with cost, tokens, turns; the prompt arrived."""
    reply = 'Plan written. <event topic="plan.ready">three steps</event>'
    with MockAnthropic(turns=[TextTurn(reply, input_tokens=42, output_tokens=7)]) as mock:
        result = await make_claude(mock).run(make_request("Plan the PROMPT-7f3 feature"))
        prompts = [t for r in mock.turn_requests for t in r.user_texts()]
    assert result.ok, result.reason
    assert result.output == reply
    assert (result.input_tokens, result.output_tokens, result.turns) == (42, 7, 1)
    assert result.cost_usd is not None and result.cost_usd > 0
    assert result.meta["session_id"]
    assert any("Plan the PROMPT-7f3 feature" in t for t in prompts)


@pytest.mark.claude
async def test_real_cli_api_error_fails(make_claude: MakeClaude, make_request: MakeRequest) -> None:
    """An HTTP 500 from the API (retries off) is an is_error result: a failed iteration."""
    with MockAnthropic(default=ErrorTurn(500, "api_error", "overloaded mock")) as mock:
        result = await make_claude(mock).run(make_request())
    assert not result.ok
    assert result.exit_code == 1
    assert result.reason is not None
    assert result.reason.startswith("claude reported an API error 500: API Error: 500")
    assert result.meta["api_error_status"] == 500


@pytest.mark.claude
async def test_real_cli_timeout_kills_the_group(
    make_claude: MakeClaude, make_request: MakeRequest, process_mark: str
) -> None:
    """A hanging API call hits the timeout: failed result, and no CLI process is left."""
    with MockAnthropic(default=StallTurn()) as mock:
        result = await make_claude(mock, timeout_seconds=4).run(make_request())
        leftovers = marked_processes(process_mark)
    assert (result.ok, result.reason) == (False, "timeout after 4s")
    assert leftovers == []


@pytest.mark.claude
async def test_real_cli_cancel_kills_the_group(
    make_claude: MakeClaude, make_request: MakeRequest, process_mark: str
) -> None:
    """Cancelling the iteration while the CLI waits on the API stops every CLI process."""
    with MockAnthropic(default=StallTurn()) as mock:
        backend = make_claude(mock)
        async with anyio.create_task_group() as tg:
            tg.start_soon(backend.run, make_request())
            with anyio.fail_after(60):
                await anyio.to_thread.run_sync(mock.stalled.wait)
            assert marked_processes(process_mark), "the CLI should be running now"
            tg.cancel_scope.cancel()
        leftovers = marked_processes(process_mark)
    assert leftovers == []


MCP_SERVER = """
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("hatloop")

@server.tool()
def whoami() -> str:
    \"\"\"Say which hat and session this server serves.\"\"\"
    return f"hat={os.environ['LOOP_HAT']} session={os.environ['LOOP_SESSION_ID']}"

server.run()
"""


@pytest.mark.claude
async def test_real_cli_calls_tools_through_mcp_config(
    make_claude: MakeClaude, make_request: MakeRequest, tmp_path: Path
) -> None:
    """The written --mcp-config starts the server with LOOP_* env; mcp__hatloop is allowed."""
    server = tmp_path / "server.py"
    server.write_text(MCP_SERVER)
    turns = [
        ToolUseTurn("mcp__hatloop__whoami", {}),
        ToolUseTurn("Bash", {"command": "echo bash-ran", "description": "echo"}),
        "all done",
    ]
    with MockAnthropic(turns=turns) as mock:
        backend = make_claude(
            mock, mcp=True, mcp_command=[sys.executable, str(server)], allowed_tools=["Bash"]
        )
        result = await backend.run(make_request())
        results = mock.turn_requests[-1].tool_results()  # the history holds both results
    assert result.ok, result.reason
    assert result.output == "all done"
    assert result.meta["tool_uses"] == ["mcp__hatloop__whoami", "Bash"]
    assert result.meta["mcp_servers"] == [{"name": "hatloop", "status": "connected"}]
    texts = [json.dumps(b["content"]) for b in results]
    assert len(texts) == 2 and not any(b.get("is_error") for b in results), texts
    assert "hat=planner session=s-test" in texts[0]
    assert "bash-ran" in texts[1]


@pytest.mark.claude
async def test_an_agent_stopped_at_its_timeout_does_nothing_more(
    make_claude: MakeClaude, make_request: MakeRequest, tmp_path: Path
) -> None:
    """Stopped by its timeout in the middle of a tool, the CLI neither tells the model nor
    runs the next tool. Given SIGTERM (with hatloop's stdio MCP server), Claude Code went
    on doing both for as long as a grace lasted; it is now killed at once."""
    started, after = tmp_path / "tool-started", tmp_path / "after-the-stop"
    turns = [
        ToolUseTurn("Bash", {"command": f"touch {started}; sleep 300", "description": "wait"}),
        ToolUseTurn("Bash", {"command": f"touch {after}", "description": "touch"}),
        "done",
    ]
    with MockAnthropic(turns=turns) as mock:
        backend = make_claude(mock, mcp=True, allowed_tools=["Bash"], timeout_seconds=8)
        result = await backend.run(make_request())
        await anyio.sleep(3)  # longer than the grace a SIGTERM gave
        requests = len(mock.turn_requests)
    assert result.reason == "timeout after 8s"
    assert started.exists(), "the CLI was stopped before its tool ran: nothing was tested"
    assert requests == 1
    assert not after.exists()


@pytest.mark.claude
async def test_real_cli_a_tag_written_before_a_tool_call_is_output(
    make_claude: MakeClaude, make_request: MakeRequest
) -> None:
    """The output is every assistant message's text, as with gemini and codex: an
    ``<event>`` tag the agent wrote before calling a tool is not lost to the result line,
    which holds only the last message."""
    tag = '<event topic="review.approved">ok</event>'
    turns = [
        ToolUseTurn("Bash", {"command": "echo hi", "description": "echo"}, text=f"Approved. {tag}"),
        "Review finished.",
    ]
    with MockAnthropic(turns=turns) as mock:
        result = await make_claude(mock, allowed_tools=["Bash"]).run(make_request())
    assert result.ok, result.reason
    assert result.output == f"Approved. {tag}\n\nReview finished."


SLOW_START = 6  # seconds: longer than the CLI's own default wait (5 s)


@pytest.mark.claude
async def test_real_cli_waits_for_a_slow_mcp_server_before_the_first_turn(
    make_claude: MakeClaude, make_request: MakeRequest, tmp_path: Path
) -> None:
    """A server that takes longer to start than the CLI would wait on its own is still
    in the first request to the model: the agent never starts without the tools."""
    server = tmp_path / "server.py"
    server.write_text(f"import time\ntime.sleep({SLOW_START})\n" + MCP_SERVER)
    with MockAnthropic(turns=["ready"]) as mock:
        backend = make_claude(mock, mcp=True, mcp_command=[sys.executable, str(server)])
        result = await backend.run(make_request())
        first = mock.turn_requests[0].body
    assert result.ok, result.reason
    assert "mcp__hatloop__whoami" in [t["name"] for t in first.get("tools", [])]
    assert result.meta["mcp_servers"] == [{"name": "hatloop", "status": "connected"}]
