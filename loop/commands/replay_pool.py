"""Runs a suite's recordings: one after the other in this process (``--jobs 1``), or in
worker processes (:mod:`loop.commands.replay_worker`), each replaying one recording at
a time (``--jobs N``).

Structured: the workers belong to one task group, and leaving it (all done, Ctrl-C,
SIGTERM or SIGHUP, an error) stops every worker process before :func:`run_workers` returns or
raises. A worker that dies (a crash, a signal, the OOM killer) gives a ``crashed``
outcome for the recording it was on, with the last lines it wrote to stderr, and a new
worker takes the rest of its share. Workers run in their own session, so a Ctrl-C at
the terminal reaches only this process, which stops them.

Each replay works in a temporary folder. The workers' temporary folders are made inside
one folder this process owns (their ``TMPDIR``) and removes once every worker is gone,
so a worker stopped or killed mid-replay leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import ValidationError

from loop.commands.replay_suite import ReplayJob, ReplayOutcome
from loop.commands.replay_worker import replay_outcome

__all__ = ["OnOutcome", "replay_all", "run_here", "run_workers"]

OnOutcome = Callable[[ReplayOutcome], None]

WORKER = [sys.executable, "-m", "loop.commands.replay_worker"]
MAX_RESULT_BYTES = 64 * 1024 * 1024  # one outcome line (a long diff is still far below)
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL when stopping a worker
TAIL_LINES = 20  # of a worker's stderr, kept for the message when it dies


async def replay_all(jobs: Sequence[ReplayJob], workers: int, on_outcome: OnOutcome) -> None:
    """Replay ``jobs``: here if ``workers`` is 1, else in worker processes."""
    if workers > 1:
        await run_workers(jobs, workers, on_outcome)
    else:
        await run_here(jobs, on_outcome)


async def run_here(jobs: Sequence[ReplayJob], on_outcome: OnOutcome) -> None:
    """Replay ``jobs`` one after the other in this process."""
    for job in jobs:
        on_outcome(await replay_outcome(job))


async def run_workers(jobs: Sequence[ReplayJob], workers: int, on_outcome: OnOutcome) -> None:
    """Replay ``jobs`` in ``workers`` processes; ``on_outcome`` as each one ends."""
    send, receive = anyio.create_memory_object_stream[ReplayJob](max_buffer_size=len(jobs) + 1)
    for job in jobs:
        send.send_nowait(job)
    send.close()
    # removed once the task group is left, when every worker is gone
    with tempfile.TemporaryDirectory(prefix="hatloop-replay-workers-") as scratch:
        async with receive, anyio.create_task_group() as group:
            for _ in range(max(1, min(workers, len(jobs)))):
                group.start_soon(_serve, receive, on_outcome, Path(scratch))


class _Worker:
    """One worker process: its result channel and the tail of its stderr."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stdin is not None  # opened as pipes
        self.results = BufferedByteReceiveStream(proc.stdout)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.drained = anyio.Event()

    @classmethod
    async def start(cls, scratch: Path) -> _Worker:
        """Start a worker whose temporary folders go inside ``scratch``."""
        proc = await anyio.open_process(
            WORKER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        return cls(proc)

    async def drain(self) -> None:
        """Read stderr to its end (a full pipe would block the worker), keeping the tail."""
        assert self.proc.stderr is not None
        partial = b""
        try:
            async for chunk in self.proc.stderr:
                *lines, partial = (partial + chunk).split(b"\n")
                self.tail.extend(line.decode(errors="replace") for line in lines if line)
                partial = partial[-4096:]
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            if partial:
                self.tail.append(partial.decode(errors="replace"))
            self.drained.set()

    async def replay(self, job: ReplayJob) -> ReplayOutcome | None:
        """Send ``job`` and read its outcome; ``None`` if the worker died instead."""
        assert self.proc.stdin is not None
        try:
            await self.proc.stdin.send(job.model_dump_json().encode() + b"\n")
            line = await self.results.receive_until(b"\n", MAX_RESULT_BYTES)
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
        ):
            return None
        try:
            outcome = ReplayOutcome.model_validate_json(line)
        except ValidationError:
            self.tail.append(f"unreadable result line: {line[:200]!r}")
            return None
        return outcome if outcome.index == job.index else None

    async def died(self, job: ReplayJob) -> ReplayOutcome:
        """The ``crashed`` outcome of ``job``, once the process is gone.

        It is waited for before any signal: signalling first would reap it outside
        asyncio's child watcher (``Popen.send_signal`` polls), and the exit status
        reported would be lost.
        """
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE):
            await self.proc.wait()
        await self.stop()
        with anyio.move_on_after(STOP_GRACE):
            await self.drained.wait()
        code = self.proc.returncode
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exit code {code}"
        message = f"{job.path}: the worker process replaying it died ({how})"
        return ReplayOutcome(
            index=job.index,
            path=job.path,
            status="crashed",
            line=f"ERROR    {message}",
            detail="\n".join([message, *self.tail]),
        )

    async def finish(self) -> None:
        """No more jobs: close stdin and let the worker end (stopped if it does not)."""
        with anyio.CancelScope(shield=True):
            assert self.proc.stdin is not None
            await self.proc.stdin.aclose()
            with anyio.move_on_after(STOP_GRACE):
                await self.proc.wait()
            await self.stop()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE`; wait until the process is gone."""
        with anyio.CancelScope(shield=True):
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.terminate()
                with anyio.move_on_after(STOP_GRACE):
                    await self.proc.wait()
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
            await self.proc.aclose()


async def _serve(
    receive: anyio.abc.ObjectReceiveStream[ReplayJob], on_outcome: OnOutcome, scratch: Path
) -> None:
    """Take jobs from ``receive`` until none is left, through one worker at a time."""
    worker: _Worker | None = None
    try:
        async with anyio.create_task_group() as drains:
            async for job in receive:
                if worker is None:
                    worker = await _Worker.start(scratch)
                    drains.start_soon(worker.drain)
                outcome = await worker.replay(job)
                if outcome is None:
                    outcome = await worker.died(job)
                    worker = None
                on_outcome(outcome)
            if worker is not None:
                await worker.finish()
                worker = None
    finally:
        if worker is not None:
            await worker.stop()
