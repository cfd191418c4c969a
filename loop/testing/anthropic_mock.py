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
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

import structlog

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

log = structlog.get_logger(__name__)

RequestKind = Literal["turn", "side", "count_tokens", "other"]

DEFAULT_MODEL = "claude-mock"


@dataclass(frozen=True, slots=True)
class TextTurn:
    """The model answers with text and ends its turn."""

    text: str
    input_tokens: int = 10
    output_tokens: int = 5


@dataclass(frozen=True, slots=True)
class ToolUseTurn:
    """The model calls one tool (optionally after some text) and waits for its result."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    id: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5


@dataclass(frozen=True, slots=True)
class ErrorTurn:
    """The API fails: an HTTP error status, or (``status=None``) an SSE ``error`` event.

    Claude Code retries 5xx and 429 answers; a 4xx such as 400 is final.
    """

    status: int | None = 400
    error_type: str = "invalid_request_error"
    message: str = "mock error"


@dataclass(frozen=True, slots=True)
class StallTurn:
    """The API accepts the request and never answers (until the mock closes).

    Use it to test timeouts and cancellation: the client hangs in a known state.
    """


Turn = TextTurn | ToolUseTurn | ErrorTurn | StallTurn


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request the mock received, with its JSON body when it had one."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: RequestKind

    @property
    def text(self) -> str:
        """The body as JSON text (handy for substring assertions)."""
        return json.dumps(self.body, ensure_ascii=False) if self.body is not None else ""

    def user_texts(self) -> list[str]:
        """Every text block (and plain string content) of the user messages, in order."""
        out: list[str] = []
        body = self.body if isinstance(self.body, dict) else {}
        for msg in body.get("messages", []):
            if not isinstance(msg, dict) or msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.extend(
                    str(b.get("text", ""))
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "text"
                )
        return out

    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks sent back to the model in this request."""
        body = self.body if isinstance(self.body, dict) else {}
        return [
            b
            for msg in body.get("messages", [])
            if isinstance(msg, dict) and isinstance(msg.get("content"), list)
            for b in msg["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]


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


def json_for_schema(schema: Any, text: str) -> Any:
    """A small value that satisfies a JSON schema (strings become ``text``)."""
    if not isinstance(schema, dict):
        return text
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if not isinstance(kind, str):  # absent, or a list of types: a string is the safe answer
        return text
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: json_for_schema(sub, text) for name, sub in props.items()}
    scalars: dict[Any, Any] = {"array": [], "integer": 0, "number": 0, "boolean": False}
    return scalars.get(kind, None if kind == "null" else text)


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
    return {"type": "error", "error": {"type": turn.error_type, "message": turn.message}}


class MockAnthropic:
    """A threaded HTTP server on 127.0.0.1 that plays scripted Messages API turns.

    Args:
        turns: served in order to model requests; a plain string is a :class:`TextTurn`.
        default: the answer once the script is exhausted (a string or any turn).
        side_text: the answer to side requests (quota probes, titles).
        model: the model name reported when a request names none.
    """

    def __init__(
        self,
        turns: Iterable[Turn | str] = (),
        *,
        default: Turn | str = "(mock: no scripted turn left)",
        side_text: str = "ok",
        model: str = DEFAULT_MODEL,
    ) -> None:
        self._turns: list[Turn] = [_as_turn(t) for t in turns]
        self.default: Turn = _as_turn(default)
        self.side_text = side_text
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.exhausted = False
        self._served = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        #: set when a :class:`StallTurn` is being served (the client is now hanging)
        self.stalled = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> MockAnthropic:
        """Bind an ephemeral port and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError("MockAnthropic is already running")
        self._closing.clear()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        # A short poll interval makes close() (shutdown) return quickly.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="mock-anthropic", daemon=True
        )
        self._thread.start()
        log.debug("mock_anthropic.started", base_url=self.base_url)
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._server is None:
            return
        self._closing.set()  # releases handlers parked on a StallTurn
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> MockAnthropic:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the value for ``ANTHROPIC_BASE_URL``)."""
        if self._server is None:
            raise RuntimeError("MockAnthropic is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- script ----------------------------------------------------------------------

    def add_turns(self, *turns: Turn | str) -> None:
        """Append turns to the script (thread-safe)."""
        with self._lock:
            self._turns.extend(_as_turn(t) for t in turns)

    @property
    def turn_requests(self) -> list[RecordedRequest]:
        """The recorded model requests that were served a scripted (or default) turn."""
        with self._lock:
            return [r for r in self.requests if r.kind == "turn"]

    @property
    def remaining(self) -> int:
        """How many scripted turns are still unserved."""
        with self._lock:
            return len(self._turns) - self._served

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_turn(self) -> Turn:
        with self._lock:
            if self._served < len(self._turns):
                turn = self._turns[self._served]
                self._served += 1
                return turn
            if not self.exhausted:
                log.warning("mock_anthropic.exhausted", served=self._served)
            self.exhausted = True
            return self.default

    def _new_ids(self) -> tuple[str, str]:
        n = next(self._ids)
        return f"msg_mock_{n:04d}", f"toolu_mock_{n:04d}"


def _as_turn(turn: Turn | str) -> Turn:
    return TextTurn(turn) if isinstance(turn, str) else turn


def _side_turn(mock: MockAnthropic, body: dict[str, Any]) -> TextTurn:
    # A structured-output helper (the session title) gets JSON matching its schema.
    output_config = body.get("output_config")
    fmt = output_config.get("format") if isinstance(output_config, dict) else None
    if isinstance(fmt, dict) and "schema" in fmt:
        return TextTurn(json.dumps(json_for_schema(fmt["schema"], mock.side_text)), 1, 1)
    return TextTurn(mock.side_text, 1, 1)


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _handler_for(mock: MockAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the stdlib's per-request stderr lines (requests are logged below)."""

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("request-id", "req_mock")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _send_json(self, status: int, obj: Any) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:
            mock._record(RecordedRequest("GET", self.path, dict(self.headers), None, "other"))
            self._send_json(200, {})

        def do_HEAD(self) -> None:
            mock._record(RecordedRequest("HEAD", self.path, dict(self.headers), None, "other"))
            self._send_json(200, {})

        def do_POST(self) -> None:
            raw = _read_body(self)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            kind = classify_request("POST", self.path, body)
            mock._record(RecordedRequest("POST", self.path, dict(self.headers), body, kind))
            log.debug(
                "mock_anthropic.request",
                path=self.path,
                kind=kind,
                model=body.get("model") if isinstance(body, dict) else None,
            )
            if kind == "count_tokens":
                self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
            elif kind == "other":
                self._send_json(200, {})
            else:
                fields = body if isinstance(body, dict) else {}
                turn = mock._next_turn() if kind == "turn" else _side_turn(mock, fields)
                self._answer(turn, fields)

        def _answer(self, turn: Turn, body: dict[str, Any]) -> None:
            if isinstance(turn, StallTurn):
                mock.stalled.set()
                mock._closing.wait()
                self.close_connection = True
                return
            if isinstance(turn, ErrorTurn):
                if turn.status is not None:
                    self._send_json(turn.status, _error_body(turn))
                else:
                    self._send_sse([("error", _error_body(turn))])
                return
            model = str(body.get("model") or mock.model)
            msg_id, tool_id = mock._new_ids()
            if body.get("stream"):
                self._send_sse(sse_events(turn, model=model, msg_id=msg_id, tool_id=tool_id))
            else:
                self._send_json(
                    200, message_json(turn, model=model, msg_id=msg_id, tool_id=tool_id)
                )

        def _send_sse(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
            payload = "".join(
                f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events
            )
            self._send(200, payload.encode(), "text/event-stream")

    return Handler
