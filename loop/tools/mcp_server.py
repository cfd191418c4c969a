"""The MCP adapter: every registered tool served over the Model Context Protocol.

:class:`HatloopMCPServer` is the official SDK's server over a tool
:class:`~loop.tools.catalog.Catalog`: ``python -m loop mcp`` serves it over stdio
(:mod:`loop.tools.stdio`), a running loop over HTTP (:mod:`loop.tools.endpoint`).
Each tool keeps the seed's name; its input model's fields (aliases
where set) are the tool's top-level arguments, its input and output models are the
published schemas, and a result is the output model as ``structured_content`` (and
the same JSON as text). Calls go through :meth:`Tool.run`, the one implementation the
CLI and the bus use too, in a worker thread, so the domains' file locks make
concurrent calls safe.

A failure the caller can act on comes back as a tool error (``is_error``) whose text
is the structured error ``{"error": {"code", "message", "details"}}`` as JSON, the
error's own :meth:`~loop.errors.LoopError.to_dict`: bad arguments (``invalid_input``,
naming the fields), a domain's :class:`ToolError`, or any other :class:`LoopError`
with its class's code. A bug is logged with its traceback on stderr and reported as
:class:`~loop.errors.InternalError` (``internal_error``) without its text. Nothing but
the protocol is written to stdout.

Over stdio, a tool call on a line the SDK's JSON parser refuses although it is JSON (a
lone surrogate, ``"\\ud800"``) is read again (:func:`_reread`), so it is answered, with
``invalid_input``; any other line the SDK drops is logged as ``mcp.message_dropped``.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    JSONRPCMessage,
    JSONRPCRequest,
    TextContent,
    jsonrpc_message_adapter,
)
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, ValidationError

from loop import _json
from loop._version import __version__
from loop.errors import InternalError, LoopError, ToolError
from loop.tools.base import Tool, ToolContext
from loop.tools.catalog import Catalog, tool_definition

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream

__all__ = ["SERVER_NAME", "HatloopMCPServer", "build_server", "tool_definition"]

log = structlog.get_logger(__name__)

SERVER_NAME = "hatloop"

INSTRUCTIONS = (
    "hatloop's tools: tasks (createTask, startTask, completeTask...), the theme lifecycle "
    "(preview_next_theme, start_theme, end_theme...), experience export and import "
    "(export_experience_*, list_experiences...), and, inside a loop iteration, emit_event "
    "and get_session_status. A failed call returns a tool error whose text is JSON: "
    '{"error": {"code": ..., "message": ..., "details": ...}}; read the message, fix the '
    "arguments or the order of calls, and try again."
)


def _accepts_text(annotation: Any) -> bool:
    if annotation is str or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _accepts_text(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_accepts_text(arg) for arg in typing.get_args(annotation))
    return origin is typing.Literal and any(isinstance(a, str) for a in typing.get_args(annotation))


def pre_parse(model: type[BaseModel], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Decode JSON text given for an object or array argument that takes no text.

    Some clients send structured arguments as JSON strings (the SDK's own tools accept
    that too). A field that accepts text keeps its string as it is.

    Raises:
        ToolError: ``invalid_input`` when the text is JSON nested deeper than
            :data:`loop._json.INPUT_DEPTH` (it names the argument).
    """
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    out = dict(arguments)
    for key, value in arguments.items():
        info = fields.get(key)
        if info is None or not isinstance(value, str) or _accepts_text(info.annotation):
            continue
        if not value.lstrip().startswith(("{", "[")):
            continue
        try:
            decoded = _json.loads(value, max_depth=_json.INPUT_DEPTH)
        except _json.TooDeep as exc:
            raise ToolError("invalid_input", f"{key}: JSON {exc.msg}") from exc
        except ValueError:
            continue  # not JSON after all: validation names the field
        if isinstance(decoded, dict | list):
            out[key] = decoded
    return out


def _text_result(data: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps(data, ensure_ascii=False)
    if is_error:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _reread(refused: Exception) -> JSONRPCMessage | None:
    """The tool call on a line the SDK's JSON parser refused, read with :mod:`loop._json`.

    JSON text may spell a lone surrogate (``"\\ud800"``): it is valid JSON, which Python
    reads, but the SDK's parser refuses the whole line, and the SDK drops it without a
    reply. Read again here, the call reaches its tool, which refuses such text as
    ``invalid_input`` (:meth:`Tool.parse_input`), so the reply never repeats it. Only a
    ``tools/call`` is read again: the SDK's replies to other requests may repeat their
    text, and a reply that UTF-8 cannot carry is never written. ``None`` for any other
    line (the SDK drops it), and for a call whose request id no reply could carry.
    """
    if not isinstance(refused, ValidationError):
        return None
    errors = refused.errors(include_url=False)
    line = errors[0]["input"] if len(errors) == 1 and errors[0]["type"] == "json_invalid" else None
    if not isinstance(line, str | bytes):
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(
            _json.loads(line, max_depth=_json.MAX_DEPTH), by_name=False
        )
        if not isinstance(message, JSONRPCRequest) or message.method != "tools/call":
            return None
        if isinstance(message.id, str):
            message.id.encode("utf-8")  # the reply repeats it
    except (ValueError, UnicodeEncodeError):  # ValidationError is a ValueError
        return None
    return message


def _first_error(refused: Exception) -> str:
    """What the SDK's parser said of a line, in one line."""
    if isinstance(refused, ValidationError) and (errors := refused.errors(include_url=False)):
        return str(errors[0]["msg"])
    return str(refused).splitlines()[0] if str(refused) else type(refused).__name__


class _Reread:
    """A transport's read stream, each tool call the SDK's parser refused read again
    (:func:`_reread`); any other line it refused is logged, and gets no reply."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception]) -> None:
        self._inner = inner

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's dispatcher reads it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item = await self._inner.receive()
        if not isinstance(item, Exception):
            return item
        message = _reread(item)
        if message is None:
            log.warning("mcp.message_dropped", reason=_first_error(item))
            return item
        return SessionMessage(message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Reread:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Reread:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class HatloopMCPServer(MCPServer[Any]):
    """An :class:`MCPServer` that serves a catalog's tools for one :class:`ToolContext`.

    Tools added with the SDK's own ``@server.tool()`` are served alongside them.
    """

    def __init__(self, ctx: ToolContext, catalog: Catalog) -> None:
        super().__init__(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS)
        self.ctx = ctx
        self.catalog = catalog
        # anyio's Lock is fair: waiters get it in the order they asked (see the docstring).
        self._calls = anyio.Lock()

    async def run_stdio_async(self) -> None:
        """Serve over stdio, as the SDK does, each line its parser refused read again."""
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                _Reread(read_stream),
                write_stream,
                self._lowlevel_server.create_initialization_options(),
            )

    async def list_tools(self) -> list[MCPTool]:
        """The registry's tools first, then any added through the SDK."""
        return [*self.catalog.definitions, *await super().list_tools()]

    def tool_context(self, context: Context[Any, Any] | None) -> ToolContext:
        """The tool context a call runs in: the server's own (a subclass may pick one per
        call, from the request; a :class:`ToolError` here refuses the call)."""
        return self.ctx

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Run a registry tool in a worker thread; other names go to the SDK."""
        if name not in self.catalog:
            if any(t.name == name for t in await super().list_tools()):
                return await super().call_tool(name, arguments, context)
            err = ToolError(
                "unknown_tool",
                f"no tool named {name!r}",
                details={"known": sorted(t.name for t in await self.list_tools())},
            )
            return _text_result(err.to_dict(), is_error=True)
        try:
            # No await before the lock: a call queues in the order its request arrived.
            async with self._calls:
                # Looked up once the call's turn has come: a call queued behind others
                # still runs only in a context that is live then.
                ctx = self.tool_context(context)
                # Not abandoned on cancel: a started write always finishes (atomic either
                # way), and the next call waits for it.
                result = await anyio.to_thread.run_sync(self._run, name, ctx, arguments)
        except LoopError as exc:
            log.info("mcp.tool_error", tool=name, code=exc.code, message=exc.message)
            return _text_result(exc.to_dict(), is_error=True)
        except Exception:
            log.exception("mcp.tool_crashed", tool=name)
            bug = InternalError(f"{name} failed unexpectedly; see the server log")
            return _text_result(bug.to_dict(), is_error=True)
        return _text_result(result.model_dump(mode="json", by_alias=True), is_error=False)

    def _run(self, name: str, ctx: ToolContext, arguments: dict[str, Any]) -> BaseModel:
        """In a worker thread: import the tool's domain if need be, then run it."""
        tool = self.catalog.tool(name)
        return tool.run(ctx, pre_parse(tool.input_model, arguments))


def build_server(ctx: ToolContext, tools: Mapping[str, Tool] | None = None) -> HatloopMCPServer:
    """The MCP server for ``ctx``, serving ``tools`` (default: every registered tool, from
    the cached catalog: a domain is imported when one of its tools is first called)."""
    return HatloopMCPServer(ctx, Catalog.load() if tools is None else Catalog.of(tools))
