"""The agent CLIs' output as a person follows it (``-v``): each backend's reader of its
stream (pure), then the real CLIs against the local mocks, observed while they run; and
a real CLI gone silent, stopped by the idle timeout."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import anyio
import pytest

from loop.backends._agent import call_text
from loop.backends.base import AgentOutput, Backend, BackendRequest, BackendResult
from loop.backends.claude import StreamReader as ClaudeReader
from loop.backends.codex import StreamReader as CodexReader
from loop.backends.gemini import StreamReader as GeminiReader
from loop.testing.anthropic_mock import MockAnthropic
from loop.testing.gemini_mock import MockGemini
from loop.testing.mock_api import MockServer, StallTurn, TextTurn, ToolUseTurn
from loop.testing.openai_mock import MockOpenAI, shell_call
from tests.backends.conftest import (
    MakeClaude,
    MakeCodex,
    MakeGemini,
    MakeRequest,
    marked_processes,
)


def _line(**fields: Any) -> str:
    return json.dumps(fields)


def _leftovers(mark: str) -> list[int]:
    """The CLI's processes still there once they have had time to die (a signal is
    delivered a moment after it is sent; a busy machine may not have run them since)."""
    deadline = time.monotonic() + 30
    while (found := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


# -- the readers (pure) ---------------------------------------------------------------------


def test_a_tool_call_reads_as_its_name_and_its_most_telling_input() -> None:
    """A command or a path when there is one, else compact JSON; one line, cut short."""
    assert call_text("Bash", {"command": "ls -la", "description": "list"}) == "Bash ls -la"
    assert call_text("Read", {"file_path": "/a/b.py"}) == "Read /a/b.py"
    assert call_text("exec", {"cmd": ["bash", "-lc", "make"]}) == "exec bash -lc make"
    assert call_text("mcp__hatloop__emit_event", {"topic": "a.b"}) == (
        'mcp__hatloop__emit_event {"topic": "a.b"}'
    )
    assert call_text("Think") == "Think"
    long = call_text("Bash", {"command": "echo " + "x" * 500})
    assert len(long) <= 160 and long.endswith("…")
    assert "\n" not in call_text("Bash", {"command": "a\nb"})


def test_claude_assistant_lines_read_as_text_and_tool_calls() -> None:
    """Each assistant message's text and tool_use blocks; other lines and noise: nothing."""
    reader = ClaudeReader()
    message = {
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}},
            {"type": "text", "text": "   "},
        ]
    }
    assert list(reader.read(_line(type="assistant", message=message))) == [
        ("text", "Let me look."),
        ("tool", "Bash ls"),
    ]
    for other in (_line(type="system", subtype="init"), _line(type="result"), "noise", "{"):
        assert list(reader.read(other)) == []


def test_gemini_text_pieces_read_as_whole_lines_and_a_tool_call_ends_them() -> None:
    """Assistant text arrives in pieces: whole lines are handed on as they complete; the
    rest waits for a tool call, the result, or the end."""
    reader = GeminiReader()
    piece = {"type": "message", "role": "assistant", "delta": True}
    assert list(reader.read(_line(**piece, content="Hello "))) == []
    assert list(reader.read(_line(**piece, content="world\nand "))) == [("text", "Hello world")]
    call = _line(type="tool_use", tool_name="run_shell_command", parameters={"command": "ls"})
    assert list(reader.read(call)) == [("text", "and "), ("tool", "run_shell_command ls")]
    assert list(reader.read(_line(**piece, content="done"))) == []
    assert list(reader.end()) == [("text", "done")]
    assert list(reader.read(_line(type="message", role="user", content="prompt"))) == []


def test_codex_items_read_as_messages_and_tool_calls_once() -> None:
    """A tool call shows when it starts (or, unseen then, when it completes), a message
    when it completes."""
    reader = CodexReader()

    def item(kind: str, **fields: Any) -> str:
        return _line(type=kind, item=fields)

    cmd = {"id": "i1", "type": "command_execution", "command": "bash -lc ls"}
    assert list(reader.read(item("item.started", **cmd))) == [("tool", "exec_command bash -lc ls")]
    assert list(reader.read(item("item.completed", **cmd, status="completed"))) == []
    mcp = {"id": "i2", "type": "mcp_tool_call", "server": "hatloop", "tool": "getTask"}
    assert list(reader.read(item("item.completed", **mcp, arguments={"id": "7"}))) == [
        ("tool", 'mcp__hatloop__getTask {"id": "7"}')
    ]
    message = {"id": "i3", "type": "agent_message", "text": "All done."}
    assert list(reader.read(item("item.completed", **message))) == [("text", "All done.")]
    assert list(reader.read(_line(type="turn.completed", usage={}))) == []


# -- the real CLIs, observed while they run -------------------------------------------------


async def _observe_until_a_tool_call(
    backend: Backend, request: BackendRequest
) -> tuple[list[AgentOutput], BackendResult | None]:
    """Run ``backend`` until its agent's first tool call is observed, then cancel it (the
    model stalls after that call: the CLI is still running when it is seen)."""
    seen: list[AgentOutput] = []
    called = anyio.Event()
    result: list[BackendResult] = []

    def observer(piece: AgentOutput) -> None:
        seen.append(piece)
        if piece.kind == "tool":
            called.set()

    async def run() -> None:
        result.append(await backend.run(_with(request, observer)))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await called.wait()
            tg.cancel_scope.cancel()
    return seen, (result[0] if result else None)


def _with(request: BackendRequest, observer: Any) -> BackendRequest:
    return replace(request, observer=observer)


def _texts(seen: list[AgentOutput], kind: str) -> list[str]:
    assert {(p.hat, p.iteration) for p in seen} == {("planner", 1)}
    return [p.text for p in seen if p.kind == kind]


def _stalls_after(mock: type[MockServer], call: ToolUseTurn) -> MockServer:
    return mock(turns=[call], default=StallTurn())


@pytest.mark.claude
async def test_claude_text_and_tool_calls_arrive_while_it_runs(
    make_claude: MakeClaude, make_request: MakeRequest, process_mark: str
) -> None:
    """Claude Code's stream is followed in its output file: the text and the Bash call
    are seen before the CLI ends (it waits on a stalled model after the call)."""
    call = ToolUseTurn("Bash", {"command": "echo hello"}, text="Let me look.")
    with _stalls_after(MockAnthropic, call) as mock:
        backend = make_claude(mock, allowed_tools=["Bash"])
        seen, result = await _observe_until_a_tool_call(backend, make_request())
        leftovers = _leftovers(process_mark)
    assert result is None  # cancelled while it ran
    assert _texts(seen, "text") == ["Let me look."]
    assert _texts(seen, "tool") == ["Bash echo hello"]
    assert leftovers == []


@pytest.mark.gemini
async def test_gemini_text_and_tool_calls_arrive_while_it_runs(
    make_gemini: MakeGemini, make_request: MakeRequest, process_mark: str
) -> None:
    """Gemini CLI's pieces of text make a line, then its shell call, while it runs."""
    call = ToolUseTurn("run_shell_command", {"command": "echo hello"}, text="Let me look.")
    with _stalls_after(MockGemini, call) as mock:
        backend = make_gemini(mock, mcp=False)
        seen, result = await _observe_until_a_tool_call(backend, make_request())
        leftovers = _leftovers(process_mark)
    assert result is None
    assert _texts(seen, "text") == ["Let me look."]
    assert _texts(seen, "tool") == ["run_shell_command echo hello"]
    assert leftovers == []


@pytest.mark.codex
async def test_codex_messages_and_tool_calls_arrive_while_it_runs(
    make_codex: MakeCodex, make_request: MakeRequest, process_mark: str
) -> None:
    """Codex's message, then its command as it starts, while it runs."""
    shell = shell_call("echo hello")
    call = ToolUseTurn(shell.name, shell.input, text="Let me look.")
    with _stalls_after(MockOpenAI, call) as mock:
        backend = make_codex(mock, mcp=False)
        seen, result = await _observe_until_a_tool_call(backend, make_request())
        leftovers = _leftovers(process_mark)
    assert result is None
    assert _texts(seen, "text") == ["Let me look."]
    [tool] = _texts(seen, "tool")
    assert tool.startswith("exec_command ") and "echo hello" in tool
    assert leftovers == []


@pytest.mark.claude
async def test_a_claude_agent_gone_silent_is_stopped_by_the_idle_timeout(
    make_claude: MakeClaude, make_request: MakeRequest, process_mark: str
) -> None:
    """The model never answers, so the CLI prints nothing more: after idle_timeout its
    group is stopped and the iteration fails with reason idle_timeout."""
    with MockAnthropic(default=StallTurn()) as mock:
        backend = make_claude(mock)
        with anyio.fail_after(120):
            result = await backend.run(make_request(idle_timeout_seconds=4))
        leftovers = _leftovers(process_mark)
    assert (result.ok, result.reason) == (False, "idle_timeout: no output for 4s")
    assert leftovers == []


@pytest.mark.claude
async def test_claude_without_an_observer_reports_the_same_result(
    make_claude: MakeClaude, make_request: MakeRequest
) -> None:
    """Watching changes nothing in the result: the same output with and without -v."""
    outputs = []
    for observer in (None, lambda piece: None):
        with MockAnthropic(turns=[TextTurn("hello <event topic='a.b'>x</event>")]) as mock:
            result = await make_claude(mock).run(make_request(observer=observer))
        assert result.ok, result.reason
        outputs.append(result.output)
    assert outputs[0] == outputs[1]
