"""The order a replay makes the agent calls of a session with parallel hats in.

The calls of activations that ran at once interleaved on the shared tool state (three
reviewers creating a task each): :func:`call_order` decides, from the recorded schedule
and the calls' times, the order they were made in across the activations (pure), and
:class:`CallTurns` holds each replayed call until its turn (the thin async part). The
calls themselves are made by :class:`loop.session.calls.CallReplayer`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import anyio

from loop.bus import EventBus
from loop.engine.lifecycle import ACTIVATION_STARTED
from loop.events import Event
from loop.extensions import Extension
from loop.records import IterationStart, ToolCall

__all__ = ["CallTurns", "Turn", "call_order", "turn_calls"]


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


# -- making them in their turns (the thin async part) -------------------------------------


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
