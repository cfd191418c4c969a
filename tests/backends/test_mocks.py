"""The Gemini and OpenAI Responses mocks on their own, over HTTP (no CLI)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from loop.testing.gemini_mock import MockGemini
from loop.testing.mock_api import ErrorTurn, TextTurn, ToolUseTurn, json_for_schema
from loop.testing.openai_mock import MockOpenAI, shell_call


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["content-type"], resp.read()


def _sse(raw: bytes) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = []
    for block in raw.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines.get("event"), json.loads(lines["data"])))
    return events


GEMINI_STREAM = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"


def test_gemini_turns_stream_in_order_then_default() -> None:
    """Streamed requests get the script as SSE chunks (text, then a call), then the default."""
    turns = [
        TextTurn("hello", input_tokens=3, output_tokens=2),
        ToolUseTurn("run_shell_command", {"command": "ls"}, text="looking"),
    ]
    with MockGemini(turns=turns, default="fallback") as mock:
        chunks = [_sse(_post(mock.base_url + GEMINI_STREAM, {"contents": []})[1]) for _ in "abc"]
        assert mock.exhausted and len(mock.turn_requests) == 3
    first = chunks[0][0][1]
    assert first["candidates"][0]["content"]["parts"] == [{"text": "hello"}]
    assert first["usageMetadata"]["promptTokenCount"] == 3
    assert first["modelVersion"] == "gemini-x"
    assert chunks[1][0][1]["candidates"][0]["content"]["parts"] == [
        {"text": "looking"},
        {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
    ]
    assert chunks[2][0][1]["candidates"][0]["content"]["parts"] == [{"text": "fallback"}]


def test_each_conversation_gets_its_own_script_whatever_the_order() -> None:
    """Requests carrying a conversation's key get its turns in order, then the default;
    the others share the main script (agents running at once do not take each other's)."""
    turns = ["shared 1", "shared 2"]
    talks: dict[str, list[TextTurn | str]] = {"alpha": ["a1", "a2"], "beta": ["b1"]}

    def ask(mock: MockOpenAI, text: str) -> str:
        body = {"input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}
        events = _sse(_post(mock.base_url + "/v1/responses", body)[1])
        done = [data for name, data in events if name == "response.completed"]
        return str(done[0]["response"]["output"][0]["content"][0]["text"])

    with MockOpenAI(turns=turns, conversations=talks, default="none left") as mock:
        assert mock.remaining == 5
        said = [ask(mock, t) for t in ("review beta", "alpha?", "other", "alpha again", "beta")]
        assert said == ["b1", "a1", "shared 1", "a2", "none left"]
        assert mock.exhausted and mock.remaining == 1
        assert ask(mock, "no key") == "shared 2"


def test_gemini_side_requests_and_token_counts_do_not_consume_turns() -> None:
    """generateContent gets JSON fitting its schema (minimums kept); countTokens a number."""
    schema = {
        "type": "OBJECT",
        "properties": {"reasoning": {"type": "STRING"}, "score": {"type": "INTEGER", "minimum": 1}},
    }
    body = {"generationConfig": {"responseJsonSchema": schema}}
    with MockGemini(turns=["scripted"], side_text="why") as mock:
        _, raw = _post(mock.base_url + "/v1beta/models/m:generateContent", body)
        _, counted = _post(mock.base_url + "/v1beta/models/m:countTokens", {"contents": []})
        assert mock.remaining == 1
    text = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"reasoning": "why", "score": 1}
    assert json.loads(counted)["totalTokens"] > 0


def test_gemini_errors_in_googles_shape() -> None:
    """An ErrorTurn with a status answers it with {"error": {code, message, status}}."""
    with (
        MockGemini(default=ErrorTurn(429, message="slow down")) as mock,
        pytest.raises(urllib.error.HTTPError) as caught,
    ):
        _post(mock.base_url + GEMINI_STREAM, {})
    assert caught.value.code == 429
    assert json.loads(caught.value.read()) == {
        "error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
    }


def test_recorded_requests_read_gemini_and_openai_bodies() -> None:
    """user_texts and tool_results understand Gemini contents and Responses input items."""
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "PROMPT"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ]
    }
    openai = {
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "P"}]},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
    }
    with MockGemini(turns=["a"]) as gm, MockOpenAI(turns=["b"]) as om:
        _post(gm.base_url + GEMINI_STREAM, gemini)
        _post(om.base_url + "/v1/responses", openai)
        g, o = gm.turn_requests[0], om.turn_requests[0]
    assert (g.user_texts(), g.tool_results()) == (["PROMPT"], [{"name": "f", "response": {}}])
    assert o.user_texts() == ["P"]
    assert o.tool_results() == [{"type": "function_call_output", "call_id": "c1", "output": "ok"}]


def test_openai_stream_ends_with_completed_and_usage() -> None:
    """A Responses turn streams created, item added/delta/done, then completed with usage."""
    with MockOpenAI(turns=[TextTurn("hi", input_tokens=4, output_tokens=2)]) as mock:
        ctype, raw = _post(mock.base_url + "/v1/responses", {"model": "m", "stream": True})
    events = _sse(raw)
    assert ctype == "text/event-stream"
    assert [name for name, _ in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-1][1]["response"]
    assert done["output"][0]["content"][0]["text"] == "hi"
    assert (done["usage"]["input_tokens"], done["usage"]["output_tokens"]) == (4, 2)


def test_openai_tool_calls_use_an_offered_namespace() -> None:
    """mcp__hatloop__createTask goes out namespaced when the request offers the namespace;
    a plain tool (the shell) keeps its name; arguments are JSON text."""
    tools = [{"type": "namespace", "name": "mcp__hatloop", "tools": []}]
    turns = [ToolUseTurn("mcp__hatloop__createTask", {"name": "x"}), shell_call("ls")]
    with MockOpenAI(turns=turns) as mock:
        calls = [
            _sse(_post(mock.base_url + "/v1/responses", {"tools": tools})[1])[-1][1]["response"]
            for _ in turns
        ]
    mcp, shell = (c["output"][0] for c in calls)
    assert (mcp["namespace"], mcp["name"], json.loads(mcp["arguments"])) == (
        "mcp__hatloop",
        "createTask",
        {"name": "x"},
    )
    assert (shell["name"], "namespace" in shell) == ("exec_command", False)
    assert json.loads(shell["arguments"]) == {"cmd": "ls", "login": True}


def test_openai_errors_as_http_status_or_failed_stream() -> None:
    """A status gives an HTTP error body; status None a stream ending in response.failed."""
    with MockOpenAI(turns=[ErrorTurn(500, message="down")], default=ErrorTurn(None)) as mock:
        with pytest.raises(urllib.error.HTTPError) as caught:
            _post(mock.base_url + "/v1/responses", {})
        _, raw = _post(mock.base_url + "/v1/responses", {})
    assert caught.value.code == 500
    assert json.loads(caught.value.read())["error"]["type"] == "server_error"
    assert [name for name, _ in _sse(raw)] == ["response.failed"]


def test_json_for_schema_fills_types_enums_and_minimums() -> None:
    """Objects recurse; enums take their first value; numbers their minimum; strings text."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"enum": ["x", "y"]},
            "b": {"type": "number", "minimum": 2.5},
            "c": {"type": "array"},
            "d": {"type": ["string", "null"]},
        },
    }
    assert json_for_schema(schema, "t") == {"a": "x", "b": 2.5, "c": [], "d": "t"}
