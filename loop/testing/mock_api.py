"""What the local mock model APIs share: scripted turns, the recorded requests, the server.

Each mock (:mod:`~loop.testing.anthropic_mock`, :mod:`~loop.testing.gemini_mock`,
:mod:`~loop.testing.openai_mock`) is a :class:`MockServer` subclass that knows one wire
format: how to tell a scripted model turn from a side request, and how to write a turn
as that API's answer. The script, its default once exhausted, the request log, stalls
and the threaded HTTP server on 127.0.0.1 live here, once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

import structlog

__all__ = [
    "ErrorTurn",
    "MockServer",
    "RecordedRequest",
    "RequestKind",
    "StallTurn",
    "TextTurn",
    "ToolUseTurn",
    "Turn",
    "json_for_schema",
]

log = structlog.get_logger(__name__)

RequestKind = Literal["turn", "side", "count_tokens", "other"]


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
    """The API fails: an HTTP error status, or (``status=None``) an error inside the stream.

    ``error_type`` is the API's own error name (Anthropic ``invalid_request_error``,
    Gemini ``RESOURCE_EXHAUSTED``, OpenAI ``server_error``...); ``None`` lets each mock
    pick the usual one for the status. ``headers`` go with an HTTP error (``retry-after``,
    Anthropic's ``anthropic-ratelimit-unified-reset``...); ``error_fields`` are added to the
    error object (Google's ``details`` list of RetryInfo and QuotaFailure, OpenAI's
    ``resets_in_seconds``...).
    """

    status: int | None = 400
    error_type: str | None = None
    message: str = "mock error"
    headers: dict[str, str] = field(default_factory=dict)
    error_fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StallTurn:
    """The API accepts the request and never answers (until the mock closes).

    Use it to test timeouts and cancellation: the client hangs in a known state.
    """


Turn = TextTurn | ToolUseTurn | ErrorTurn | StallTurn


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request a mock received, with its JSON body when it had one.

    The helpers that read a body (``user_texts``, ``tool_results``) know every mock's
    format: Anthropic ``messages``, Gemini ``contents`` and OpenAI Responses ``input``.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: RequestKind

    @property
    def text(self) -> str:
        """The body as JSON text (handy for substring assertions)."""
        return json.dumps(self.body, ensure_ascii=False) if self.body is not None else ""

    def _body(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}

    def user_texts(self) -> list[str]:
        """Every text the user (or the CLI on its behalf) sent in this request, in order."""
        out: list[str] = []
        body = self._body()
        for msg in body.get("messages", []):  # Anthropic
            if isinstance(msg, dict) and msg.get("role") == "user":
                out.extend(_texts(msg.get("content"), "text"))
        for msg in body.get("contents", []):  # Gemini
            if isinstance(msg, dict) and msg.get("role") == "user":
                parts = msg.get("parts") or []
                out.extend(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)
        items = body.get("input")  # OpenAI Responses
        for msg in items if isinstance(items, list) else []:
            if isinstance(msg, dict) and msg.get("role") == "user":
                out.extend(_texts(msg.get("content"), "input_text"))
        return out

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results sent back to the model in this request, in order.

        Anthropic ``tool_result`` blocks, Gemini ``functionResponse`` parts and OpenAI
        ``function_call_output`` items, each as the API wrote it.
        """
        out: list[dict[str, Any]] = []
        body = self._body()
        for msg in [*body.get("messages", []), *body.get("contents", [])]:
            if not isinstance(msg, dict):
                continue
            for block in msg.get("content") or msg.get("parts") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append(block)
                elif isinstance(block, dict) and isinstance(block.get("functionResponse"), dict):
                    out.append(block["functionResponse"])
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out.append(item)
        return out


def _texts(content: Any, block_type: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        str(b.get("text", ""))
        for b in content
        if isinstance(b, dict) and b.get("type") == block_type
    ]


def json_for_schema(schema: Any, text: str) -> Any:
    """A small value that satisfies a JSON schema (strings become ``text``)."""
    if not isinstance(schema, dict):
        return text
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, str):
        kind = kind.lower()  # Gemini's own schema type names are upper case (OBJECT)
    else:  # absent, or a list of types: a string is the safe answer
        return text
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: json_for_schema(sub, text) for name, sub in props.items()}
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)  # Gemini CLI's router asks for a score of at least 1
        return low if isinstance(low, int | float) else 0
    scalars: dict[Any, Any] = {"array": [], "boolean": False}
    return scalars.get(kind, None if kind == "null" else text)


def as_turn(turn: Turn | str) -> Turn:
    """A plain string is a :class:`TextTurn`."""
    return TextTurn(turn) if isinstance(turn, str) else turn


class MockServer:
    """A threaded HTTP server on 127.0.0.1 that plays scripted model turns.

    Subclasses say how requests are classified (:attr:`classify_request`, or
    :meth:`classify`) and answered (:meth:`answer`), and name their API's default model
    (:attr:`default_model`); this class keeps the script, the log and the server.

    Args:
        turns: served in order to model requests; a plain string is a :class:`TextTurn`.
        default: the answer once the script is exhausted (a string or any turn).
        side_text: the answer to side requests the CLI makes on its own.
        model: the model name reported when a request names none (default:
            :attr:`default_model`).
        conversations: scripts of their own for agents that talk to the mock at once
            (parallel hats): a model request whose user text contains a key is served
            that key's turns, in order, then ``default``; other requests get ``turns``.
            Every request of a conversation repeats its first user message, so a text
            only that prompt holds (a hat's event payload) names the conversation.
    """

    name = "mock"
    default_model = "mock-model"
    #: how the API's requests are told apart (a pure function of the request)
    classify_request: Callable[[str, str, Any], RequestKind] | None = None

    def __init__(
        self,
        turns: Iterable[Turn | str] = (),
        *,
        default: Turn | str = "(mock: no scripted turn left)",
        side_text: str = "ok",
        model: str | None = None,
        conversations: Mapping[str, Iterable[Turn | str]] | None = None,
    ) -> None:
        self._turns: list[Turn] = [as_turn(t) for t in turns]
        self._conversations: dict[str, list[Turn]] = {
            key: [as_turn(t) for t in script] for key, script in (conversations or {}).items()
        }
        self.default: Turn = as_turn(default)
        self.side_text = side_text
        self.model = model or self.default_model
        self.requests: list[RecordedRequest] = []
        self.exhausted = False
        self._served = 0
        self._ids = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        #: set when a :class:`StallTurn` is being served (the client is now hanging)
        self.stalled = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a subclass defines -----------------------------------------------------

    def classify(self, method: str, path: str, body: Any) -> RequestKind:
        """Which kind of request this is (a scripted turn, a side request...)."""
        if self.classify_request is None:
            raise NotImplementedError
        return self.classify_request(method, path, body)

    def answer(self, reply: Reply, request: RecordedRequest) -> None:
        """Answer a POST: ``reply`` writes the HTTP response."""
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Bind an ephemeral port and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._closing.clear()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        # A short poll interval makes close() (shutdown) return quickly.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name=self.name, daemon=True
        )
        self._thread.start()
        log.debug(f"{self.name}.started", base_url=self.base_url)
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

    def __enter__(self) -> Self:
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
        """``http://127.0.0.1:PORT``."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- script ----------------------------------------------------------------------

    def add_turns(self, *turns: Turn | str) -> None:
        """Append turns to the script (thread-safe)."""
        with self._lock:
            self._turns.extend(as_turn(t) for t in turns)

    @property
    def turn_requests(self) -> list[RecordedRequest]:
        """The recorded model requests that were served a scripted (or default) turn."""
        with self._lock:
            return [r for r in self.requests if r.kind == "turn"]

    @property
    def remaining(self) -> int:
        """How many scripted turns are still unserved (the conversations' too)."""
        with self._lock:
            return len(self._turns) - self._served + sum(map(len, self._conversations.values()))

    def next_turn(self, request: RecordedRequest | None = None) -> Turn:
        """The next turn of ``request``'s conversation or of the shared script; the
        default once that script is exhausted."""
        texts = request.user_texts() if request is not None and self._conversations else []
        with self._lock:
            for key, script in self._conversations.items():
                if any(key in text for text in texts):
                    return script.pop(0) if script else self._exhaust(key)
            if self._served < len(self._turns):
                turn = self._turns[self._served]
                self._served += 1
                return turn
            return self._exhaust(None)

    def _exhaust(self, conversation: str | None) -> Turn:
        # the caller holds the lock
        if not self.exhausted:
            log.warning(f"{self.name}.exhausted", served=self._served, conversation=conversation)
        self.exhausted = True
        return self.default

    def new_id(self) -> int:
        """A fresh number for message and tool-call ids (1, 2, ...)."""
        with self._lock:
            self._ids += 1
            return self._ids

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def stall(self, reply: Reply) -> None:
        """Hold the request open until the mock closes (a :class:`StallTurn`)."""
        self.stalled.set()
        self._closing.wait()
        reply.handler.close_connection = True


class Reply:
    """How an answer is written back (JSON, SSE), wrapping the request's handler."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.handler = handler

    def send(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send ``payload`` with ``status`` and extra ``headers`` (no body for HEAD)."""
        h = self.handler
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(payload)))
        h.send_header("request-id", "req_mock")
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(payload)

    def json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        """Send ``obj`` as JSON."""
        self.send(status, json.dumps(obj).encode(), "application/json", headers)

    def sse(self, events: Sequence[tuple[str | None, Any]]) -> None:
        """Send server-sent events: ``(name, data)`` pairs; a ``None`` name sends data only."""
        chunks = [
            (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
            for name, data in events
        ]
        self.send(200, "".join(chunks).encode(), "text/event-stream")


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


def _handler_for(mock: MockServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the stdlib's per-request stderr lines (requests are logged below)."""

        def do_GET(self) -> None:
            mock._record(RecordedRequest("GET", self.path, dict(self.headers), None, "other"))
            Reply(self).json(200, {})

        def do_HEAD(self) -> None:
            mock._record(RecordedRequest("HEAD", self.path, dict(self.headers), None, "other"))
            Reply(self).json(200, {})

        def do_POST(self) -> None:
            raw = _read_body(self)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            kind = mock.classify("POST", self.path, body)
            request = RecordedRequest("POST", self.path, dict(self.headers), body, kind)
            mock._record(request)
            log.debug(f"{mock.name}.request", path=self.path, kind=kind)
            mock.answer(Reply(self), request)

    return Handler
