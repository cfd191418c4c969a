"""Run a child process with pipes, a timeout, an output cap and a killable group.

The child runs in its own session (process group). On timeout or cancellation the
whole group gets SIGTERM, then SIGKILL after a short grace, in a shielded scope so
that cleanup finishes even while the caller is being cancelled.

Nothing it starts outlives it. When the child exits, what is left of its group is
killed, and so is every process that carries its tag (:mod:`loop.backends._procs`):
a grandchild that left the group (``setsid``) and kept the output open included. The
output is then read for at most :data:`OUTPUT_GRACE_SECONDS` more, so a process that
holds it open without the tag cannot keep a finished child's run waiting.

Output goes through pipes or, with ``output_files=True``, into unnamed temporary files
read back once the group has stopped. Files are for children written for Node or Bun:
their writes to a pipe are asynchronous, and what is still queued for a full pipe when
they call ``process.exit`` is dropped (a reader slowed down by a busy machine loses the
end of the output); their writes to a file are synchronous, so nothing is lost.

An :class:`~loop.backends._output.OutputWatch` sees the output while the child runs
(from the pipes as they are read, or by following the files): its lines as they arrive,
and a silence longer than its ``idle_timeout``, which stops the child as a timeout does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio
import structlog
from anyio.abc import ByteReceiveStream, Process

from loop.backends._output import OutputWatch
from loop.backends._procs import (
    TAG_VARIABLE,
    Mark,
    ProcStat,
    SpawnedProcess,
    carrying,
    mark,
    new_tag,
    own_start_ticks,
    processes,
    spawned,
    stop_processes,
    tag_entry,
)
from loop.errors import BackendUnavailable

__all__ = [
    "KILL_GRACE_SECONDS",
    "KILL_WAIT_SECONDS",
    "STOP_SECONDS",
    "ProcessResult",
    "last_line",
    "run_process",
    "stop_reason",
]

log = structlog.get_logger("loop.process")

KILL_GRACE_SECONDS = 2.0  # SIGTERM, then this long before SIGKILL
KILL_WAIT_SECONDS = 5.0  # SIGKILL, then this long for the leader to be reaped
# Once the child has exited and what it left is stopped, how long its output may still
# take to reach its end (a process that holds it open without the tag).
OUTPUT_GRACE_SECONDS = 2.0
# The longest run_process takes past its timeout to stop a child's group.
STOP_SECONDS = KILL_GRACE_SECONDS + 2 * KILL_WAIT_SECONDS  # the group, then what it left


def last_line(raw: bytes, limit: int = 300) -> str:
    """The last line of a child's output (stderr, usually), at most ``limit`` characters."""
    lines = raw.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1][-limit:] if lines else ""


@dataclass(slots=True)
class ProcessResult:
    """A finished child: exit code, captured output, and whether a limit cut it.

    ``idle_timeout`` is the silence limit that stopped the child, when one did (then
    ``timed_out`` is False: the two limits are told apart).
    """

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False
    idle_timeout: float | None = None


def stop_reason(proc: ProcessResult, timeout: float | None) -> str | None:
    """Why a limit stopped the child, as an iteration's reason: ``timeout after Ns`` or
    ``idle_timeout: no output for Ns``; None when it ran to its end."""
    if proc.idle_timeout is not None:
        return f"idle_timeout: no output for {proc.idle_timeout:g}s"
    if proc.timed_out:
        return f"timeout after {timeout:g}s" if timeout is not None else "timeout"
    return None


async def _read_capped(
    stream: ByteReceiveStream | None,
    cap: int,
    sink: list[bytes],
    flags: dict[str, bool],
    seen: Callable[[bytes], None] | None = None,
) -> None:
    if stream is None:
        return
    size = 0
    async for chunk in stream:
        if seen is not None:
            seen(chunk)
        if size >= cap:
            flags["truncated"] = True
            continue  # keep draining so the child never blocks on a full pipe
        room = cap - size
        kept = chunk[:room]
        if len(kept) < len(chunk):
            flags["truncated"] = True
        sink.append(kept)
        size += len(kept)


async def _read_all(
    scope: anyio.CancelScope, proc: Process, cap: int, sinks: _Sinks, watch: OutputWatch | None
) -> None:
    """Read both pipes until they end or ``scope`` is cancelled (a holder that would not
    let go of them)."""
    with scope:
        async with anyio.create_task_group() as tg:
            seen = (None, None) if watch is None else (watch.stdout, watch.stderr)
            tg.start_soon(_read_capped, proc.stdout, cap, sinks.out, sinks.flags, seen[0])
            tg.start_soon(_read_capped, proc.stderr, cap, sinks.err, sinks.flags, seen[1])
    if scope.cancelled_caught:
        log.warning(
            "stopped reading a child's output: it exited, and something it left holds the "
            "output open",
            pid=proc.pid,
        )


@dataclass
class _Sinks:
    """Where a child's output goes as it is read."""

    out: list[bytes] = field(default_factory=list)
    err: list[bytes] = field(default_factory=list)
    flags: dict[str, bool] = field(default_factory=lambda: {"truncated": False})


async def _send(proc: Process, stdin: bytes | None) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await proc.stdin.send(stdin or b"")
        await proc.stdin.aclose()


def _read_back(file: IO[bytes], cap: int, sink: list[bytes], flags: dict[str, bool]) -> None:
    file.seek(0)
    data = file.read(cap + 1)
    if len(data) > cap:
        flags["truncated"] = True
    sink.append(data[:cap])


def _reap_stragglers(proc: Process) -> None:
    # The leader has exited; anything left in its group (it holds our pipes open) goes.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _kill_group(proc: Process, grace: float) -> None:
    """SIGTERM to the group, ``grace`` seconds for the leader to exit, then SIGKILL (at
    once when ``grace`` is 0)."""
    steps = [(signal.SIGTERM, grace)] if grace > 0 else []
    with anyio.CancelScope(shield=True):
        for sig, wait in (*steps, (signal.SIGKILL, KILL_WAIT_SECONDS)):
            if proc.returncode is not None:
                _reap_stragglers(proc)
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            with anyio.move_on_after(wait):
                await proc.wait()


def _tagged(child: SpawnedProcess, before: Mark) -> Callable[[], list[ProcStat]]:
    """What finds the processes that carry ``child``'s tag (it and its descendants)."""
    entry = (tag_entry(child.tag),)
    since = child.start_ticks if child.start_ticks is not None else own_start_ticks()
    return lambda: [st for st in processes(since, before) if carrying(st, entry)]


async def _stop_leftovers(child: SpawnedProcess, before: Mark) -> None:
    """Kill what carries the child's tag, wherever it went."""
    await stop_processes(_tagged(child, before), grace=0, wait=KILL_WAIT_SECONDS)


async def run_process(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    max_output_bytes: int = 10 * 1024 * 1024,
    output_files: bool = False,
    watch: OutputWatch | None = None,
    on_start: Callable[[SpawnedProcess], None] | None = None,
    stop_grace: float = KILL_GRACE_SECONDS,
) -> ProcessResult:
    """Run ``argv`` to completion (or timeout) and capture its output.

    With ``output_files`` stdout and stderr are temporary files, not pipes (see above).
    ``watch`` sees the output as it arrives, and may stop a silent child.
    ``on_start`` is told who the child is as soon as it runs (to journal it).
    ``stop_grace``: a child stopped (a timeout, a cancellation) gets SIGTERM and this long
    to exit before SIGKILL; 0: SIGKILL at once.

    Raises:
        BackendUnavailable: the program does not exist or is not executable.
    """
    sinks = _Sinks()
    timed_out = False
    tag = new_tag()
    child_env = {**(os.environ if env is None else env), TAG_VARIABLE: tag}
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(2 * output_files)]
        before = mark()
        try:
            proc = await anyio.open_process(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=files[0] if files else subprocess.PIPE,
                stderr=files[1] if files else subprocess.PIPE,
                cwd=cwd,
                env=child_env,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"program not found: {argv[0]}") from exc
        except PermissionError as exc:
            raise BackendUnavailable(f"program not executable: {argv[0]}") from exc
        child = spawned(proc.pid, tag)
        left_stopped = False
        try:
            if on_start is not None:
                on_start(child)
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:
                    reading = anyio.CancelScope()
                    tg.start_soon(_read_all, reading, proc, max_output_bytes, sinks, watch)
                    if watch is not None:
                        tg.start_soon(watch.run, scope, files)
                    await _send(proc, stdin)
                    await proc.wait()
                    _reap_stragglers(proc)
                    await _stop_leftovers(child, before)
                    left_stopped = True
                    # the output ends when its last writer is gone: a short grace for it
                    reading.deadline = anyio.current_time() + OUTPUT_GRACE_SECONDS
                    if watch is not None:
                        watch.stopped()
            timed_out = scope.cancelled_caught
        finally:
            await _kill_group(proc, stop_grace)
            if not left_stopped:
                await _stop_leftovers(child, before)
            with anyio.CancelScope(shield=True):
                await proc.aclose()
        for file, sink in zip(files, (sinks.out, sinks.err), strict=False):
            _read_back(file, max_output_bytes, sink, sinks.flags)  # at most the cap: quick
        if watch is not None:
            watch.finish()
    idled = watch is not None and watch.idled
    return ProcessResult(
        returncode=proc.returncode,
        stdout=b"".join(sinks.out),
        stderr=b"".join(sinks.err),
        timed_out=timed_out and not idled,
        truncated=sinks.flags["truncated"],
        idle_timeout=watch.idle_timeout if watch is not None and idled else None,
    )
