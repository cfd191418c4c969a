"""The gemini backend: argv, settings and stream parsing (pure), then the real CLI offline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from loop.backends._process import ProcessResult
from loop.backends.gemini import (
    GeminiBackend,
    build_argv,
    lost_prompt,
    mcp_settings,
    parse_stream,
    prepare_home,
    read_settings,
    summarize,
)
from loop.config.backends import GeminiConfig
from loop.testing.gemini_mock import ErrorTurn, MockGemini, StallTurn, TextTurn, ToolUseTurn
from loop.testing.gemini_mock import shell_call as gemini_shell
from loop.tools.base import ToolContext
from tests.backends.conftest import MakeGemini, MakeRequest, marked_processes
from tests.backends.mcp_http import HttpMCP

FIXED = ["--output-format", "stream-json", "--approval-mode", "yolo"]
# The CLI's last stderr line when its wait for stdin ended with nothing read.
NO_INPUT = (
    "No input provided via stdin. Input can be provided by piping data into gemini or using "
    "the --prompt option.\n"
)
# Preloaded into the CLI, it ends that wait at once the first time (see the file).
STDIN_STALL = Path(__file__).with_name("gemini_stdin_stall.mjs")
UNTRUSTED = (
    "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use "
    "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust "
    "this directory in interactive mode. For more details, see https://geminicli.com/docs/cli/"
    "trusted-folders/#headless-and-automated-environments\x1b[0m\n"
)


def _line(**fields: Any) -> str:
    return json.dumps(fields)


def _proc(stdout: str = "", stderr: str = "", rc: int | None = 0, **kw: Any) -> ProcessResult:
    return ProcessResult(returncode=rc, stdout=stdout.encode(), stderr=stderr.encode(), **kw)


STATS = {"input_tokens": 120, "output_tokens": 30, "tool_calls": 1, "duration_ms": 9}
RESULT_OK = _line(type="result", status="success", stats=STATS)


# -- pure: argv, settings, stream ---------------------------------------------------------


def test_argv_is_headless_stream_json_with_yolo_and_prompt_on_stdin() -> None:
    """The fixed flags, the user's args, --model, then `-p ""` (the prompt is on stdin)."""
    assert build_argv(GeminiConfig()) == ["gemini", *FIXED, "-p", ""]
    config = GeminiConfig(
        command=["npx", "gemini"], args=["--debug"], model="m", approval_mode="auto_edit"
    )
    assert build_argv(config) == [
        "npx", "gemini", "--output-format", "stream-json", "--approval-mode", "auto_edit",
        "--debug", "--model", "m", "-p", "",
    ]  # fmt: skip


def test_mcp_settings_http_names_the_token_by_variable() -> None:
    """With the session endpoint, the entry is httpUrl + a bearer header read from the env."""
    env = {"LOOP_MCP_URL": "http://127.0.0.1:9/mcp", "LOOP_MCP_TOKEN": "s3cret", "LOOP_HAT": "h"}
    server = mcp_settings(GeminiConfig(), env)["mcpServers"]["hatloop"]
    assert server == {
        "httpUrl": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer ${LOOP_MCP_TOKEN}"},
        "trust": True,
    }
    assert "s3cret" not in json.dumps(server)


def test_mcp_settings_stdio_passes_only_loop_variables() -> None:
    """Without an endpoint, `python -m loop mcp` (or mcp_command) with the LOOP_* variables."""
    env = {"LOOP_HAT": "builder", "LOOP_EVENTS_FILE": "/e", "SECRET": "x", "LOOP_MCP_URL": ""}
    server = mcp_settings(GeminiConfig(mcp_command=["srv", "--x"]), env)["mcpServers"]["hatloop"]
    assert server == {
        "command": "srv",
        "args": ["--x"],
        "env": {"LOOP_EVENTS_FILE": "/e", "LOOP_HAT": "builder"},
        "trust": True,
    }


def test_read_settings_allows_comments() -> None:
    """The CLI's settings may hold comments; a URL's // inside a string is kept."""
    text = '{\n  // auth\n  "a": "http://x//y", /* b */ "b": [1]\n}'
    assert read_settings(text) == {"a": "http://x//y", "b": [1]}
    assert read_settings("[1]") is None
    assert read_settings("{oops") is None


def test_prepare_home_merges_settings_and_links_the_rest(tmp_path: Path) -> None:
    """The attempt's home has the user's settings plus hatloop's server; the rest are
    links; the user's own folder is left as it was."""
    user = tmp_path / "user" / ".gemini"
    user.mkdir(parents=True)
    user_settings = '{"security": {"auth": {"selectedType": "oauth-personal"}},\n'
    user_settings += ' "mcpServers": {"mine": {"command": "x"}}} // mine'
    (user / "settings.json").write_text(user_settings)
    (user / "oauth_creds.json").write_text("{}")
    overlay = {"mcpServers": {"hatloop": {"httpUrl": "u", "trust": True}}}
    home = tmp_path / "session" / "gemini-home"
    prepare_home(home, user, overlay)
    prepare_home(home, user, overlay)  # every iteration: idempotent
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings == {
        "security": {"auth": {"selectedType": "oauth-personal"}},
        "mcpServers": {"mine": {"command": "x"}, "hatloop": {"httpUrl": "u", "trust": True}},
    }
    link = home / ".gemini" / "oauth_creds.json"
    assert link.is_symlink() and link.resolve() == (user / "oauth_creds.json").resolve()
    assert sorted(p.name for p in user.iterdir()) == ["oauth_creds.json", "settings.json"]
    assert (user / "settings.json").read_text() == user_settings


def test_prepare_sets_trust_and_the_attempt_home(make_request: MakeRequest, tmp_path: Path) -> None:
    """By default the run trusts the folder and reads its settings from a home of the
    attempt's own (<attempt folder>/gemini-home): its settings name the attempt's files."""
    session = tmp_path / "session"
    request = make_request(env={"LOOP_SESSION_DIR": str(session)})
    backend = GeminiBackend(GeminiConfig(env={"HOME": str(tmp_path / "nohome")}))
    argv, env = backend.prepare(request)
    assert argv[-2:] == ["-p", ""]
    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    home = request.iteration_dir / "gemini-home"
    assert env["GEMINI_CLI_HOME"] == str(home)
    server = json.loads((home / ".gemini/settings.json").read_text())
    assert server["mcpServers"]["hatloop"]["env"]["LOOP_EVENTS_FILE"] == str(request.events_file)


def test_prepare_overrides_trust_and_mcp(make_request: MakeRequest, tmp_path: Path) -> None:
    """trust_workspace = false and mcp = false leave the CLI's own behaviour alone."""
    backend = GeminiBackend(
        GeminiConfig(trust_workspace=False, mcp=False, env={"HOME": str(tmp_path)})
    )
    _, env = backend.prepare(make_request())
    assert env.get("GEMINI_CLI_TRUST_WORKSPACE") == os.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    assert env.get("GEMINI_CLI_HOME") == os.environ.get("GEMINI_CLI_HOME")


def test_prepare_with_unreadable_user_settings_goes_without_mcp(
    make_request: MakeRequest, tmp_path: Path
) -> None:
    """A user settings file that is not JSON is left to the CLI to report; no MCP home."""
    (tmp_path / "home" / ".gemini").mkdir(parents=True)
    (tmp_path / "home" / ".gemini" / "settings.json").write_text("{not json")
    backend = GeminiBackend(GeminiConfig(env={"HOME": str(tmp_path / "home")}))
    _, env = backend.prepare(make_request())
    assert env.get("GEMINI_CLI_HOME") == os.environ.get("GEMINI_CLI_HOME")


def test_parse_stream_splits_messages_at_tool_calls() -> None:
    """Text pieces join into messages; a tool call ends one; noise lines are skipped."""
    stdout = "\n".join([
        "Warning: 256-color support not detected.",
        _line(type="init", session_id="s1", model="gemini-x"),
        _line(type="message", role="user", content="PROMPT"),
        _line(type="message", role="assistant", content="I will ", delta=True),
        _line(type="message", role="assistant", content='<event topic="a.b">1</event>', delta=True),
        _line(type="tool_use", tool_name="run_shell_command", tool_id="t1", parameters={}),
        _line(type="tool_result", tool_id="t1", status="error", output="no"),
        _line(type="error", severity="warning", message="\x1b[33mslow\x1b[0m"),
        _line(type="message", role="assistant", content="Done.", delta=True),
        RESULT_OK,
    ])  # fmt: skip
    stream = parse_stream(stdout)
    assert stream.messages == ['I will <event topic="a.b">1</event>', "Done."]
    assert (stream.tool_uses, stream.tool_errors) == (["run_shell_command"], 1)
    assert (stream.session_id, stream.model, stream.warnings) == ("s1", "gemini-x", ["slow"])
    assert stream.result is not None and stream.result["status"] == "success"


def test_summarize_success_takes_every_message_and_tokens() -> None:
    """Output is every assistant message; tokens come from the result's stats."""
    stdout = "\n".join([
        _line(type="message", role="assistant", content="first"),
        _line(type="tool_use", tool_name="x"),
        _line(type="message", role="assistant", content="second"),
        RESULT_OK,
    ])  # fmt: skip
    result = summarize(_proc(stdout), None)
    assert (result.ok, result.output) == (True, "first\n\nsecond")
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (120, 30, None)
    assert result.meta["tool_uses"] == ["x"] and result.meta["duration_ms"] == 9


def test_an_error_inside_the_stream_is_named_by_the_clis_warning() -> None:
    """A result with status error and no message (the model's stream broke off): the
    reason is the warning the CLI printed for it, not a bare 'gemini reported an error'."""
    stdout = _line(
        type="error", severity="warning", message="Model stream ended without a finish reason."
    )
    stdout += "\n" + _line(type="result", status="error", error={})
    result = summarize(_proc(stdout, rc=1), None)
    assert result.reason == "gemini reported an error: Model stream ended without a finish reason."


def test_a_warning_of_a_run_that_went_on_is_a_note_of_the_iteration() -> None:
    """The CLI's loop detection stops the agent and says so in a warning, then reports
    success: the run is not failed, and the warning is a note (so a person learns why
    the agent published nothing)."""
    stdout = "\n".join([
        _line(type="message", role="assistant", content="I will look again."),
        _line(type="error", severity="warning", message="Loop detected, stopping execution"),
        RESULT_OK,
    ])  # fmt: skip
    result = summarize(_proc(stdout), None)
    assert (result.ok, result.reason) == (True, None)
    assert result.notes == ("gemini: Loop detected, stopping execution",)
    assert summarize(_proc(RESULT_OK), None).notes == ()


def test_summarize_error_result_is_one_clean_line() -> None:
    """An API error's JSON body is reduced to its code and message."""
    body = '{"error":{"code":400,"message":"model not found","status":"INVALID_ARGUMENT"}}'
    error = {"type": "unknown", "message": f"[API Error: {body}]"}
    result = summarize(_proc(_line(type="result", status="error", error=error), rc=144), None)
    assert (result.ok, result.exit_code) == (False, 144)
    assert result.reason == "gemini reported an error: API Error 400: model not found"


def test_summarize_no_result_keeps_the_start_of_the_message() -> None:
    """The untrusted-folder exit: no ANSI codes, the message's first words kept, one line."""
    result = summarize(_proc("", stderr="YOLO mode is enabled.\n" + UNTRUSTED, rc=55), None)
    assert not result.ok
    assert result.reason is not None
    assert result.reason.startswith(
        "gemini printed no result line (exit status 55): Gemini CLI is not running in a "
        "trusted directory. To proceed"
    )
    assert "\x1b" not in result.reason and "\n" not in result.reason


def test_summarize_timeout_and_nonzero_exit() -> None:
    """A timeout wins; a success result with a non-zero exit still fails."""
    assert summarize(_proc(RESULT_OK, timed_out=True, rc=-15), 3).reason == "timeout after 3s"
    failed = summarize(_proc(RESULT_OK, stderr="boom\n    at x\n}\n", rc=1), None)
    assert failed.reason == "gemini exit status 1: boom"


def test_lost_prompt_is_exit_42_with_the_message_and_nothing_on_stdout() -> None:
    """Only the CLI's "no input" exit counts (it ran nothing); the reason says so."""
    lost = _proc("", stderr="Ripgrep is not available.\n" + NO_INPUT, rc=42)
    assert lost_prompt(lost)
    assert not lost_prompt(_proc("", stderr=NO_INPUT, rc=1))
    assert not lost_prompt(_proc("", stderr="Error resuming session: x\n", rc=42))
    assert not lost_prompt(_proc(_line(type="init"), stderr=NO_INPUT, rc=42))
    reason = summarize(lost, None).reason
    assert reason == "gemini read no prompt from stdin (it gives up after 500 ms without input)"


def test_summarize_fails_a_run_whose_echo_lacks_the_prompt() -> None:
    """The CLI's user message echoes what it read: the prompt whole, or the run failed."""

    def run(echo: str) -> str | None:
        stdout = _line(type="message", role="user", content=echo) + "\n" + RESULT_OK
        return summarize(_proc(stdout), None, "the prompt").reason

    assert run("the prompt") is None
    assert run("<hook_context>x</hook_context>\n\nthe prompt") is None  # a start-up hook's
    assert run("<hook_context>x</hook_context>") == (
        "gemini ran without the whole prompt (its echo of the prompt lacks it)"
    )
    assert run("the pro") is not None
    assert summarize(_proc(RESULT_OK), None, "the prompt").ok  # no echo: nothing to compare


# -- the real CLI against the mock API ----------------------------------------------------


@pytest.mark.gemini
async def test_real_cli_text_reply_with_a_200_kb_prompt(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """A 200 KB prompt goes whole on stdin; the reply, its tag and the tokens come back."""
    prompt = "x" * 200_000 + "\nEND-OF-PROMPT-4d2"
    reply = 'Plan written. <event topic="plan.ready">three steps</event>'
    with MockGemini(turns=[TextTurn(reply, input_tokens=42, output_tokens=7)]) as mock:
        result = await make_gemini(mock, mcp=False).run(make_request(prompt))
        texts = [t for r in mock.turn_requests for t in r.user_texts()]
    assert result.ok, result.reason
    assert result.output == reply
    assert (result.input_tokens, result.output_tokens) == (42, 7)
    assert any(t.endswith("END-OF-PROMPT-4d2") and len(t) > 200_000 for t in texts)


@pytest.mark.gemini
async def test_real_cli_run_again_when_it_reads_no_prompt(
    make_gemini: MakeGemini, make_request: MakeRequest, tmp_path: Path
) -> None:
    """The CLI's wait for stdin ends before the prompt is read (a stalled event loop): it
    exits 42 having done nothing; the backend says so and runs it again, prompt whole."""
    marker = tmp_path / "stdin-stalled"
    env = {
        "NODE_OPTIONS": f"--import={STDIN_STALL.as_uri()}",
        "HATLOOP_STDIN_STALL_MARKER": str(marker),
    }
    prompt = "y" * 100_000 + "\nEND-OF-PROMPT-7c1"
    with MockGemini(turns=["Done."]) as mock, capture_logs() as logs:
        result = await make_gemini(mock, mcp=False, env=env).run(make_request(prompt))
        texts = [t for r in mock.turn_requests for t in r.user_texts()]
    assert marker.exists()  # the first run did lose its stdin
    assert result.ok, result.reason
    assert result.output == "Done."
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["gemini.prompt_not_read"]
    assert len(mock.turn_requests) == 1
    assert any(t.endswith("END-OF-PROMPT-7c1") and len(t) > 100_000 for t in texts)


@pytest.mark.gemini
async def test_real_cli_without_its_mcp_server_runs_and_the_loop_says_so(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """hatloop's MCP server cannot start (its command fails): the CLI goes on without the
    tools and says so only on stderr; the backend logs a warning naming the hat."""
    with MockGemini(turns=["Done."]) as mock, capture_logs() as logs:
        backend = make_gemini(mock, mcp=True, mcp_command=["false"])
        result = await backend.run(make_request())
    assert result.ok, result.reason
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["gemini.mcp_not_connected"]
    assert warnings[0]["hat"] == "planner"


@pytest.mark.gemini
async def test_real_cli_shell_emit_and_a_tag_before_the_tool_call(
    make_gemini: MakeGemini, make_request: MakeRequest, tmp_path: Path
) -> None:
    """The shell tool runs "$LOOP_PYTHON" -m loop emit; text before the call is output."""
    request = make_request(env={"LOOP_PYTHON": sys.executable})
    emit = '"$LOOP_PYTHON" -m loop emit build.done built'
    turns = [
        ToolUseTurn("run_shell_command", {"command": emit}, text='<event topic="a.b">1</event>'),
        "Finished.",
    ]
    with MockGemini(turns=turns) as mock:
        result = await make_gemini(mock, mcp=False).run(request)
    assert result.ok, result.reason
    assert result.output == '<event topic="a.b">1</event>\n\nFinished.'
    assert result.meta["tool_uses"] == ["run_shell_command"]
    lines = [json.loads(x) for x in request.events_file.read_text().splitlines()]
    assert [(e["topic"], e["payload"]) for e in lines] == [("build.done", "built")]


def _tool_context(request: Any) -> ToolContext:
    return ToolContext(
        root=request.workdir,
        tasks_file=request.workdir / "tasks.json",
        events_file=request.events_file,
    )


@pytest.mark.gemini
async def test_real_cli_uses_the_session_http_endpoint_with_its_token(
    make_gemini: MakeGemini, make_request: MakeRequest, tmp_path: Path
) -> None:
    """With LOOP_MCP_URL/TOKEN the agent reaches hatloop's tools over HTTP (bearer checked)."""
    probe = make_request()
    turns = [
        ToolUseTurn("mcp_hatloop_createTask", {"name": "Write the docs"}),
        ToolUseTurn("mcp_hatloop_emit_event", {"topic": "work.done", "payload": "ok"}),
        "Reported.",
    ]
    with HttpMCP(_tool_context(probe)) as server, MockGemini(turns=turns) as mock:
        request = make_request(env={**server.env, "LOOP_SESSION_DIR": str(tmp_path / "s")})
        result = await make_gemini(mock).run(request)
        offered = json.dumps(mock.turn_requests[0].body.get("tools"))
    assert result.ok, result.reason
    assert "mcp_hatloop_get_session_status" in offered  # offered from the first request
    assert result.meta["tool_uses"] == ["mcp_hatloop_createTask", "mcp_hatloop_emit_event"]
    assert "tool_errors" not in result.meta
    tasks = json.loads((probe.workdir / "tasks.json").read_text())
    assert [t["name"] for t in tasks] == ["Write the docs"]
    events = [json.loads(x) for x in request.events_file.read_text().splitlines()]
    assert [e["topic"] for e in events] == ["work.done"]
    assert server.refused == []  # every request carried the token
    settings = (request.iteration_dir / "gemini-home" / ".gemini" / "settings.json").read_text()
    assert server.token not in settings


@pytest.mark.gemini
async def test_real_cli_stdio_fallback_passes_the_iteration(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """Without an endpoint, `python -m loop mcp` runs with the iteration's variables."""
    request = make_request()
    turns = [ToolUseTurn("mcp_hatloop_emit_event", {"topic": "work.done"}), "ok"]
    with MockGemini(turns=turns) as mock:
        result = await make_gemini(mock).run(request)
    assert result.ok, result.reason
    assert "tool_errors" not in result.meta, result.meta
    events = [json.loads(x) for x in request.events_file.read_text().splitlines()]
    assert [e["topic"] for e in events] == ["work.done"]


@pytest.mark.gemini
@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (500, "gemini reported an error: API Error 500: mock overloaded"),
        (429, "gemini reported an error: [API Error: mock overloaded] Please wait and try"),
    ],
)
async def test_real_cli_api_error_fails_with_a_clean_reason(
    make_gemini: MakeGemini, make_request: MakeRequest, status: int, reason: str
) -> None:
    """An HTTP error (retries bounded to one attempt) is a failed iteration, one clean line."""
    with MockGemini(default=ErrorTurn(status, message="mock overloaded")) as mock:
        result = await make_gemini(mock, mcp=False).run(make_request())
    assert not result.ok
    assert result.reason is not None and result.reason.startswith(reason), result.reason
    assert "\n" not in result.reason and "\x1b" not in result.reason


@pytest.mark.gemini
async def test_real_cli_untrusted_folder_fails_cleanly(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """trust_workspace = false in an untrusted folder: exit 55, the message's start kept."""
    with MockGemini() as mock:
        result = await make_gemini(mock, mcp=False, trust_workspace=False).run(make_request())
    assert (result.ok, result.exit_code) == (False, 55)
    assert result.reason is not None
    assert result.reason.startswith(
        "gemini printed no result line (exit status 55): Gemini CLI is not running in a trusted"
    ), result.reason


@pytest.mark.gemini
async def test_real_cli_unknown_flag_fails_with_its_message_not_the_usage(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """A flag the CLI does not know: its message, before the usage text it prints (the
    reason was "Options:", the usage text's last heading)."""
    with MockGemini() as mock:
        result = await make_gemini(mock, mcp=False, args=["--bogus-flag"]).run(make_request())
    assert not result.ok
    assert result.reason == (
        "gemini printed no result line (exit status 1): Unknown arguments: bogus-flag, bogusFlag"
    ), result.reason


@pytest.mark.gemini
async def test_real_cli_timeout_kills_the_group(
    make_gemini: MakeGemini, make_request: MakeRequest, process_mark: str
) -> None:
    """A hanging API call hits the timeout: failed result, and no CLI process is left."""
    with MockGemini(default=StallTurn()) as mock:
        result = await make_gemini(mock, mcp=False, timeout_seconds=8).run(make_request())
        leftovers = marked_processes(process_mark)
    assert (result.ok, result.reason) == (False, "timeout after 8s")
    assert leftovers == []


def test_mock_shell_call_helper() -> None:
    """shell_call builds the CLI's run_shell_command call."""
    assert gemini_shell("ls").input == {"command": "ls", "description": "run a command"}
