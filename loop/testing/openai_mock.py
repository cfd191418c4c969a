"""A local mock of the OpenAI Responses API for driving the real Codex CLI offline.

Point Codex at it with a model provider whose ``base_url`` is ``mock.base_url + "/v1"``
and ``wire_api = "responses"`` (see :func:`codex_provider_config`). Scripted turns answer
``POST /v1/responses`` in order, as an SSE stream ending with ``response.completed``
(which carries the turn's token usage)::

    with MockOpenAI(turns=[shell_call("ls"), "done"]) as mock:
        ...
        assert mock.turn_requests[-1].tool_results()   # the function_call_output items

A :class:`ToolUseTurn` becomes a ``function_call`` item. Codex offers an MCP server's tools
in a namespace (``mcp__hatloop``) and expects the call to name it: a turn named
``mcp__hatloop__createTask`` is sent as ``namespace = "mcp__hatloop"``, ``name =
"createTask"`` when the request offers that namespace. An :class:`ErrorTurn` with a status
answers that HTTP error (``{"error": {"message", "type", "code"}}``); with ``status=None``
the stream ends with ``response.failed`` instead.
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
)

__all__ = [
    "ErrorTurn",
    "MockOpenAI",
    "StallTurn",
    "TextTurn",
    "ToolUseTurn",
    "Turn",
    "classify_request",
    "codex_provider_config",
    "response_events",
    "shell_call",
]

DEFAULT_MODEL = "gpt-mock"
PROVIDER = "mock"


def codex_provider_config(base_url: str, *, env_key: str = "MOCK_OPENAI_KEY") -> str:
    """The ``config.toml`` text that sends Codex's requests to the mock at ``base_url``.

    ``env_key`` names the variable holding the bearer token (set it to anything).
    """
    return (
        f'model = "{DEFAULT_MODEL}"\n'
        f'model_provider = "{PROVIDER}"\n\n'
        f"[model_providers.{PROVIDER}]\n"
        'name = "hatloop mock"\n'
        f'base_url = "{base_url}/v1"\n'
        f'env_key = "{env_key}"\n'
        'wire_api = "responses"\n'
    )


def shell_call(command: str, *, login: bool = True) -> ToolUseTurn:
    """A turn that runs ``command`` through Codex's shell tool (``exec_command``).

    ``login = True`` is Codex's own default (``bash -lc``), the shell that loses a
    virtual environment's PATH on Debian.
    """
    return ToolUseTurn("exec_command", {"cmd": command, "login": login})


def classify_request(method: str, path: str, body: Any) -> RequestKind:
    """``POST .../responses`` is a turn (Codex sends nothing else to the model)."""
    if method != "POST":
        return "other"
    route = path.split("?", 1)[0].rstrip("/")
    return "turn" if route.endswith("/responses") else "other"


def _namespaces(body: dict[str, Any]) -> set[str]:
    tools = body.get("tools")
    offered = tools if isinstance(tools, list) else []
    return {
        str(t.get("name")) for t in offered if isinstance(t, dict) and t.get("type") == "namespace"
    }


def _items(turn: TextTurn | ToolUseTurn, n: int, namespaces: set[str]) -> list[dict[str, Any]]:
    def message(text: str, suffix: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_mock_{n:04d}{suffix}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    if isinstance(turn, TextTurn):
        return [message(turn.text, "")]
    items = [message(turn.text, "a")] if turn.text else []
    call: dict[str, Any] = {
        "type": "function_call",
        "id": f"fc_mock_{n:04d}",
        "call_id": turn.id or f"call_mock_{n:04d}",
        "name": turn.name,
        "arguments": json.dumps(turn.input),
        "status": "completed",
    }
    namespace, sep, name = turn.name.rpartition("__")
    if sep and namespace in namespaces:
        call.update(namespace=namespace, name=name)
    items.append(call)
    return items


def response_events(
    turn: TextTurn | ToolUseTurn,
    *,
    model: str,
    n: int,
    namespaces: frozenset[str] | set[str] = frozenset(),
) -> list[tuple[str, dict[str, Any]]]:
    """The Responses streaming events for ``turn``, as (event name, data) pairs."""
    response_id = f"resp_mock_{n:04d}"
    base = {"id": response_id, "object": "response", "model": model}
    events: list[tuple[str, dict[str, Any]]] = [
        _event("response.created", response={**base, "status": "in_progress", "output": []})
    ]
    items = _items(turn, n, set(namespaces))
    for index, item in enumerate(items):
        events.append(_event("response.output_item.added", output_index=index, item=item))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                _event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=text,
                )
            )
        events.append(_event("response.output_item.done", output_index=index, item=item))
    usage = {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
    done = {**base, "status": "completed", "output": items, "usage": usage}
    events.append(_event("response.completed", response=done))
    return events


def _event(name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return name, {"type": name, **fields}


def _error(turn: ErrorTurn) -> dict[str, Any]:
    status = turn.status or 500
    default = "rate_limit_exceeded" if status == 429 else "server_error"
    if 400 <= status < 500 and status != 429:
        default = "invalid_request_error"
    kind = turn.error_type or default
    return {"message": turn.message, "type": kind, "code": kind, "param": None, **turn.error_fields}


class MockOpenAI(MockServer):
    """A threaded HTTP server on 127.0.0.1 that plays scripted Responses API turns.

    Args:
        turns: served in order to ``/v1/responses`` requests; a string is a :class:`TextTurn`.
        default: the answer once the script is exhausted (a string or any turn).
        model: the model name reported when a request names none.
        conversations: each its own script, for agents running at once (see
            :class:`~loop.testing.mock_api.MockServer`).
    """

    name = "mock_openai"
    default_model = DEFAULT_MODEL
    classify_request = staticmethod(classify_request)

    def answer(self, reply: Reply, request: RecordedRequest) -> None:
        """Play the next turn as an SSE stream (or an HTTP error)."""
        body = request.body if isinstance(request.body, dict) else {}
        if request.kind != "turn":
            reply.json(200, {})
            return
        turn = self.next_turn(request)
        n = self.new_id()
        if isinstance(turn, StallTurn):
            self.stall(reply)
        elif isinstance(turn, ErrorTurn) and turn.status is not None:
            reply.json(turn.status, {"error": _error(turn)}, turn.headers)
        elif isinstance(turn, ErrorTurn):
            failed = {"id": f"resp_mock_{n:04d}", "status": "failed", "error": _error(turn)}
            reply.sse([_event("response.failed", response=failed)])
        else:
            model = str(body.get("model") or self.model)
            reply.sse(response_events(turn, model=model, n=n, namespaces=_namespaces(body)))
