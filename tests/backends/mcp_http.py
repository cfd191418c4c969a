"""A streamable-HTTP MCP server of hatloop's tools with a bearer check, for the agent tests.

The loop serves its tools to a session's agents on loopback, with a per-session secret;
the backends point each CLI at ``LOOP_MCP_URL`` with ``Authorization: Bearer
$LOOP_MCP_TOKEN``. This stand-in serves the same tools (the SDK's
``streamable_http_app`` under uvicorn, in a thread) so that the CLIs' HTTP configuration
is checked against a real server: a request without the token gets 401.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import uvicorn

from loop.tools.base import ToolContext
from loop.tools.mcp_server import build_server

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def bearer_only(app: ASGIApp, token: str, refused: list[str]) -> ASGIApp:
    """``app`` behind a check of ``Authorization: Bearer <token>`` (401 otherwise)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != expected:
                refused.append(str(scope.get("path")))
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"missing or wrong token"})
                return
        await app(scope, receive, send)

    return guarded


@dataclass
class HttpMCP:
    """hatloop's MCP tools for ``ctx`` on ``http://127.0.0.1:PORT/mcp``, token required."""

    ctx: ToolContext
    token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    refused: list[str] = field(default_factory=list)
    port: int = 0
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint (``LOOP_MCP_URL``)."""
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def env(self) -> dict[str, str]:
        """``LOOP_MCP_URL`` and ``LOOP_MCP_TOKEN`` for an iteration's environment."""
        return {"LOOP_MCP_URL": self.url, "LOOP_MCP_TOKEN": self.token}

    def __enter__(self) -> HttpMCP:
        app = build_server(self.ctx).streamable_http_app()
        # Listening before the thread starts: a client that connects early waits in the
        # socket's backlog until uvicorn accepts, so no start-up wait is needed here.
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            bearer_only(app, self.token, self.refused), log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="mcp-http", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
