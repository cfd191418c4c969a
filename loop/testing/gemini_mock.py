"""A local mock of the Gemini API for driving the real Gemini CLI offline.

Point the CLI at it with ``GOOGLE_GEMINI_BASE_URL=mock.base_url``, any ``GEMINI_API_KEY``
and the API-key auth type chosen in its settings (see :func:`cli_settings`). Scripted
turns answer the conversation's requests
(``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse``) in order, as one SSE chunk::

    with MockGemini(turns=[ToolUseTurn("run_shell_command", {"command": "ls"}), "done"]) as mock:
        ...
        assert mock.turn_requests[-1].tool_results()   # the functionResponse parts

Side requests do not consume a turn: ``:generateContent`` (the CLI's own helpers: model
routing, the next-speaker check, summaries) gets JSON fitting the request's
``responseJsonSchema`` (or ``responseSchema``), else ``side_text``; ``:countTokens``
gets ``{"totalTokens": N}``. An :class:`ErrorTurn` with a status answers that HTTP error
in Google's shape (``{"error": {"code", "message", "status"}}``); with ``status=None``
the stream carries the error instead of a candidate.
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
    "MockGemini",
    "StallTurn",
    "TextTurn",
    "ToolUseTurn",
    "Turn",
    "classify_request",
    "cli_settings",
    "response_json",
    "shell_call",
]

DEFAULT_MODEL = "gemini-mock"

# Google's status names for the HTTP codes a test is likely to script.
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def cli_settings() -> dict[str, Any]:
    """The Gemini CLI settings that make it use an API key (and so the mock's base URL).

    With only ``GOOGLE_GEMINI_BASE_URL`` set, Gemini CLI 0.61 picks its "gateway" auth
    type and a headless run exits 41; the API-key type reads the key and the base URL
    from the environment.
    """
    return {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def shell_call(command: str, description: str = "run a command") -> ToolUseTurn:
    """A turn that runs ``command`` through the CLI's shell tool (``run_shell_command``)."""
    return ToolUseTurn("run_shell_command", {"command": command, "description": description})


def classify_request(method: str, path: str, body: Any) -> RequestKind:
    """A streamed conversation request is a turn; ``generateContent`` is a side request."""
    if method != "POST":
        return "other"
    route = path.split("?", 1)[0].rstrip("/")
    if route.endswith(":streamGenerateContent"):
        return "turn"
    if route.endswith(":generateContent"):
        return "side"
    if route.endswith(":countTokens"):
        return "count_tokens"
    return "other"


def _parts(turn: TextTurn | ToolUseTurn) -> list[dict[str, Any]]:
    if isinstance(turn, TextTurn):
        return [{"text": turn.text}]
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
    parts.append({"functionCall": {"name": turn.name, "args": turn.input}})
    return parts


def response_json(turn: TextTurn | ToolUseTurn, *, model: str, response_id: str) -> dict[str, Any]:
    """A ``GenerateContentResponse`` for ``turn`` (one SSE chunk, or the whole answer)."""
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": _parts(turn)},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": turn.input_tokens,
            "candidatesTokenCount": turn.output_tokens,
            "totalTokenCount": turn.input_tokens + turn.output_tokens,
        },
        "modelVersion": model,
        "responseId": response_id,
    }


def _error_body(turn: ErrorTurn) -> dict[str, Any]:
    code = turn.status or 500
    status = turn.error_type or _STATUS_NAMES.get(code, "UNKNOWN")
    return {"error": {"code": code, "message": turn.message, "status": status, **turn.error_fields}}


def _model_of(path: str, default: str) -> str:
    route = path.split("?", 1)[0]
    name = route.rsplit("/models/", 1)[-1] if "/models/" in route else ""
    return name.split(":", 1)[0] or default


class MockGemini(MockServer):
    """A threaded HTTP server on 127.0.0.1 that plays scripted Gemini API turns.

    Args:
        turns: served in order to streamed requests; a plain string is a :class:`TextTurn`.
        default: the answer once the script is exhausted (a string or any turn).
        side_text: the answer to side requests without a schema.
        model: the model name reported when the path names none.
        conversations: each its own script, for agents running at once (see
            :class:`~loop.testing.mock_api.MockServer`).
    """

    name = "mock_gemini"
    default_model = DEFAULT_MODEL
    classify_request = staticmethod(classify_request)

    def answer(self, reply: Reply, request: RecordedRequest) -> None:
        """Count tokens, answer a side request, or play the next turn."""
        body = request.body if isinstance(request.body, dict) else {}
        if request.kind == "count_tokens":
            reply.json(200, {"totalTokens": max(1, len(request.text) // 4)})
            return
        if request.kind == "other":
            reply.json(200, {})
            return
        model = _model_of(request.path, self.model)
        response_id = f"mock-{self.new_id():04d}"
        if request.kind == "side":
            reply.json(
                200, response_json(self._side_turn(body), model=model, response_id=response_id)
            )
            return
        turn = self.next_turn(request)
        if isinstance(turn, StallTurn):
            self.stall(reply)
        elif isinstance(turn, ErrorTurn) and turn.status is not None:
            reply.json(turn.status, _error_body(turn), turn.headers)
        elif isinstance(turn, ErrorTurn):
            reply.sse([(None, _error_body(turn))])
        else:
            reply.sse([(None, response_json(turn, model=model, response_id=response_id))])

    def _side_turn(self, body: dict[str, Any]) -> TextTurn:
        config = body.get("generationConfig")
        config = config if isinstance(config, dict) else {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if isinstance(schema, dict):
            return TextTurn(json.dumps(json_for_schema(schema, self.side_text)), 1, 1)
        return TextTurn(self.side_text, 1, 1)
