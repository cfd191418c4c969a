"""The thin async driver: run the pure decisions against backends, the bus and the journal.

Per iteration: check limits → select the hat → journal ``iteration.start`` → let the
extensions act (heartbeat) → build the prompt → run the backend under the iteration's
timeout → collect events from both channels → decide the outcome → publish on the bus
→ journal ``iteration.end`` (the commit point) → hand the committed record to the
extensions that take it (the recorder) → publish ``loop.iteration.done``.

The tool calls made in the iteration's context are part of its ``iteration.end``: the
agent's, which its process journals in the events file, and those the engine's own
process makes meanwhile (a hat's bus request, the theme heartbeat), kept in memory
(:mod:`loop.tools.calls`). An event published while no iteration collects (between
iterations) is journaled and routed (:mod:`loop.engine.outside`).

A session killed at any moment resumes from its journal: a completed iteration is
never run twice; an iteration without its ``iteration.end`` is run again, as a new
attempt with files of its own, once what the killed run left running is stopped
(:mod:`loop.engine.stale`).

The driver reads no clock of its own: ``clock`` (monotonic: runtime, durations) and
``wall_clock`` (timestamps of records and events) are given to the :class:`Engine`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import anyio
import anyio.lowlevel
import structlog

from loop._faults import crash_point
from loop.backends._procs import SpawnedProcess
from loop.backends.base import Backend, BackendRequest, OutputObserver
from loop.bus import EventBus
from loop.config import LoadedConfig
from loop.engine.collect import collect_events, lost_calls, malformed_records
from loop.engine.decide import (
    Selection,
    WaitPlan,
    budget_spent,
    check_limits,
    decide_outcome,
    judge_completion,
    limits_from,
    limits_of,
    missing_required,
    select_next,
)
from loop.engine.hooks import Hooks
from loop.engine.invoke import ChildVariables, HatCaller
from loop.engine.journal import Journal, journal_redactor
from loop.engine.lanes import CommitGate, Lane, ParallelLoop, RecordedOrder
from loop.engine.lifecycle import (
    ITERATION_DONE,
    LOOP_RESUMED,
    LOOP_STARTED,
    started_event,
)
from loop.engine.outside import OutsideEvents
from loop.engine.progress import RunSummary
from loop.engine.records import (
    child_start,
    hat_exhausted,
    iteration_end,
)
from loop.engine.resume import LimitOverrides
from loop.engine.schedule import schedule_of
from loop.engine.session_dir import SessionLock, SessionPaths
from loop.engine.session_run import finish_session, start_session
from loop.engine.state import LoopState, RouteContext, apply, restart_streak
from loop.engine.waits import Called, LimitWaits
from loop.errors import BackendUnavailable, SessionError
from loop.events import Event
from loop.extensions import Extension
from loop.records import IterationEnd, IterationStart, JournalRecord, Override
from loop.tools.calls import IterationCalls, collecting, local_offset, merge_calls

__all__ = ["YIELD_INTERVAL", "Engine"]

log = structlog.get_logger("loop.engine")

# A backend that answers at once never gives the event loop a turn: the engine checks for
# a cancellation before every iteration, and lets the event loop run (signals, progress,
# other tasks) at least this often, in seconds of its clock.
YIELD_INTERVAL = 0.005


class Engine:
    """Runs one session of the loop to its end.

    Args:
        config: the loaded configuration.
        paths: the session's files.
        backends: the backend of each hat.
        bus: the event bus (a new one by default).
        extensions: the extensions taking part in each iteration.
        workdir: where the hats run (default: the current folder).
        resume: continue the session's journal instead of starting it.
        env: variables for every child process (the tools' settings).
        clock: a monotonic clock, in seconds (runtime limit, durations, yielding).
        observer: sees the hats' output as it arrives (``-v``), where backends report it.
        wall_clock: seconds since the epoch (the records' and events' timestamps, the
            deadlines of waits for rate limits).
        sleep: sleeps the given seconds (``anyio.sleep``): a rate limit's wait.
        limit_overrides: on a resume, the limits given on the command line (the
            session otherwise keeps the limits it ran with).
        scheduled_overrides: overrides to apply at their recorded point (a replay).
        streak_restarts: the iterations after which the stale streak starts afresh (a
            replay, where the recorded session went on from a stale_loop stop).
        call_clock: the time (seconds since the epoch, UTC offset) of the n-th tool call
            the engine's process makes in an iteration, ``(iteration, n)``; default:
            ``wall_clock`` in the local time zone (a replay gives the recorded ones).
        commit_order: the order activations running at once must commit in (a replay of
            a session with parallel hats: the recording's).
    """

    def __init__(
        self,
        config: LoadedConfig,
        *,
        paths: SessionPaths,
        backends: Mapping[str, Backend],
        bus: EventBus | None = None,
        extensions: list[Extension] | None = None,
        workdir: Path | None = None,
        resume: bool = False,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        observer: OutputObserver | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        limit_overrides: LimitOverrides | None = None,
        scheduled_overrides: Sequence[Override] = (),
        streak_restarts: Sequence[int] = (),
        call_clock: Callable[[int, int], tuple[float, int]] | None = None,
        commit_order: RecordedOrder | None = None,
    ) -> None:
        self.config = config
        self.observer = observer
        self.paths = paths
        self.backends = dict(backends)
        self.bus = bus or EventBus()
        self.extensions = list(extensions or [])
        self.workdir = (workdir or Path.cwd()).resolve()
        self.resume = resume
        self.limit_overrides = limit_overrides or LimitOverrides()
        self._scheduled = sorted(scheduled_overrides, key=lambda o: o.after_iteration)
        self._restarts = sorted(streak_restarts)
        self.clock = clock
        self.wall_clock = wall_clock
        self.call_clock = call_clock or self._wall_call_clock
        self.route_ctx = RouteContext.from_topology(
            config.topology(),
            completion_event=config.loop.completion_event,
            fallback=config.loop.fallback_hat,
            starting_event=config.loop.starting_event,
            cancellation_event=config.loop.cancellation_event,
        )
        self.specs = {s.name: s for s in self.route_ctx.hats}
        self.limits = limits_of(config)
        self.schedule = schedule_of(config)
        self._gate = CommitGate(commit_order) if commit_order is not None else None
        self.state = LoopState()
        self._root = paths.trusted  # no file of the session is reached through a link
        self.journal = Journal(
            paths.journal,
            durable=config.loop.durable,
            redactor=journal_redactor(config),
            root=self._root,
        )
        self._run_id = secrets.token_hex(8)  # in the lock: this run's agents check it
        self._lock = SessionLock(paths.lock, root=self._root, run_id=self._run_id)
        self._extra_env = dict(env or {})
        self._collecting: list[Event] | None = None
        self._hooks = Hooks(self.extensions)
        self._outside = OutsideEvents(self._record, self.extensions)
        self._caller = HatCaller(
            config,
            self.backends,
            hooks=self._hooks,
            children=ChildVariables(
                self.extensions, session_id=paths.session_id, session_dir=paths.dir
            ),
            paths=paths,
            workdir=self.workdir,
            clock=clock,
            observer=observer,
            on_start=self._started,
            on_child=self._child_started,
        )
        self._next_yield = 0.0
        self._base_elapsed = 0.0
        # the session's elapsed time as its end record says (once written): the summary
        # gives the same figure as status and show
        self.ended_elapsed: float | None = None
        self._t0 = 0.0
        self.session_started = False  # its journal opened (or reopened) by this run
        self._notes: list[str] = []
        self._refused: WaitPlan | None = None  # the longest wait a rate_limited stop refused
        self._waits = LimitWaits(
            session_id=paths.session_id,
            bus=self.bus,
            wall_clock=wall_clock,
            sleep=sleep,
            flush=self._hooks.flush,
        )

    # -- the journal and the extensions -----------------------------------------------

    def _record(self, record: JournalRecord) -> None:
        """Journal ``record``, then fold it into the state: the journal is the truth, so a
        record that could not be written (a full disk) never happened."""
        self.journal.append(record)
        unrouted = self.state.unrouted
        apply(self.state, record, self.route_ctx)
        if self.state.unrouted is not None and self.state.unrouted != unrouted:
            log.warning(
                "unrouted event: no hat is triggered by it",
                topic=self.state.unrouted,
                hat=record.hat if isinstance(record, IterationEnd) else None,
                record=record.kind,
            )

    def _elapsed(self) -> float:
        return self._base_elapsed + (self.clock() - self._t0)

    def _collector(self, event: Event) -> None:
        if self._collecting is not None:
            self._collecting.append(event)
        else:
            self._outside.seen(event)

    async def _publish_own(self, event: Event) -> None:
        """Publish one of the engine's own events (lifecycle, a hat's exhaustion); then
        journal and route what its subscribers published meanwhile."""
        await self.bus.publish(event)
        if self._outside:
            self._outside.journal(self.state.iteration, self.wall_clock())

    def _wall_call_clock(self, iteration: int, n: int) -> tuple[float, int]:
        now = self.wall_clock()
        return now, local_offset(now)

    async def _publish_collected(
        self, events: list[Event], into: list[Event], point: str | None = None
    ) -> None:
        """Publish ``events``; everything published meanwhile (answers too) goes ``into``.

        ``point``: the crash point passed after each event (fault-injection tests).
        """
        self._collecting = into
        try:
            for event in events:
                await self.bus.publish(event)
                if point is not None:
                    crash_point(point)
        finally:
            self._collecting = None

    # -- the run ----------------------------------------------------------------------

    async def run(self) -> RunSummary:
        """Run (or resume) the session until a termination reason; always journal the end."""
        try:
            started = await start_session(self)
        except BaseException:  # refused before the run: leave nothing held
            self.journal.close()
            self._lock.release()
            raise
        self._t0 = self.clock()
        self.session_started = True
        self.bus.subscribe("*", self._collector, name="engine")
        for ext in self.extensions:
            ext.attach(self.bus)
        reason = "error"
        ended = False  # the loop ended by itself (no error, no cancellation on its way out)
        notes: list[str] = []
        end_failure: SessionError | None = None
        try:
            topic = LOOP_RESUMED if self.resume else LOOP_STARTED
            await self._publish_own(
                Event(topic=topic, payload=started, source="loop", ts=self.wall_clock())
            )
            reason = await self._loop(notes)
            ended = True
        except anyio.get_cancelled_exc_class():
            reason = "interrupted"
            raise
        except BaseException:
            reason = "error"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                end_failure = await finish_session(self, reason, ended=ended)
        if end_failure is not None:  # the run itself went well: the journal's end did not
            raise end_failure
        return self.summary(reason, notes)

    async def _checkpoint(self) -> None:
        """Let a cancellation in; every :data:`YIELD_INTERVAL`, let the event loop run."""
        now = self.clock()
        if now >= self._next_yield:
            self._hooks.flush()  # nothing waits in a buffer while others run
            await anyio.lowlevel.checkpoint()
            self._next_yield = now + YIELD_INTERVAL
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()

    def _apply_scheduled(self) -> None:
        """Apply what a recorded resume did whose point has come (a replay of a resumed
        session): its override, a restart of the stale streak."""
        while self._scheduled and self._scheduled[0].after_iteration <= self.state.iteration:
            override = replace(self._scheduled.pop(0), ts=self.wall_clock())
            self._record(override)
            self.limits = limits_from(override.settings(), self.config.loop.stale_threshold)
            log.info("limits overridden", after_iteration=override.after_iteration)
        while self._restarts and self._restarts[0] <= self.state.iteration:
            restart_streak(self.state)
            log.info("stale streak restarted", after_iteration=self._restarts.pop(0))

    async def _loop(self, notes: list[str]) -> str:
        self._notes = notes
        if self.schedule.parallel:  # hats may run at once: the lanes drive the session
            return await ParallelLoop(self, self.schedule, self._gate).run(notes)
        while True:
            await self._checkpoint()
            if self._scheduled or self._restarts:
                self._apply_scheduled()
            reason = check_limits(self.state, self.limits, self._elapsed())
            if reason is not None:
                if reason == "budget_exhausted":
                    notes.append(budget_spent(self.state, self.limits) or reason)
                return reason
            selection = select_next(self.state, self.specs)
            assert selection is not None  # check_limits stops a loop with nothing pending
            if selection.exhausted:
                await self._exhaust(selection)
                continue
            if self.limits.hat_budgets and (
                spent := budget_spent(self.state, self.limits, selection.hat)
            ):
                notes.append(spent)  # the hat's activation is not started
                return "budget_exhausted"
            try:
                stop = await self._iteration(selection)
            except BackendUnavailable as exc:
                notes.append(str(exc))
                log.error("backend unavailable", error=str(exc))  # noqa: TRY400 - expected, no traceback
                return "backend_unavailable"
            if stop is not None:
                return stop

    async def _exhaust(self, selection: Selection) -> None:
        hat = selection.hat
        limit = self.specs[hat].max_activations
        record = hat_exhausted(hat, limit, selection.triggers, self.wall_clock())
        self._record(record)
        log.warning("hat exhausted", hat=hat, dropped=len(record.dropped))
        await self._publish_own(record.event)

    async def _started(self, request: BackendRequest, backend: Backend) -> None:
        """An attempt of an iteration starts: the displays follow it."""
        alongside = self.schedule.runs_alongside(request.hat)
        await self._publish_own(
            started_event(request, backend, self.state, self.wall_clock(), alongside=alongside)
        )

    def new_attempt(self, iteration: int, hat: str) -> int:
        """The number of ``iteration``'s next attempt; for a hat with a child process,
        its folder and empty events file are made (never one already there)."""
        attempt = self.state.next_attempt(iteration)
        if self.backends[hat].uses_files:
            attempt = self.paths.make_attempt(iteration, attempt)
        return attempt

    def _child_started(self, iteration: int, attempt: int, child: SpawnedProcess) -> None:
        """Journal who a backend's child is, for a resume to stop it if it outlives us."""
        self._record(child_start(iteration, attempt, child, self.wall_clock()))

    async def _iteration(self, selection: Selection, lane: Lane | None = None) -> str | None:
        """Run one iteration and commit it. ``lane``: one activation among others (parallel
        hats): its number, its cancel scope, its turn to commit (:mod:`loop.engine.lanes`)."""
        iteration = self.state.iteration + 1 if lane is None else lane.iteration
        calls = IterationCalls(self.paths.session_id, iteration, self.call_clock)
        with collecting(calls):  # the tool calls this process makes meanwhile are its own
            return await self._run_iteration(selection, calls, iteration, lane)

    async def _run_iteration(
        self, selection: Selection, calls: IterationCalls, iteration: int, lane: Lane | None
    ) -> str | None:
        hat, triggers = selection.hat, selection.triggers
        activation = self.state.activations.get(hat, 0) if lane is None else lane.activation
        backend = self.backends[hat]
        seqs = tuple([p.seq for p in triggers])
        if lane is None:  # a lane's start was journaled when it was planned
            attempt = self.new_attempt(iteration, hat)
            now = self.wall_clock()
            self._record(
                IterationStart(iteration=iteration, hat=hat, triggers=seqs, attempt=attempt, ts=now)
            )
        else:
            attempt = lane.attempt
        crash_point("iteration.start")
        published: list[Event] = []
        for ext in self._hooks.starters:
            await self._publish_collected(await ext.on_iteration_start(iteration, hat), published)
        before = len(calls)  # the engine's calls so far come before the agent's
        call = self._waits.call(
            partial(
                self._caller.call,
                *(hat, iteration, activation, triggers),
                attempt=attempt,
                notices=self.state.notices.get(hat, ()),
            ),
            state=self.state,
            limits=self.limits,
            iteration=iteration,
            hat=hat,
            elapsed=self._elapsed,
            record=self._record,
        )
        called = await self._call(call, lane, iteration, hat)
        if called is None:  # cancelled as the loop stopped: nothing of it is committed
            return None
        if called.refused is not None:  # a limit the loop does not wait for: it stops
            return self._rate_limited(called.refused)
        request, result, started = called.request, called.result, called.started
        now = self.wall_clock()
        events_path = (  # as text: no Path formatted
            self.paths.events_path(iteration, attempt) if backend.writes_events else None
        )
        emitted, events, agent_calls, problems = collect_events(
            hat, result.output, events_path, now, root=self._root
        )
        if problems:
            for malformed in malformed_records(hat, iteration, attempt, problems, now):
                self._record(malformed)
        lost = (  # an earlier call's tool calls stay made: they are the iteration's too
            lost_calls(
                self.paths,
                iteration,
                attempt,
                reran=called.reran,
                hat=hat,
                now=now,
                root=self._root,
            )
            if (attempt > 1 or called.reran) and events_path is not None
            else ()
        )
        loop = self.config.loop
        outcome = decide_outcome(
            self.specs[hat],
            ok=result.ok,
            failure=result.reason,
            events=events,
            completion_event=loop.completion_event,
            now=now,
            cancellation_event=loop.cancellation_event,
            strict=loop.strict_publishes,
        )
        if problems:
            outcome.notes.extend(f"emit file {p}" for p in problems)
        outcome.notes.extend(result.notes)  # the agent's CLI warned of something
        if lane is not None:  # commits go one at a time, in the order the activations end
            if not await lane.take_turn():
                return None  # cancelled as the loop stops while it waited
            lane.settle(outcome, now)
        await self._publish_collected(outcome.publish, published, point="publish")
        if outcome.completion is not None:  # judged on the state after the other events
            blocker = self._hooks.blocker()
            missing = missing_required(loop.required_events, self.state.seen_topics, published)
            verdict = judge_completion(outcome, hat, blocker=blocker, missing=missing, now=now)
            await self._publish_collected(verdict, published, point="publish")
        ended = self.clock()
        record = iteration_end(
            iteration=iteration,
            hat=hat,
            activation=activation,
            backend=backend.kind,
            prompt=request.prompt,
            result=result,
            outcome=outcome,
            triggers=request.triggers,
            trigger_seqs=seqs,
            events=events,
            emitted=emitted,
            published=published,
            tool_calls=merge_calls(calls.records(), agent_calls, before),
            lost_calls=lost,
            duration=ended - started,
            elapsed=self._base_elapsed + (ended - self._t0),
            now=self.wall_clock(),
        )
        crash_point("iteration.end")
        self._record(record)
        crash_point("iteration.committed")
        self._hooks.committed(record)
        await self._publish_own(
            Event(topic=ITERATION_DONE, source="loop", payload=record, ts=record.ts)
        )
        crash_point("iteration.recorded")
        return None

    async def _call(
        self, call: Awaitable[Called], lane: Lane | None, iteration: int, hat: str
    ) -> Called | None:
        """The backend call (a lane's under its scope); None: cancelled as the loop stops,
        nothing of the iteration is committed (a resume runs it again).

        The session's runtime may end before the hat's own time limit: then the call is
        cancelled (its process group stopped) as max_runtime_seconds passes, as the
        activations in flight are when the limit stops a session of parallel hats."""
        if lane is not None:
            return await lane.call(call)
        left = self.limits.max_runtime_seconds - self._elapsed()
        if left >= self._caller.deadlines[hat]:
            return await call
        with anyio.move_on_after(left) as scope:
            called = await call
            if anyio.current_time() < scope.deadline:  # not back late from a blocked loop
                return called
        log.warning("max_runtime passed: iteration cancelled", iteration=iteration, hat=hat)
        return None  # the summary names it, as every iteration the run's end cut short

    def _rate_limited(self, refused: WaitPlan) -> str:
        """The loop stops rather than wait: the note says why; the resume command raises
        the limit above the longest wait refused."""
        self._notes.append(refused.stop or "rate limited")
        if self._refused is None or refused.over > self._refused.over:
            self._refused = refused
        return "rate_limited"

    def summary(self, reason: str, notes: list[str]) -> RunSummary:
        """The run summary for ``reason``."""
        return RunSummary.of(
            self.state,
            reason,
            session_id=self.paths.session_id,
            session_dir=str(self.paths.dir),
            elapsed=self._elapsed() if self.ended_elapsed is None else self.ended_elapsed,
            resumed=self.resume,
            notes=notes,
            limits=self.limits,
            refused=self._refused,
        )
