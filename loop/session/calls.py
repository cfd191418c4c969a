"""Recorded tool calls on replay: made again through the tools, and compared.

An iteration's recorded calls (:class:`~loop.records.ToolCall`) are of two kinds:

* the agent's (channels ``cli`` and ``mcp``): its process made them while it ran. The
  replay backend makes them again, in the recorded order, through the same tools
  (:class:`CallReplayer`), with the iteration's context, so they are journaled again
  as the agent's and change the scratch session's tool state as they did. In a session
  with parallel hats, the calls of activations that ran at once interleaved on the
  shared tool state (three reviewers creating a task each): :func:`call_order` decides
  the order they were made in, across activations (pure), and :class:`CallTurns` holds
  each replayed call until its turn (the thin async part);
* the engine's process's (``bus``: a hat's request; ``loop``: the theme heartbeat):
  the replayed engine makes them itself, as it did. :func:`recorded_clock` gives each
  the time it had, so what a tool derives from "now" comes out the same.

A call carries the paths of the run that made it (an experience's folder, a file named
in an error). :class:`PathMap` maps the recorded run's locations to the replay's before
a call is made again and before a result is compared. :func:`compare_calls` says how a
replayed iteration's calls differ from the recorded ones, in a readable form.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from loop import _fs
from loop.backends.base import BackendRequest
from loop.bus import EventBus
from loop.engine.collect import read_events_file
from loop.engine.lifecycle import ACTIVATION_STARTED
from loop.events import Event
from loop.extensions import Extension
from loop.records import (
    CallError,
    IterationFields,
    IterationStart,
    LostCalls,
    ToolCall,
    ToolCallLine,
    encode_record,
)
from loop.tools.base import Tool, ToolContext
from loop.tools.calls import FILE_CHANNELS, FileCalls, local_offset

__all__ = [
    "CallReplayer",
    "CallTurns",
    "PathMap",
    "Turn",
    "call_groups",
    "call_line",
    "call_order",
    "compare_calls",
    "recorded_clock",
]

_MAX_DIFFS = 6  # leaf differences shown per call
_TEXT = 160  # characters of a value shown


@dataclass(frozen=True)
class PathMap:
    """Maps the recorded run's locations (absolute paths, as text) to the replay's."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, locations: Mapping[str, tuple[Path, Path]]) -> PathMap:
        """From ``name -> (recorded, replay)``; the longest recorded path is mapped first."""
        pairs = {str(rec): str(rep) for rec, rep in locations.values() if str(rec) != str(rep)}
        ordered = sorted(pairs.items(), key=lambda p: len(p[0]), reverse=True)
        return cls(tuple(ordered))

    def apply(self, value: Any) -> Any:
        """``value`` with every recorded location in its texts replaced by the replay's."""
        if not self.pairs:
            return value
        if isinstance(value, str):
            for recorded, replayed in self.pairs:
                if recorded in value:
                    value = value.replace(recorded, replayed)
            return value
        if isinstance(value, dict):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        return value

    def call(self, call: ToolCall) -> ToolCall:
        """``call`` as the replay should see it."""
        if not self.pairs:
            return call
        error = call.error
        if error is not None:
            error = CallError(
                code=error.code,
                message=self.apply(error.message),
                details=self.apply(error.details),
            )
        return replace(
            call, input=self.apply(call.input), result=self.apply(call.result), error=error
        )


def recorded_clock(
    iteration: Callable[[int], IterationFields | None],
) -> Callable[[int, int], tuple[float, int]]:
    """The call clock of a replayed engine: the n-th call its process makes in iteration
    ``i`` gets the time the n-th such call (``bus`` or ``loop``) had when recorded; a
    call the recording does not have gets the clock's."""

    def clock(number: int, n: int) -> tuple[float, int]:
        record = iteration(number)
        own = [c for c in record.tool_calls if c.channel not in FILE_CHANNELS] if record else []
        if 0 < n <= len(own):
            return own[n - 1].ts, own[n - 1].utc_offset
        now = time.time()  # a call the recording does not have (the comparison says so)
        return now, local_offset(now)

    return clock


def _fixed(ts: float, utc_offset: int) -> Callable[[], tuple[float, int]]:
    return lambda: (ts, utc_offset)


def call_groups(record: IterationFields | None) -> list[tuple[int, Sequence[ToolCall]]]:
    """The calls a replay makes again for ``record``, in the order it makes them, grouped
    by attempt: ``(attempt, calls)`` for each attempt that did not end (attempt by
    attempt), then ``(0, calls)`` for the agent's own. A call's *place* is its index in
    them all, group after group."""
    if record is None:
        return []
    groups: list[tuple[int, Sequence[ToolCall]]] = [
        (lost.attempt, lost.tool_calls) for lost in record.lost_calls
    ]
    groups.append((0, [c for c in record.tool_calls if c.channel in FILE_CHANNELS]))
    return groups


# -- the order of the calls of activations that ran at once (pure) ------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """One replayed agent call of a session with parallel hats: made by the ``start``-th
    activation numbered ``iteration`` (a number whose activation a kill lost starts again
    after the resume), the ``place``-th (from 0) of its :func:`call_groups`."""

    iteration: int
    start: int
    place: int


@dataclass(frozen=True, slots=True)
class _Step:
    """An entry of a recorded schedule: ``kind`` ``start``, ``end`` or ``resume``; a start's
    ``start`` counts the starts of its ``iteration`` so far, and ``commits`` says whether
    its activation committed (an ``end`` follows before any ``resume``)."""

    kind: str
    iteration: int = 0
    start: int = 0
    commits: bool = False


def _steps(schedule: Sequence[str]) -> list[_Step]:
    """The typed entries of ``schedule`` (``start 3 hat``, ``end 3 hat``, ``resume``)."""
    steps: list[_Step] = []
    starts: Counter[int] = Counter()
    open_starts: dict[int, int] = {}  # iteration -> its start's place in ``steps``
    for entry in schedule:
        kind, _, rest = entry.partition(" ")
        if kind == "resume":
            open_starts.clear()  # the kill lost what was in flight: those never commit
            steps.append(_Step("resume"))
            continue
        number = int(rest.split()[0])
        if kind == "start":
            starts[number] += 1
            open_starts[number] = len(steps)
            steps.append(_Step("start", number, starts[number]))
        elif (at := open_starts.pop(number, None)) is not None:
            steps[at] = replace(steps[at], commits=True)
            steps.append(_Step("end", number))
        else:  # a commit whose start is not in the recording: it starts there
            starts[number] += 1
            steps.append(_Step("start", number, starts[number], commits=True))
            steps.append(_Step("end", number))
    return steps


def call_order(
    schedule: Sequence[str], calls: Callable[[int], Sequence[tuple[int, Sequence[ToolCall]]]]
) -> Iterator[Turn]:
    """The order a replay makes the agent calls of a session with parallel hats in: the
    order they were made in when it was recorded, across the activations that ran at once.

    ``schedule``: the recording's starts, commits and resumes, in order (``start 3 hat``,
    ``end 3 hat``, ``resume``: :attr:`~loop.session.reader.RecordingReader.schedule`);
    ``calls``: the calls iteration ``n`` makes again, by attempt (:func:`call_groups` of
    its record), asked for once its activation's start is reached (lazily: a large
    recording is not read ahead).

    The calls of one activation keep their recorded order (one events file, under its
    lock). Those of activations in flight together are merged by their ``ts`` (the time
    each call took as it was made), the earlier-started activation first on a tie, and
    all of an activation's calls come before its commit. So the order never puts a call
    before its activation's start or after its commit, nor before an earlier call of its
    own, whatever the clock said: a replay that starts and commits in the recorded order
    always reaches the next call of this order. An activation the recorded session lost
    to a kill (started, not committed before the ``resume``) makes the calls of its
    attempt that the number's record holds as ``lost_calls`` (:func:`turn_calls`), all of
    them before the ``resume``, as they were made before the kill.
    """
    # in flight, in start order: iteration -> its start, (ts, place) of its calls left
    flight: dict[int, tuple[int, deque[tuple[float, int]]]] = {}

    def next_turn() -> Turn:
        first = min(
            (n for n, (_, left) in flight.items() if left), key=lambda n: flight[n][1][0][0]
        )
        start, left = flight[first]
        return Turn(first, start, left.popleft()[1])

    for step in _steps(schedule):
        if step.kind == "resume":
            while any(left for _, left in flight.values()):  # the lost ones' calls, in time
                yield next_turn()
            flight.clear()
        elif step.kind == "start":
            made = turn_calls(calls(step.iteration), step.start, commits=step.commits)
            if made:
                flight[step.iteration] = (step.start, deque((c.ts, i) for i, _, c in made))
        else:
            while step.iteration in flight and flight[step.iteration][1]:
                yield next_turn()  # its calls, after those made before each
            flight.pop(step.iteration, None)


def turn_calls(
    groups: Sequence[tuple[int, Sequence[ToolCall]]], start: int | None, *, commits: bool
) -> list[tuple[int, int, ToolCall]]:
    """The calls the ``start``-th activation of a number makes, each with its place among
    the number's calls (``groups``: its :func:`call_groups`) and its attempt (0: the
    agent's own): the one that committed makes the agent's own; one a kill lost makes
    those of its attempt (the ``start``-th), which the record holds as lost calls.
    ``start`` None: all of them (one activation at a time: no order to keep)."""
    out: list[tuple[int, int, ToolCall]] = []
    place = 0
    for attempt, made in groups:
        mine = start is None or (attempt == 0 if commits else attempt == start)
        for call in made:
            if mine:
                out.append((place, attempt, call))
            place += 1
    return out


# -- making them again ---------------------------------------------------------------------


class CallTurns(Extension):
    """Holds each replayed call of a session with parallel hats until its turn in
    :func:`call_order` (the thin async part): the replayed activations' calls are made in
    the order they were made in the recorded session.

    It counts the starts of each iteration number (``loop.activation.started``), so a
    replayed activation knows which recorded one it is (:meth:`lane`). An activation that
    leaves calls unmade (cancelled, or its backend call ended otherwise) gives its turns
    up (:meth:`release`), so no call waits for a call that will not come.
    """

    name = "replay-call-turns"

    def __init__(
        self,
        schedule: Sequence[str],
        calls: Callable[[int], Sequence[tuple[int, Sequence[ToolCall]]]],
    ) -> None:
        steps = [s for s in _steps(schedule) if s.kind == "start"]
        # (iteration, start) of the activations: each makes its calls in its turns
        self._planned = {(s.iteration, s.start) for s in steps}
        # those a kill lost: each makes its own attempt's lost calls (:func:`turn_calls`)
        self.lost_lanes = {(s.iteration, s.start) for s in steps if not s.commits}
        self._order = call_order(schedule, calls)
        self._head: Turn | None = None
        self._pulled = False  # the first turn is pulled on first use (reads the recording)
        self._released: set[tuple[int, int]] = set()
        self._starts: Counter[int] = Counter()
        self._moved: anyio.Event | None = None

    def attach(self, bus: EventBus) -> None:
        """Count the replayed activations' starts."""
        bus.subscribe(ACTIVATION_STARTED, self._on_start, name=self.name)

    def _on_start(self, event: Event) -> None:
        if isinstance(event.payload, IterationStart):
            self._starts[event.payload.iteration] += 1

    def lane(self, iteration: int) -> tuple[int, int] | None:
        """The activation numbered ``iteration`` now in flight, as ``(iteration, start)``;
        ``None`` when the recording has no such start (it makes its calls as they come)."""
        lane = (iteration, self._starts[iteration])
        return lane if lane in self._planned else None

    def _current(self) -> Turn | None:
        if not self._pulled:
            self._pulled = True
            self._head = next(self._order, None)
            self._skip()
        return self._head

    def _skip(self) -> None:
        while self._head is not None and (self._head.iteration, self._head.start) in self._released:
            self._head = next(self._order, None)

    def _advance(self) -> None:
        self._head = next(self._order, None)
        self._skip()
        if self._moved is not None:
            self._moved.set()
            self._moved = None

    async def wait(self, turn: Turn) -> None:
        """Wait until ``turn`` is the next call to make (at once if it is in no order)."""
        while (head := self._current()) is not None and head != turn:
            if self._moved is None:
                self._moved = anyio.Event()
            await self._moved.wait()

    def made(self, turn: Turn) -> None:
        """``turn``'s call was made: the next one's turn."""
        if self._current() == turn:
            self._advance()

    def release(self, lane: tuple[int, int]) -> None:
        """``lane`` makes no more calls: the turns it has left are skipped."""
        self._released.add(lane)
        head = self._current()
        if head is not None and (head.iteration, head.start) == lane:
            self._advance()


class CallReplayer:
    """Makes a recorded iteration's agent calls again, through the tools, in its context.

    Args:
        tools: gives the tools by name (the registry's ``known_tools``, which imports
            the domains once); asked only for a recorded agent call, so a replay of a
            recording without any imports no tool domain.
        base: the replay's tool context (the scratch folder's files).
        paths: the recorded run's locations mapped to the replay's.
        turns: a session with parallel hats: the order of the calls across the
            activations that ran at once (``None``: one activation at a time, whose
            calls are made as they come).
    """

    def __init__(
        self,
        tools: Callable[[], Mapping[str, Tool]],
        base: ToolContext,
        paths: PathMap,
        turns: CallTurns | None = None,
    ) -> None:
        self.tools = tools
        self.base = base
        self.paths = paths
        self.turns = turns
        # by iteration: the calls of its recorded lost attempts, as made again here
        self.lost: dict[int, tuple[LostCalls, ...]] = {}
        # by (iteration, attempt; 0: its own): the file its calls were made again in
        self._lost_files: dict[tuple[int, int], Path] = {}

    async def __call__(self, request: BackendRequest, record: IterationFields) -> None:
        """Make the agent's recorded calls of ``record`` for ``request``'s iteration: first
        those of its lost attempts (each numbered from 1 in a file of its own, as in its
        own events file, so the ids they mint are the recorded ones), then its own; each
        in its turn when activations ran at once."""
        events_file = request.events_file
        assert events_file is not None  # a replayed hat writes events: the engine names it
        number, turns = request.iteration, self.turns
        lane = None if turns is None else turns.lane(number)
        lost_lane = turns is not None and lane in turns.lost_lanes
        groups = call_groups(record)
        files = {  # a file for each lost attempt's calls (numbered from 1, as its own was)
            attempt: events_file.with_name(f"lost-{k}.jsonl") if attempt else events_file
            for k, (attempt, _) in enumerate(groups[:-1], start=1)
        }
        files[0] = events_file
        # one activation at a time (no lane): all of them, as they come
        mine = turn_calls(groups, None if lane is None else lane[1], commits=not lost_lane)
        try:
            for place, attempt, call in mine:
                path = self._lost_files.setdefault((number, attempt), files[attempt])
                path.parent.mkdir(parents=True, exist_ok=True)
                turn = None if lane is None else Turn(lane[0], lane[1], place)
                if turns is not None and turn is not None:
                    await turns.wait(turn)
                self._make(request, call, path)
                if turns is not None and turn is not None:
                    turns.made(turn)
        finally:
            if turns is not None and lane is not None:
                turns.release(lane)  # cancelled midway: the others do not wait for the rest
        if record.lost_calls and not lost_lane:  # made here, or by the activation lost
            self.lost[number] = tuple(
                LostCalls(
                    attempt=lost.attempt,
                    tool_calls=tuple(read_events_file(made_in, request.hat, 0.0).calls)
                    if (made_in := self._lost_files.get((number, lost.attempt))) is not None
                    else (),
                )
                for lost in record.lost_calls
            )

    def _make(self, request: BackendRequest, recorded: ToolCall, events_file: Path) -> None:
        """Make ``recorded`` again in ``request``'s iteration, journaled in ``events_file``."""
        call = self.paths.call(recorded)
        journal = FileCalls(
            request.session_id,
            request.iteration,
            events_file,
            call.channel,
            clock=_fixed(call.ts, call.utc_offset),
        )
        tool = self.tools().get(call.tool)
        if tool is None:  # a tool this hatloop does not have: journaled as refused
            self._unknown(journal, call)
            return
        ctx = replace(self.base, events_file=events_file, calls=journal)
        # an error is journaled with the call: the comparison says if it was recorded
        with contextlib.suppress(Exception):
            tool.run(ctx, call.input)

    @staticmethod
    def _unknown(journal: FileCalls, call: ToolCall) -> None:
        line = ToolCallLine(
            call=ToolCall(
                tool=call.tool,
                channel=call.channel,
                input=call.input,
                error=CallError(code="unknown_tool", message=f"no tool named {call.tool!r}"),
                ts=call.ts,
                utc_offset=call.utc_offset,
            )
        )
        _fs.append_bytes(journal.events_file, encode_record(line))


# -- comparing ----------------------------------------------------------------------------


def _text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


def _outcome(call: ToolCall) -> Any:
    if call.error is not None:
        err = {"code": call.error.code, "message": call.error.message}
        if call.error.details is not None:
            err["details"] = call.error.details
        return {"error": err}
    return {"result": call.result}


def _leaves(expected: Any, actual: Any, where: str, out: list[tuple[str, Any, Any]]) -> None:
    """Collect ``(path, expected, actual)`` of the values that differ (the first few)."""
    if len(out) >= _MAX_DIFFS or expected == actual:
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual), key=str):
            _leaves(expected.get(key, _ABSENT), actual.get(key, _ABSENT), f"{where}.{key}", out)
        return
    if isinstance(expected, list) and isinstance(actual, list):
        for i in range(max(len(expected), len(actual))):
            e = expected[i] if i < len(expected) else _ABSENT
            a = actual[i] if i < len(actual) else _ABSENT
            _leaves(e, a, f"{where}[{i}]", out)
        return
    out.append((where, expected, actual))


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def _shown(value: Any) -> str:
    return "(absent)" if value is _ABSENT else _text(value)


def call_line(call: ToolCall) -> str:
    """A call in one line: the tool, how it came, its input, and how it ended."""
    head = f"{call.tool} via {call.channel} {_text(call.input)}"
    if call.error is not None:
        return f"{head} -> error {call.error.code}: {call.error.message[:_TEXT]}"
    return f"{head} -> ok"


def compare_calls(
    expected: Sequence[ToolCall], actual: Sequence[ToolCall]
) -> tuple[str, list[str], list[str]] | None:
    """How the replayed calls differ from the recorded ones (already path-mapped):
    ``(what, expected lines, actual lines)``, or ``None`` when they agree."""
    for number, (want, got) in enumerate(zip(expected, actual, strict=False), start=1):
        same_call = (want.tool, want.channel, want.input) == (got.tool, got.channel, got.input)
        if same_call and _outcome(want) == _outcome(got):
            continue
        what = f"tool call {number} of {len(expected)} differs ({want.tool} via {want.channel})"
        if not same_call:
            return what, [call_line(want)], [call_line(got)]
        diffs: list[tuple[str, Any, Any]] = []
        _leaves(_outcome(want), _outcome(got), "", diffs)
        head = f"{want.tool} {_text(want.input)}"
        return (
            what,
            [head] + [f"{path.lstrip('.')}: {_shown(e)}" for path, e, _ in diffs],
            [head] + [f"{path.lstrip('.')}: {_shown(a)}" for path, _, a in diffs],
        )
    if len(expected) != len(actual):
        what = f"tool calls differ: {len(expected)} recorded, {len(actual)} made"
        return what, [call_line(c) for c in expected], [call_line(c) for c in actual]
    return None
