"""Recorded tool calls on replay: made again through the tools, and compared.

An iteration's recorded calls (:class:`~loop.records.ToolCall`) are of two kinds:

* the agent's (channels ``cli`` and ``mcp``): its process made them while it ran. The
  replay backend makes them again, in the recorded order, through the same tools
  (:class:`CallReplayer`), with the iteration's context, so they are journaled again
  as the agent's and change the scratch session's tool state as they did. In a session
  with parallel hats, the calls of activations that ran at once interleaved on the
  shared tool state (three reviewers creating a task each): they are made in the order
  they were made in (:mod:`loop.session.call_order`);
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loop import _fs
from loop.backends.base import BackendRequest
from loop.engine.collect import read_events_file
from loop.records import (
    CallError,
    IterationFields,
    LostCalls,
    ToolCall,
    ToolCallLine,
    encode_record,
)
from loop.session.call_order import CallTurns, Turn, turn_calls
from loop.tools.base import Tool, ToolContext
from loop.tools.calls import FILE_CHANNELS, FileCalls, local_offset

__all__ = [
    "CallReplayer",
    "PathMap",
    "call_groups",
    "call_line",
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


# -- making them again ---------------------------------------------------------------------


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
