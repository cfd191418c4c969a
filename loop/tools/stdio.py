"""``python -m loop mcp``: every tool over stdio, until stdin closes or a signal comes.

The SDK reads stdin in a worker thread, and a thread blocked in ``read`` cannot be
cancelled: on its own, the server would stop only when the client closes stdin. So
fd 0 becomes a pipe that this process feeds from the real stdin in a cancellable
task. On SIGINT or SIGTERM the feed stops and closes the pipe, the SDK reads EOF and
the server ends as if the client had closed stdin; the command then exits 130. When
stdin is something the event loop cannot wait on (a regular file, ``/dev/null``), nothing
is put in front of it: reading it never blocks.
"""

from __future__ import annotations

import os
import selectors
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import structlog

from loop.tools.base import ToolContext
from loop.tools.mcp_server import build_server

__all__ = ["serve_stdio"]

log = structlog.get_logger(__name__)

CHUNK = 1 << 16


async def serve_stdio(ctx: ToolContext) -> int | None:
    """Serve every tool over stdio for ``ctx``.

    Returns:
        ``None`` when the client closed stdin; the signal's number when SIGINT or
        SIGTERM stopped the server.
    """
    server = build_server(ctx)
    log.info(
        "mcp.serving",
        tools=len(server.catalog),
        tasks_file=str(ctx.tasks_file),
        workspace=str(ctx.workspace),
        experiences=str(ctx.experiences_base),
        events_file=str(ctx.events_file) if ctx.events_file else None,
    )
    received: list[int] = []
    async with _fed_stdin() as close_stdin, anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, close_stdin, tg.cancel_scope, received)
        await server.run_stdio_async()
        tg.cancel_scope.cancel()
    return received[0] if received else None


async def _stop_on_signal(
    close_stdin: Callable[[], None] | None, scope: anyio.CancelScope, received: list[int]
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            received.append(signum)
            log.info("mcp.stopping", signal=signum)
            if close_stdin is None:
                scope.cancel()  # stdin is a file: the SDK's read returns by itself
            else:
                close_stdin()  # the SDK reads EOF and ends its server
            return


@asynccontextmanager
async def _fed_stdin() -> AsyncIterator[Callable[[], None] | None]:
    """fd 0 is a pipe fed from the real stdin until the yielded function is called.

    Yields ``None`` (and changes nothing) when the event loop cannot wait on stdin.
    """
    if not _pollable(0):
        yield None
        return
    source = os.dup(0)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.dup2(read_end, 0)
    os.close(read_end)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_feed, source, write_end)
            try:
                yield tg.cancel_scope.cancel
            finally:
                tg.cancel_scope.cancel()
    finally:
        os.dup2(source, 0)
        os.close(source)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (pipes, sockets, terminals: yes; regular
    files and ``/dev/null``: no, their reads never block)."""
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


async def _feed(source: int, sink: int) -> None:
    """Copy ``source`` to ``sink`` until EOF or cancellation; then close ``sink``."""
    try:
        while True:
            await anyio.wait_readable(source)
            data = memoryview(os.read(source, CHUNK))
            if not data:
                return
            while data:
                try:
                    data = data[os.write(sink, data) :]
                except BlockingIOError:  # the SDK has not read the last chunk yet
                    await anyio.wait_writable(sink)
    except BrokenPipeError:
        return
    finally:
        os.close(sink)
