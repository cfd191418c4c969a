"""The session's MCP endpoint: every tool served once per run, on loopback, over HTTP.

While a loop runs, :class:`SessionEndpoint` serves every registered tool over MCP
streamable HTTP on ``http://127.0.0.1:PORT/mcp`` (a free port), with the official
SDK's app behind uvicorn. The runner starts it with ``await tg.start(endpoint.serve)``
before the first iteration and stops it when the run ends, so a hat's agent never
starts before the tools are there, and no iteration starts a server of its own.

As an :class:`~loop.extensions.Extension` it hands each iteration's child processes
``LOOP_MCP_URL`` and ``LOOP_MCP_TOKEN``, a secret made for that iteration and
revoked when its backend call ends (:mod:`loop.tools.grants`). Every request must
present a live secret (``Authorization: Bearer <token>``); any other gets 401 and
reaches nothing. A call runs in the context of the iteration its secret names:
``emit_event`` appends to that iteration's events file.

The server is stateless (each POST stands alone, answered as JSON): nothing is kept
between an agent's requests, so an agent that exits leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import anyio
import structlog
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.mcpserver import Context
from starlette.types import ASGIApp, Receive, Scope, Send

from loop.errors import SessionError, ToolError
from loop.extensions import Extension, RunningIteration
from loop.locations import ENV_MCP_TOKEN, ENV_MCP_URL
from loop.tools.base import Tool, ToolContext
from loop.tools.catalog import Catalog
from loop.tools.grants import GrantTable
from loop.tools.mcp_server import HatloopMCPServer

__all__ = ["HOST", "PATH", "SessionEndpoint"]

log = structlog.get_logger(__name__)

HOST = "127.0.0.1"
PATH = "/mcp"
STOP_SECONDS = 3  # how long requests still running at the end may take to finish


class _GrantedServer(HatloopMCPServer):
    """Runs each call in the context of the iteration its secret names."""

    def __init__(self, grants: GrantTable, base: ToolContext, catalog: Catalog) -> None:
        super().__init__(base, catalog)
        self.grants = grants

    def tool_context(self, context: Context[Any, Any] | None) -> ToolContext:
        """The calling iteration's context, looked up again at call time (it may be over)."""
        headers = context.headers if context is not None else None
        grant = self.grants.authorize(headers.get("authorization") if headers else None)
        if grant is None:
            raise ToolError(
                "not_authorized",
                "this secret is no longer valid: the iteration it was made for has ended",
            )
        return grant.context


class _RequireGrant:
    """ASGI middleware: a request without a live secret gets 401 and goes no further."""

    def __init__(self, app: ASGIApp, grants: GrantTable) -> None:
        self.app = app
        self.grants = grants

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
        )
        grant = self.grants.authorize(authorization)
        if grant is None:
            log.warning(
                "mcp.http.unauthorized",
                method=scope.get("method"),
                path=scope.get("path"),
                presented=authorization is not None,
            )
            await _unauthorized(send)
            return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"error": "invalid_token", "error_description": "a valid LOOP_MCP_TOKEN is required"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="hatloop", error="invalid_token"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Uvicorn(uvicorn.Server):
    """uvicorn inside the loop: the runner owns the signals; startup is observable."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave SIGINT and SIGTERM to the runner (uvicorn would take them over)."""
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start listening, then say so."""
        await super().startup(sockets)
        self.ready.set()


class SessionEndpoint(Extension):
    """Serves every tool to the session's agents; see the module docstring.

    Args:
        base: the loop's tool context (where the tasks file and workspace live).
        tools: the tools to serve (default: every registered tool, listed from the
            cached catalog).
        off: the domains ``loop.toml`` turns off (``tasks``...): their tools are not
            served (their calls are unknown tools), as their requests on the bus are
            answered ``domain_off``.
    """

    name = "mcp-endpoint"

    def __init__(
        self,
        base: ToolContext,
        tools: Mapping[str, Tool] | None = None,
        *,
        off: Collection[str] = (),
    ) -> None:
        self.grants = GrantTable(base)
        catalog = (Catalog.load() if tools is None else Catalog.of(tools)).without(off)
        self.server = _GrantedServer(self.grants, base, catalog)
        self.url: str | None = None

    def child_env(self, iteration: RunningIteration) -> Mapping[str, str]:
        """``LOOP_MCP_URL`` and a new secret for ``iteration`` (nothing before serving)."""
        if self.url is None:
            return {}
        return {ENV_MCP_URL: self.url, ENV_MCP_TOKEN: self.grants.mint(iteration)}

    def release_child_env(self, iteration: RunningIteration) -> None:
        """Revoke ``iteration``'s secret: its agent's later requests get 401."""
        self.grants.revoke(iteration)

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started(url)`` once requests are answered.

        Raises:
            SessionError: no loopback port could be bound.
        """
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            raise SessionError(
                f"cannot serve hatloop's tools on {HOST}: {exc.strerror or exc}"
            ) from exc
        with sock:
            url = f"http://{HOST}:{sock.getsockname()[1]}{PATH}"
            app = self.server.streamable_http_app(
                streamable_http_path=PATH, stateless_http=True, json_response=True, host=HOST
            )
            config = uvicorn.Config(
                _RequireGrant(app, self.grants),
                lifespan="off",  # the session manager runs below, in this task
                log_config=None,
                access_log=False,
                ws="none",
                server_header=False,
                timeout_graceful_shutdown=STOP_SECONDS,
            )
            server = _Uvicorn(config)
            async with self.server.session_manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(_run_until_told, server, sock)
                try:
                    await server.ready.wait()
                    self.url = url
                    log.info("mcp.http.serving", url=url, tools=len(self.server.catalog))
                    task_status.started(url)
                    await anyio.sleep_forever()
                finally:
                    self.url = None
                    server.should_exit = True  # uvicorn finishes what it serves, then stops


async def _run_until_told(server: _Uvicorn, sock: socket.socket) -> None:
    # Shielded: cancelling uvicorn halfway would leave its connections open; it stops
    # when told (should_exit) and gives running requests STOP_SECONDS to finish.
    with anyio.CancelScope(shield=True):
        await server.serve(sockets=[sock])
