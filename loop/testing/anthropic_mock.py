"""A local mock of the Anthropic Messages API for driving the real Claude Code CLI offline.

Point the CLI at it with ``ANTHROPIC_BASE_URL=mock.base_url`` and any API key. Scripted
turns are served in order to successive model requests (``POST /v1/messages``), as
streaming SSE or as one JSON message; every request is recorded so that tests can
check what reached the model (the prompt, tool results)::

    with MockAnthropic(turns=[ToolUseTurn("mcp__hatloop__task_list", {}), "done"]) as mock:
        run_claude(env={"ANTHROPIC_BASE_URL": mock.base_url, ...})
        assert mock.turn_requests[-1].tool_results()

Side requests the CLI makes on its own are answered without consuming a scripted turn:
Claude Code 2.1 sends a session-title request (no tools, a JSON-schema
``output_config.format``; answered with JSON that fits the schema) unless
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` is set, and older versions a one-token
quota probe. It also sends ``HEAD /`` first (answered 200). When the script runs out,
``default`` answers every further model request and ``mock.exhausted`` becomes true.

The turns, the request log and the server are shared with the other mocks
(:mod:`loop.testing.mock_api`).
"""

from __future__ import annotations

import json
from typing import Any

from loop.testing.mock_api import (
    ErrorTurn,
    MockServer,
    RecordedRequest,
    Reply,
    RequestKind,
    StallTurn,
    TextTurn,
    ToolUseTurn,
    Turn,
    json_for_schema,
)

__all__ = [
    "ErrorTurn",
    "MockAnthropic",
    "RecordedRequest",
    "RequestKind",
    "StallTurn",
    "TextTurn",
    "ToolUseTurn",
    "Turn",
    "classify_request",
    "json_for_schema",
    "message_json",
    "sse_events",
]

DEFAULT_MODEL = "claude-mock"


def classify_request(method: str, path: str, body: Any) -> RequestKind:
    """Decide what a request is: a scripted model turn, a CLI side request, or other.

    Side requests are the ones the CLI sends on its own rather than for the agent's
    conversation. Seen with Claude Code 2.1: a session-title request (no tools, a
    structured ``output_config.format``) unless ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``
    is set; older versions also sent a one-token quota probe (``max_tokens`` of 1).
    """
    route = path.split("?", 1)[0].rstrip("/")
    if method != "POST":
        return "other"
    if route.endswith("/messages/count_tokens"):
        return "count_tokens"
    if not route.endswith("/messages"):
        return "other"
    if not isinstance(body, dict):
        return "side"
    if body.get("max_tokens") == 1:
        return "side"
    output_config = body.get("output_config")
    if not body.get("tools") and isinstance(output_config, dict) and output_config.get("format"):
        return "side"
    return "turn"


def _blocks(turn: TextTurn | ToolUseTurn, tool_id: str) -> list[dict[str, Any]]:
    if isinstance(turn, TextTurn):
        return [{"type": "text", "text": turn.text}]
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    blocks.append(
        {"type": "tool_use", "id": turn.id or tool_id, "name": turn.name, "input": turn.input}
    )
    return blocks


def _stop_reason(turn: TextTurn | ToolUseTurn) -> str:
    return "tool_use" if isinstance(turn, ToolUseTurn) else "end_turn"


def message_json(
    turn: TextTurn | ToolUseTurn, *, model: str, msg_id: str, tool_id: str
) -> dict[str, Any]:
    """The non-streaming ``message`` object for ``turn``."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(turn, tool_id),
        "stop_reason": _stop_reason(turn),
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def sse_events(
    turn: TextTurn | ToolUseTurn, *, model: str, msg_id: str, tool_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """The Messages streaming events for ``turn``, as (event name, data) pairs."""
    start = message_json(turn, model=model, msg_id=msg_id, tool_id=tool_id)
    blocks = start.pop("content")
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = dict(start["usage"], output_tokens=1)
    events = [_event("message_start", message=start)]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            _event("content_block_start", index=index, content_block=opened),
            _event("content_block_delta", index=index, delta=delta),
            _event("content_block_stop", index=index),
        ]
    stop = {"stop_reason": _stop_reason(turn), "stop_sequence": None}
    events += [
        _event("message_delta", delta=stop, usage={"output_tokens": turn.output_tokens}),
        _event("message_stop"),
    ]
    return events


def _event(name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return name, {"type": name, **fields}


def _error_body(turn: ErrorTurn) -> dict[str, Any]:
    kind = turn.error_type or (
        "api_error" if (turn.status or 500) >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": turn.message, **turn.error_fields}}


class MockAnthropic(MockServer):
    """A threaded HTTP server on 127.0.0.1 that plays scripted Messages API turns.

    Args:
        turns: served in order to model requests; a plain string is a :class:`TextTurn`.
        default: the answer once the script is exhausted (a string or any turn).
        side_text: the answer to side requests (quota probes, titles).
        model: the model name reported when a request names none.
        conversations: each its own script, for agents running at once (see
            :class:`~loop.testing.mock_api.MockServer`).
    """

    name = "mock_anthropic"
    default_model = DEFAULT_MODEL
    classify_request = staticmethod(classify_request)

    def answer(self, reply: Reply, request: RecordedRequest) -> None:
        """Count tokens, or play the next turn (a side request gets a turn of its own)."""
        body = request.body if isinstance(request.body, dict) else {}
        if request.kind == "count_tokens":
            reply.json(200, {"input_tokens": max(1, len(request.text) // 4)})
            return
        if request.kind == "other":
            reply.json(200, {})
            return
        turn = self.next_turn(request) if request.kind == "turn" else self._side_turn(body)
        if isinstance(turn, StallTurn):
            self.stall(reply)
            return
        if isinstance(turn, ErrorTurn):
            if turn.status is not None:
                reply.json(turn.status, _error_body(turn), turn.headers)
            else:
                reply.sse([("error", _error_body(turn))])
            return
        model = str(body.get("model") or self.model)
        n = self.new_id()
        msg_id, tool_id = f"msg_mock_{n:04d}", f"toolu_mock_{n:04d}"
        if body.get("stream"):
            reply.sse(sse_events(turn, model=model, msg_id=msg_id, tool_id=tool_id))
        else:
            reply.json(200, message_json(turn, model=model, msg_id=msg_id, tool_id=tool_id))

    def _side_turn(self, body: dict[str, Any]) -> TextTurn:
        # A structured-output helper (the session title) gets JSON matching its schema.
        output_config = body.get("output_config")
        fmt = output_config.get("format") if isinstance(output_config, dict) else None
        if isinstance(fmt, dict) and "schema" in fmt:
            return TextTurn(json.dumps(json_for_schema(fmt["schema"], self.side_text)), 1, 1)
        return TextTurn(self.side_text, 1, 1)
