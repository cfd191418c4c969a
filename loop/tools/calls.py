"""Tool calls belong to the session: which iteration a call is part of, and its journal.

A hatloop tool called in an iteration's context is part of that iteration: the engine
puts the call, with its input and its result or error, in the iteration's
``iteration.end`` record (:class:`~loop.records.ToolCall`), the recording keeps it and a
replay makes it again. Where a call learns its iteration:

* an agent's process (``python -m loop task create``, ``python -m loop mcp``): from the
  variables the engine gives it, ``LOOP_SESSION_ID``, ``LOOP_ITERATION`` and
  ``LOOP_EVENTS_FILE`` (:meth:`FileCalls.from_env`);
* the session's MCP endpoint: from the iteration its secret names
  (:mod:`loop.tools.grants`);
* the engine's own process (a hat's bus request, the theme heartbeat): from the
  iteration the engine is running, set for the iteration's span with :func:`collecting`.

The journal has one writer, the engine. So the first two append a
:class:`~loop.records.ToolCallLine` to the iteration's events file (:class:`FileCalls`),
the per-iteration channel the engine reads when the iteration ends; the engine keeps
its own calls in memory (:class:`IterationCalls`).

**Ids and time.** A tool that mints an id (a task's, an experience's) or reads the
clock asks the running :class:`Call`. Inside a session the id is derived from the
session, the iteration and the call's place in it (a uuid5), so a replay, or a re-run of
an interrupted iteration, mints the same id; the time is the call's own, which a replay
gives the tool again. Outside a session ids are random and the time is the clock's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from loop import _fs, _json
from loop.errors import LoopError, ToolError
from loop.locations import (
    ENV_EVENTS_FILE,
    ENV_ITERATION,
    ENV_RUN_ID,
    ENV_SESSION_DIR,
    ENV_SESSION_ID,
)
from loop.records import CallError, ToolCall, ToolCallLine, encode_record

__all__ = [
    "ENV_ITERATION",
    "ENV_RUN_ID",
    "ENV_SESSION_ID",
    "FILE_CHANNELS",
    "Call",
    "CallClock",
    "Channel",
    "FileCalls",
    "IterationCalls",
    "collecting",
    "in_process",
    "local_offset",
    "merge_calls",
    "mint_id",
]


Channel = Literal["cli", "mcp", "bus", "loop"]
# the channels whose calls an agent's process journals in the events file
FILE_CHANNELS: frozenset[str] = frozenset({"cli", "mcp"})

# In the session's folder: its agents' calls take ``calls.lock`` one at a time.
CALLS_LOCK = "calls"

# The namespace of derived ids (a uuid5 of the session, the iteration and the call).
_ID_NAMESPACE = uuid.UUID("5b0d6f4e-2a43-5c1e-9d8e-7f3a1c0b6e21")

# (ts, utc_offset) of a call: the clock a tool takes as "now"
CallClock = Callable[[], tuple[float, int]]


def local_offset(ts: float) -> int:
    """The local time zone's offset from UTC at ``ts``, in seconds."""
    offset = datetime.fromtimestamp(ts).astimezone().utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _clock() -> tuple[float, int]:
    now = time.time()
    return now, local_offset(now)


def mint_id(kind: str) -> str:
    """A random id (a uuid4): what a tool mints outside a session."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class Call:
    """The call running: its iteration, its place there, and its clock.

    Attributes:
        session_id: the session.
        iteration: the iteration the call is part of.
        key: its place: ``f<n>`` the n-th call journaled in the events file (an
            agent's), ``m<n>`` the n-th the engine's process made.
        ts: the call's time, seconds since the epoch.
        utc_offset: the caller's offset from UTC, in seconds.
    """

    session_id: str
    iteration: int
    key: str
    ts: float
    utc_offset: int

    def now(self) -> datetime:
        """The call's time, in the caller's time zone (aware)."""
        return datetime.fromtimestamp(self.ts, timezone(timedelta(seconds=self.utc_offset)))

    def new_id(self, kind: str, attempt: int = 0) -> str:
        """The id of kind ``kind`` this call mints (the same on a replay or a re-run).

        ``attempt`` > 0 gives the next candidates, for a tool that found the first one
        taken by something else.
        """
        name = f"{self.session_id}/{self.iteration}/{self.key}/{kind}"
        return str(uuid.uuid5(_ID_NAMESPACE, name + (f"/{attempt}" if attempt else "")))


Invoke = Callable[[Call], BaseModel]


def _error_of(exc: BaseException, tool: str) -> CallError:
    if isinstance(exc, ToolError):
        return CallError(code=exc.code, message=exc.message, details=exc.details)
    if isinstance(exc, LoopError):
        return CallError(code=type(exc).__name__, message=exc.message)
    return CallError(code="internal_error", message=f"{tool} failed: {type(exc).__name__}")


def _json_value(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as JSON reads it back: a copy, as the journal will hold it (a value that
    is not JSON, from a Python caller, is kept as its text)."""
    try:
        data = _json.loads(_json.dumps_line(value))
    except (TypeError, ValueError):
        return {"unserializable": repr(value)[:200]}
    return data if isinstance(data, dict) else {}


@dataclass(slots=True)
class _Outcome:
    """What a call gave: its output or its error, and its record."""

    record: ToolCall
    out: BaseModel | None = None
    exc: Exception | None = None

    def give(self) -> BaseModel:
        """The output, or the error raised again."""
        if self.exc is not None:
            raise self.exc
        assert self.out is not None
        return self.out


def _run(call: Call, tool: str, channel: Channel, args: dict[str, Any], invoke: Invoke) -> _Outcome:
    """Run ``invoke`` for ``call``, keeping its output or its error and its record."""
    outcome = _Outcome(
        ToolCall(
            tool=tool,
            channel=channel,
            input=_json_value(args),
            ts=call.ts,
            utc_offset=call.utc_offset,
        )
    )
    try:
        outcome.out = invoke(call)
    except Exception as exc:  # kept, then raised again to the caller
        outcome.exc = exc
        outcome.record.error = _error_of(exc, tool)
    else:
        outcome.record.result = outcome.out.model_dump(mode="json", by_alias=True)
    return outcome


@dataclass(frozen=True)
class FileCalls:
    """The calls of an agent's process (CLI, the MCP endpoint): journaled in the events file.

    Each call takes the events file's lock (a side file), counts the calls already
    journaled there (its place), runs, and appends its line: concurrent callers of one
    iteration (a CLI process, MCP requests) are numbered in the order they ran. With
    ``session_dir``, the call also takes the session's calls lock while it reads its
    time and runs: the agent calls of activations running at once (parallel hats) are
    made one at a time, so their times are in the order they changed the tool state,
    which is the order a replay makes them in again
    (:func:`loop.session.call_order.call_order`).

    Attributes:
        session_id: the session (``LOOP_SESSION_ID``).
        iteration: the iteration (``LOOP_ITERATION``).
        events_file: the iteration's events file (``LOOP_EVENTS_FILE``).
        channel: ``cli`` or ``mcp``.
        clock: the calls' clock (a replay gives the recorded time); the system's if unset.
        run: the session's folder and the id of the run that started the agent
            (``LOOP_SESSION_DIR``, ``LOOP_RUN_ID``): a call is made only while that run
            holds the session, so an agent that outlived a killed loop changes nothing.
        session_dir: the session's folder (``LOOP_SESSION_DIR``), whose calls lock
            orders the calls of all its iterations (unset: a replay, which orders them).
    """

    session_id: str
    iteration: int
    events_file: Path
    channel: Channel
    clock: CallClock | None = None
    run: tuple[Path, str] | None = None
    session_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], channel: Channel) -> FileCalls | None:
        """The iteration the variables name, or ``None`` outside one (or when unclear)."""
        sid, number, events = (
            env.get(ENV_SESSION_ID),
            env.get(ENV_ITERATION),
            env.get(ENV_EVENTS_FILE),
        )
        if not sid or not events or not number or not number.isdigit():
            return None
        folder, run = env.get(ENV_SESSION_DIR), env.get(ENV_RUN_ID)
        owner = (Path(folder), run) if folder and run else None
        session_dir = Path(folder) if folder else None
        return cls(sid, int(number), Path(events), channel, run=owner, session_dir=session_dir)

    def record(
        self, tool: str, args: dict[str, Any], channel: Channel | None, invoke: Invoke
    ) -> BaseModel:
        """Run the call and journal it in the events file.

        Raises:
            ToolError: the call's own error (journaled first), or ``not_journaled`` when
                the events file cannot be written: a call the session cannot keep is
                not made; ``run_stopped`` when the run that started the agent has
                stopped (the call is not made).
        """
        path = self.events_file
        outcome: _Outcome | None = None
        if self.run is not None and not run_holds_session(*self.run):
            raise ToolError(
                "run_stopped",
                f"{tool} was not run: the loop run that started this agent has stopped "
                f"(session {self.session_id}); a resumed run starts its own agent",
            )
        try:
            with _fs.file_lock(path):
                place = _journaled_calls(path) + 1
                with self._in_turn():  # the session's calls, one at a time, in time order
                    ts, offset = (self.clock or _clock)()
                    call = Call(self.session_id, self.iteration, f"f{place}", ts, offset)
                    outcome = _run(call, tool, channel or self.channel, args, invoke)
                _fs.append_bytes(path, encode_record(ToolCallLine(call=outcome.record)))
        except (OSError, LoopError) as err:
            reason = err.strerror if isinstance(err, OSError) else err.message
            done = "ran, but was not journaled" if outcome else "was not run"
            raise ToolError(
                "not_journaled",
                f"{tool} {done}: the iteration's events file {path} cannot be written "
                f"({reason or err})",
            ) from err
        return outcome.give()

    def _in_turn(self) -> contextlib.AbstractContextManager[None]:
        """The session's calls lock (taken inside the events file's: one order only)."""
        if self.session_dir is None:
            return contextlib.nullcontext()
        return _fs.file_lock(self.session_dir / CALLS_LOCK)


def run_holds_session(session_dir: Path, run_id: str) -> bool:
    """Whether the run ``run_id`` still runs the session: its lock is held (the kernel
    drops it when the run dies, even by ``kill -9``) and names that run."""
    try:
        fd = _fs.open_file(session_dir / "lock", os.O_RDONLY)
    except (OSError, LoopError):
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:  # held: by whom?
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                return False
            return run_id in os.pread(fd, 256, 0).decode("ascii", "replace").split()
        fcntl.flock(fd, fcntl.LOCK_UN)  # nobody holds it: the run is gone
        return False
    finally:
        os.close(fd)


def _journaled_calls(path: Path) -> int:
    """How many tool calls the events file holds (its other lines are events)."""
    try:
        data = _fs.read_bytes(path)
    except FileNotFoundError:
        return 0
    count = 0
    for line in data.splitlines():
        try:
            parsed = _json.loads(line)
        except ValueError:
            continue
        count += isinstance(parsed, dict) and parsed.get("kind") == "tool.call"
    return count


class IterationCalls:
    """The calls the engine's own process makes in one running iteration (in memory).

    Args:
        session_id: the session.
        iteration: the iteration.
        clock: the time of the iteration's n-th call (from 1), ``(iteration, n)``; a
            replay gives the recorded ones.
    """

    def __init__(
        self, session_id: str, iteration: int, clock: Callable[[int, int], tuple[float, int]]
    ) -> None:
        self.session_id = session_id
        self.iteration = iteration
        self._clock = clock
        self._lock = threading.Lock()
        self._made = 0
        self._calls: list[tuple[int, ToolCall]] = []

    def __len__(self) -> int:
        return self._made

    def record(
        self, tool: str, args: dict[str, Any], channel: Channel | None, invoke: Invoke
    ) -> BaseModel:
        """Run the call and keep its record; its error is raised again once kept."""
        with self._lock:
            self._made += 1
            place = self._made
        ts, offset = self._clock(self.iteration, place)
        call = Call(self.session_id, self.iteration, f"m{place}", ts, offset)
        outcome = _run(call, tool, channel or "bus", args, invoke)
        with self._lock:
            self._calls.append((place, outcome.record))
        return outcome.give()

    def records(self) -> list[tuple[int, ToolCall]]:
        """``(place, record)`` of every call made so far, in the order they began."""
        with self._lock:
            if not self._calls:  # most iterations: the engine's process made none
                return []
            return sorted(self._calls, key=lambda c: c[0])


def merge_calls(
    in_process: list[tuple[int, ToolCall]], from_file: list[ToolCall], before: int
) -> tuple[ToolCall, ...]:
    """An iteration's calls in order: the engine's made before its backend ran (the first
    ``before``), the agent's (journaled in the events file), then the engine's others."""
    if not in_process:
        return tuple(from_file)
    first = [r for place, r in in_process if place <= before]
    rest = [r for place, r in in_process if place > before]
    return (*first, *from_file, *rest)


_IN_PROCESS: ContextVar[IterationCalls | None] = ContextVar("hatloop_iteration_calls", default=None)


def in_process() -> IterationCalls | None:
    """The calls of the iteration this task (or the worker thread it started) runs in."""
    return _IN_PROCESS.get()


class collecting:  # lower case: used as the function it was
    """Make ``calls`` the iteration of every tool call this task makes meanwhile (and the
    worker threads it starts, which copy the context).

    A class rather than a generator: the engine enters one per iteration.
    """

    __slots__ = ("_calls", "_token")
    _token: Token[IterationCalls | None]

    def __init__(self, calls: IterationCalls) -> None:
        self._calls = calls

    def __enter__(self) -> IterationCalls:
        self._token = _IN_PROCESS.set(self._calls)
        return self._calls

    def __exit__(self, *exc: object) -> None:
        _IN_PROCESS.reset(self._token)
