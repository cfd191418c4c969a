"""The thin async driver of parallel hats: activations in an anyio task group.

:func:`loop.engine.schedule.plan_step` decides; :class:`ParallelLoop` does what it says.
Each activation (a :class:`Lane`) is an iteration of its own (its number, events file,
prompt, timeout and process group), run by the engine's ``_iteration`` in a task of
its own under a cancel scope. Commits go one at a time, in the order the activations
end: an activation takes the *turn* (a lock) to publish and commit, and, still holding
it, plans again (:meth:`ParallelLoop.replan`) and starts what the plan says. So every
start follows a commit (or the session's start, or a deadline) and nothing else: given
the order of the commits, the schedule is deterministic, and a replay that commits in
the recorded order (:class:`CommitGate`) runs the recorded schedule.

Each start is journaled (``iteration.start``) and published as
``loop.activation.started`` (the recorder keeps it as a ``start`` line: the recording
holds the real interleaving). An activation cancelled because the loop stops is not
committed; one cancelled by its wave's aggregator (``first``, ``quorum``, a timeout)
commits as failed, and the aggregator is told (:func:`~loop.engine.schedule.wave_notice`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.abc
import structlog

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.engine.decide import Limits, Outcome, Selection
from loop.engine.invoke import HatCaller
from loop.engine.lifecycle import ACTIVATION_STARTED
from loop.engine.schedule import Running, Schedule, aggregators_of, plan_step, wave_notice
from loop.engine.state import LoopState, interrupt
from loop.engine.waits import Called, LimitWaits
from loop.errors import BackendUnavailable, ReplayDivergence
from loop.events import Event
from loop.records import IterationStart, JournalRecord, Override
from loop.routing import HatSpec


class Engine(Protocol):
    """What the lanes use of the engine (:class:`loop.engine.driver.Engine`), which
    drives them: its state, limits and clocks, and its steps."""

    state: LoopState
    specs: dict[str, HatSpec]
    limits: Limits
    clock: Callable[[], float]
    wall_clock: Callable[[], float]
    _caller: HatCaller
    _scheduled: list[Override]
    _restarts: list[int]
    _waits: LimitWaits

    def _record(self, record: JournalRecord) -> None: ...
    def new_attempt(self, iteration: int, hat: str) -> int: ...
    def _elapsed(self) -> float: ...
    def _apply_scheduled(self) -> None: ...
    async def _exhaust(self, selection: Selection) -> None: ...
    async def _publish_own(self, event: Event) -> None: ...
    async def _iteration(self, selection: Selection, lane: Lane | None = None) -> str | None: ...


__all__ = ["CommitGate", "Lane", "ParallelLoop", "RecordedOrder"]

log = structlog.get_logger("loop.engine")


# Deadlines closer than this are one: the runtime's deadline, worked out again at every
# plan from the clock's reading, moves by rounding errors, and waking the main task for
# each would cost every activation a turn of the event loop.
_SAME_TIME = 1e-6


def _same_time(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) < _SAME_TIME


RESUMED = 0  # in a commit order: the session was resumed (what was in flight was lost)


@dataclass(frozen=True)
class RecordedOrder:
    """How a recorded session with parallel hats went: ``commits``, the iterations in
    the order they committed, with :data:`RESUMED` where the session was killed and
    resumed; ``resume_starts``, for each resume, how many activations had started before
    it (those in flight then were lost to the kill)."""

    commits: Sequence[int]
    resume_starts: Sequence[int] = ()


class CommitGate:
    """Commits in a given order (a replay: the recording's); a commit out of that order
    is a divergence. :data:`RESUMED` in the order: the recorded session was killed and
    resumed there, once as many activations had started as had in the recording, so
    the activations in flight are dropped, uncommitted, as the kill dropped them, and
    each runs again under its own number, as the resume ran it
    (:func:`~loop.engine.state.interrupt`)."""

    def __init__(self, order: RecordedOrder) -> None:
        self.order = list(order.commits)
        self.resume_starts = list(order.resume_starts)
        self.resumes = 0  # how many resumes were passed
        self.next = 0
        self.moved = anyio.Event()

    def expected(self) -> int | None:
        """The iteration whose commit comes next (None: past the recorded ones)."""
        return self.order[self.next] if self.next < len(self.order) else None

    def resume_due(self, started: int) -> bool:
        """Whether the recorded session was resumed here, now that ``started``
        activations have started."""
        if self.expected() != RESUMED:
            return False
        needed = self.resume_starts[self.resumes] if self.resumes < len(self.resume_starts) else 0
        return started >= needed

    async def wait(self, lane: Lane, lanes: dict[int, Lane]) -> None:
        """Wait until ``lane`` may commit (or is cancelled).

        Raises:
            ReplayDivergence: the commit the recording has next cannot come (it is not in
                flight), or ``lane`` is not among the recorded ones.
        """
        while not lane.hard:
            want = self.expected()
            if want == lane.iteration or want is None:
                return
            if want != RESUMED and want not in lanes:
                raise ReplayDivergence(
                    f"the schedule differs: iteration {want} commits next in the recording, "
                    f"and it is not in flight (in flight: {sorted(lanes)})"
                )
            moved = self.moved
            await moved.wait()

    def advance(self) -> None:
        """The expected commit (or resume) happened."""
        if self.expected() == RESUMED:
            self.resumes += 1
        self.next += 1
        self.moved.set()
        self.moved = anyio.Event()


@dataclass(eq=False)
class Lane:
    """One activation in flight."""

    loop: ParallelLoop
    selection: Selection
    running: Running
    activation: int
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    why: str | None = None  # why it was cancelled
    hard: bool = False  # cancelled as the loop stops: nothing of it is committed
    request: BackendRequest | None = None
    holding: bool = False
    attempt: int = 1  # which run of its iteration (a crash may have stopped one)

    @property
    def iteration(self) -> int:
        """The activation's iteration number."""
        return self.running.iteration

    def cancel(self, why: str, *, hard: bool) -> None:
        """Stop the activation (its process group is killed)."""
        if self.why is None:
            self.why = why
        self.hard = self.hard or hard
        self.scope.cancel()
        gate = self.loop.gate
        if gate is not None:
            gate.moved.set()  # a lane waiting for its turn sees it was cancelled

    async def call(self, call: Awaitable[Called]) -> Called | None:
        """The backend call, under the lane's cancel scope; None: cancelled by a stop.

        The turn taken to start the activation is given back once the attempt's start is
        published (:meth:`ParallelLoop._on_start`), so the agents run at once."""
        try:
            with self.scope:
                return await call
        finally:
            self.give_back()
        if self.hard or self.request is None:
            return None
        result = BackendResult.failed(self.why or "cancelled")
        return Called(self.request, result, self.running.started)

    def give_back(self) -> None:
        """Give the turn back, if this activation holds it."""
        if self.holding:
            self.holding = False
            self.loop.lock.release()

    async def take_turn(self) -> bool:
        """Wait for this activation's turn to commit; False: it was cancelled by a stop."""
        if self.loop.gate is not None:
            await self.loop.gate.wait(self, self.loop.lanes)
        await self.loop.lock.acquire()
        self.holding = True
        return not self.hard

    def settle(self, outcome: Outcome, now: float) -> None:
        """A failed activation of an aggregator's wave is not run again: its events are
        consumed and the aggregator is told."""
        if outcome.status != "failed":
            return
        engine = self.loop.engine
        hat = self.selection.hat
        aggregators = aggregators_of(hat, engine.specs, self.loop.schedule)
        if not aggregators:
            return
        why = outcome.reason or "failed"
        outcome.consume = True
        outcome.publish = [wave_notice(self.iteration, hat, why, a, now) for a in aggregators]
        outcome.notes.append(f"not run again: {', '.join(aggregators)} aggregates its wave")


class ParallelLoop:
    """Runs a session whose hats may run at once, to its termination reason."""

    def __init__(self, engine: Engine, schedule: Schedule, gate: CommitGate | None) -> None:
        self.engine = engine
        self.schedule = schedule
        self.gate = gate
        self.lanes: dict[int, Lane] = {}
        self.lock = anyio.Lock(fast_acquire=True)  # no event-loop turn when it is free
        self.reason: str | None = None
        self.stopping: str | None = None  # an activation's stop (rate_limited...)
        self.notes: list[str] = []
        self.wake_at: float | None = None  # when to plan again if nothing ends before
        self.changed = anyio.Event()  # the loop ended or wake_at moved: the main task wakes
        self.started = 0  # activations started by this process
        self._tg: anyio.abc.TaskGroup | None = None
        caller = engine._caller
        started = caller.on_start

        async def on_start(request: BackendRequest, backend: Backend) -> None:
            # an attempt starts (again, after a rate-limit wait): its start is published
            # under the turn, so no other activation's commit collects it
            lane = self.lanes.get(request.iteration)
            if lane is not None:
                lane.request = request
                if not lane.holding:
                    await self.lock.acquire()
                    lane.holding = True
            try:
                if started is not None:
                    await started(request, backend)
            finally:
                if lane is not None:
                    lane.give_back()

        caller.on_start = on_start

    async def run(self, notes: list[str]) -> str:
        """Run until the schedule stops the loop with nothing in flight; the reason."""
        self.notes = notes
        try:
            await self._run()
        except BaseExceptionGroup as group:  # an activation's error, as itself
            raise group.exceptions[0] from None
        assert self.reason is not None
        return self.reason

    async def _run(self) -> None:
        clock = self.engine.clock
        held = self.engine.state.waiting
        if held is not None:  # resumed while activations waited out a limit: nothing runs
            await self.engine._waits.wait(held)  # before the last of their deadlines
        async with anyio.create_task_group() as tg:
            self._tg = tg
            async with self.lock:
                await self.replan()
            while self.reason is None:
                changed = self.changed = anyio.Event()
                wait = None if self.wake_at is None else max(self.wake_at - clock(), 0.0)
                with anyio.move_on_after(wait if wait is not None else float("inf")):
                    await changed.wait()
                if not changed.is_set() and self.reason is None:  # a deadline passed
                    async with self.lock:
                        await self.replan()

    async def replan(self) -> None:
        """Plan and act on it (the caller holds the turn)."""
        engine = self.engine
        while True:
            if self.gate is not None and self.gate.resume_due(self.started):
                for lane in self.lanes.values():  # lost to the kill the recording survived
                    lane.cancel("lost: the recorded session was killed here", hard=True)
                if self.lanes:
                    return  # the last of them to end plans again
                self.gate.advance()
                interrupt(engine.state)  # as the resume did: each runs again as itself
            if self.stopping is not None:
                for lane in self.lanes.values():
                    lane.cancel(f"cancelled: the loop stops ({self.stopping})", hard=True)
                if not self.lanes:
                    self._end(self.stopping)
                return
            if engine._scheduled or engine._restarts:
                engine._apply_scheduled()
            plan = plan_step(
                engine.state,
                engine.specs,
                self.schedule,
                engine.limits,
                [lane.running for lane in self.lanes.values()],
                elapsed=engine._elapsed(),
                now=engine.clock(),
            )
            for number, why in plan.cancel.items():
                self.lanes[number].cancel(why, hard=plan.stop is not None)
            if not _same_time(plan.wake_at, self.wake_at):  # the main task waits for another
                self.wake_at = plan.wake_at
                self.changed.set()
            if plan.stop is not None:
                if not self.lanes:
                    if plan.note:
                        self.notes.append(plan.note)
                    self._end(plan.stop)
                return
            exhausted = False
            for selection in plan.start:
                if selection.exhausted:
                    await engine._exhaust(selection)
                    exhausted = True
                else:
                    await self._start(selection)
            if self.gate is not None and self.gate.expected() == RESUMED:
                if self.gate.resume_due(self.started):
                    continue  # the recorded session was killed here: as it was
                if not plan.start:  # nothing more starts, and nothing can commit
                    raise ReplayDivergence(
                        "the schedule differs: the recorded session started "
                        f"{self.gate.resume_starts[self.gate.resumes]} activation(s) before "
                        f"it was resumed, the replay {self.started}"
                    )
            if not exhausted:  # dropped events change the state: plan again
                return

    def _end(self, reason: str) -> None:
        self.reason = reason
        self.changed.set()

    async def _start(self, selection: Selection) -> None:
        engine = self.engine
        number = selection.iteration  # the plan's: a run again keeps its number
        assert number is not None and number not in self.lanes
        self.started += 1
        hat = selection.hat
        seqs = tuple([p.seq for p in selection.triggers])
        inflight = sum(1 for lane in self.lanes.values() if lane.selection.hat == hat)
        lane = Lane(
            loop=self,
            selection=selection,
            running=Running(number, hat, seqs, engine.clock()),
            activation=engine.state.activations.get(hat, 0) + inflight,
        )
        self.lanes[number] = lane
        lane.attempt = engine.new_attempt(number, hat)  # its own folder and events file
        start = IterationStart(
            iteration=number, hat=hat, triggers=seqs, attempt=lane.attempt, ts=engine.wall_clock()
        )
        engine._record(start)
        await engine._publish_own(
            Event(topic=ACTIVATION_STARTED, source="loop", payload=start, ts=start.ts)
        )
        assert self._tg is not None
        self._tg.start_soon(self._activation, lane, name=f"activation {number}")

    async def _activation(self, lane: Lane) -> None:
        engine = self.engine
        stop: str | None = None
        committed = failed = False
        try:  # its start (hooks, prompt, the events it publishes) takes the turn too
            await self.lock.acquire()
            lane.holding = True
            stop = await engine._iteration(lane.selection, lane)
            committed = lane.holding and not lane.hard
        except BackendUnavailable as exc:
            self.notes.append(str(exc))
            log.error("backend unavailable", error=str(exc))  # noqa: TRY400 - expected, no traceback
            stop = "backend_unavailable"
        except BaseException:
            failed = True  # the task group cancels the others; nothing more starts
            raise
        finally:
            with anyio.CancelScope(shield=True):
                if not lane.holding:
                    await self.lock.acquire()
                try:
                    del self.lanes[lane.iteration]
                    if committed and self.gate is not None:
                        self.gate.advance()
                    if stop is not None and self.stopping is None:
                        self.stopping = stop
                    tg = self._tg
                    if not failed and tg is not None and not tg.cancel_scope.cancel_called:
                        await self.replan()
                finally:
                    self.lock.release()
