"""Watching a child's output while it runs: its lines as they arrive, and its silence.

:func:`~loop.backends._process.run_process` hands an :class:`OutputWatch` every chunk the
child writes: from a pipe as it is read, or, when the output goes to files (see
``_process``), by following the files as they grow. The watch

* splits stdout into lines for ``on_line`` as they arrive (``-v`` shows them), and
* with ``idle_timeout``, notices a child that wrote nothing, on stdout or stderr, for that
  long and cancels the run's scope: ``run_process`` then stops the child's group, as at a
  timeout, and says which limit stopped it.

One watch serves one run of one child.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import IO

import anyio
import anyio.lowlevel
import structlog

__all__ = ["FOLLOW_INTERVAL", "MAX_LINE_BYTES", "OutputWatch"]

log = structlog.get_logger(__name__)

FOLLOW_INTERVAL = 0.1  # seconds between two looks at output files that may have grown
MAX_LINE_BYTES = 1 << 20  # a longer line is not handed on (the captured output keeps it)
_READ_BYTES = 1 << 20  # at most this much of a file is read per look


class OutputWatch:
    """Lines of stdout to ``on_line`` as they arrive; silence measured against
    ``idle_timeout`` (seconds, both streams count).

    Args:
        on_line: called with each complete line of stdout (decoded, without its line end);
            an exception it raises is logged once and the line dropped, never the run.
        on_end: called once the child's output is all read (a reader may flush).
        idle_timeout: stop the child after this long without output (None: never).
    """

    def __init__(
        self,
        *,
        on_line: Callable[[str], None] | None = None,
        on_end: Callable[[], None] | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self.on_line = on_line
        self.on_end = on_end
        self.idle_timeout = idle_timeout
        self.idled = False  # set when the silence limit cancelled the run
        self._last = 0.0
        self._partial = bytearray()
        self._skipping = False  # inside a line longer than MAX_LINE_BYTES
        self._offsets = [0, 0]
        self._files: Sequence[IO[bytes]] = ()
        self._done: anyio.Event | None = None
        self._stopped = False
        self._failed = False

    # -- what arrives ---------------------------------------------------------------

    def feed(self, stream: int, chunk: bytes) -> None:
        """``chunk`` arrived on ``stream`` (0: stdout, 1: stderr)."""
        if not chunk:
            return
        self._last = anyio.current_time()
        if stream == 0 and self.on_line is not None:
            self._split(chunk)

    def stdout(self, chunk: bytes) -> None:
        """``chunk`` arrived on stdout."""
        self.feed(0, chunk)

    def stderr(self, chunk: bytes) -> None:
        """``chunk`` arrived on stderr."""
        self.feed(1, chunk)

    def _grew(self) -> None:
        self._last = anyio.current_time()

    def _split(self, chunk: bytes) -> None:
        buf = self._partial
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if not self._skipping and len(buf) + len(piece) <= MAX_LINE_BYTES:
                buf += piece
                self._hand_on(bytes(buf))
            buf.clear()
            self._skipping = False
            start = end + 1
        rest = chunk[start:]
        if self._skipping or len(buf) + len(rest) > MAX_LINE_BYTES:
            buf.clear()
            self._skipping = True
        else:
            buf += rest

    def _hand_on(self, raw: bytes) -> None:
        if self.on_line is not None:
            self._call(self.on_line, raw.decode("utf-8", errors="replace").removesuffix("\r"))

    def _call(self, func: Callable[..., None], *args: str) -> None:
        try:
            func(*args)
        except Exception:  # whoever looks at the output never breaks the run
            if not self._failed:
                self._failed = True
                log.exception("an output observer failed; what it was given is dropped")

    def poll(self) -> None:
        """Read what the followed files gained since the last look."""
        for stream, file in enumerate(self._files):
            try:
                fd = file.fileno()
                size = os.fstat(fd).st_size
                if size > self._offsets[stream] and (stream == 1 or self.on_line is None):
                    self._offsets[stream] = size  # only that it grew matters
                    self._grew()
                while size > self._offsets[stream]:
                    offset = self._offsets[stream]
                    data = os.pread(fd, min(_READ_BYTES, size - offset), offset)
                    if not data:
                        break
                    self._offsets[stream] += len(data)
                    self.feed(stream, data)
            except (OSError, ValueError):  # closed meanwhile: nothing more to follow
                continue

    # -- the run --------------------------------------------------------------------

    async def run(self, scope: anyio.CancelScope, files: Sequence[IO[bytes]] = ()) -> None:
        """Follow ``files`` (stdout, stderr), if given, and cancel ``scope`` once the child
        has been silent for ``idle_timeout``; return when :meth:`stopped` is called."""
        self._files = files
        self._last = anyio.current_time()
        self._done = done = anyio.Event()
        if self._stopped:
            return
        async with anyio.create_task_group() as tg:
            if files:
                tg.start_soon(self._follow)
            if self.idle_timeout is not None:
                tg.start_soon(self._guard, scope, self.idle_timeout)
            await done.wait()
            tg.cancel_scope.cancel()

    async def _follow(self) -> None:
        while True:
            self.poll()
            await anyio.sleep(FOLLOW_INTERVAL)

    async def _guard(self, scope: anyio.CancelScope, idle: float) -> None:
        while True:
            left = self._last + idle - anyio.current_time()
            if left <= 0:
                self.poll()  # a late look may find output a busy machine kept from us
                await anyio.lowlevel.checkpoint()  # and a pipe's reader its last turn
                left = self._last + idle - anyio.current_time()
                if left <= 0:
                    self.idled = True
                    scope.cancel()
                    return
            await anyio.sleep(left)

    def stopped(self) -> None:
        """The child has exited: stop following and guarding."""
        self._stopped = True
        if self._done is not None:
            self._done.set()

    def finish(self) -> None:
        """Everything is read: take the files' last bytes, hand on a last unended line,
        and tell ``on_end``."""
        self.poll()
        if self._partial and not self._skipping and self.on_line is not None:
            self._hand_on(bytes(self._partial))
        self._partial.clear()
        if self.on_end is not None:
            self._call(self.on_end)
