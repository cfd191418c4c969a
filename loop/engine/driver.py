"""The thin async driver: run the pure decisions against backends, the bus and the journal.

Per iteration: check limits → select the hat → journal ``iteration.start`` (usually
already written with the previous commit) → let the extensions act (heartbeat) → build
the prompt → run the backend (under the timeout unless it is instant) → collect events
from both channels → decide the outcome → publish on the bus → journal ``iteration.end``
(the commit point) with the next ``iteration.start`` → hand the committed line to the
extensions that take it (the recorder) → publish ``loop.iteration.done``.

A session killed at any moment resumes from its journal: a completed iteration is
never run twice; an iteration without its ``iteration.end`` is run again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import structlog

from loop._faults import ARMED, crash_point
from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.bus import EventBus
from loop.config import LoadedConfig
from loop.engine.collect import collect_events
from loop.engine.decide import (
    Limits,
    Selection,
    check_limits,
    decide_outcome,
    exit_code_for,
    select_next,
)
from loop.engine.invoke import (
    ChildEnvironments,
    base_env,
    call_backend,
    call_with_timeout,
    hat_limits,
    prepare_events_file,
)
from loop.engine.journal import Journal, read_journal
from loop.engine.progress import RunSummary
from loop.engine.prompt import PromptTemplate
from loop.engine.records import (
    iteration_record,
    iteration_start_record,
    loop_header,
    session_end_record,
    session_start_record,
)
from loop.engine.routing import hat_specs
from loop.engine.session_dir import SessionLock, SessionPaths, mark_latest
from loop.engine.state import LoopState, PendingEvent, RouteContext, apply, fold
from loop.errors import BackendUnavailable, SessionError
from loop.events import Event
from loop.extensions import Extension, overrides

__all__ = ["Engine"]

log = structlog.get_logger("loop.engine")

# Instant backends never give the event loop a turn; the engine yields to it at least this
# often (seconds), so signals, the progress display and other tasks still run.
YIELD_INTERVAL = 0.005
CANCEL_CHECK_EVERY = 8  # iterations (an anyio cancellation check costs over a microsecond)


class Engine:
    """Runs one session of the loop to its end."""

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
        child_env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.paths = paths
        self.backends = dict(backends)
        self.bus = bus or EventBus()
        self.extensions = list(extensions or [])
        self.workdir = (workdir or Path.cwd()).resolve()
        self.resume = resume
        self.child_env = dict(child_env or {})
        self.clock = clock
        specs = hat_specs(config.hats)
        self.specs = {s.name: s for s in specs}
        self.route_ctx = RouteContext(
            hats=tuple(specs),
            completion_event=config.loop.completion_event,
            fallback=config.loop.fallback_hat,
            starting_event=config.loop.starting_event,
        )
        self.limits = Limits(
            max_iterations=config.loop.max_iterations,
            max_runtime_seconds=config.loop.max_runtime_seconds,
            max_consecutive_failures=config.loop.max_consecutive_failures,
            stale_threshold=config.loop.stale_threshold,
        )
        self.state = LoopState()
        self.journal = Journal(paths.journal, durable=config.loop.durable)
        self._lock = SessionLock(paths.lock)
        self._collecting: list[Event] | None = None
        self._children = ChildEnvironments(
            self.extensions, session_id=paths.session_id, session_dir=paths.dir
        )
        self._rerun: int | None = None
        self._iterations_root = str(paths.iteration_dir(0).parent)
        self._templates = {
            name: PromptTemplate(
                hat=name,
                description=hat.description,
                instructions=hat.instructions,
                objective=config.prompt,
                publishes=hat.publishes,
                completion_event=config.loop.completion_event,
            )
            for name, hat in config.hats.items()
        }
        self._instant = {
            name: bool(getattr(backend, "instant", False)) for name, backend in backends.items()
        }
        self._uses_files = {
            name: bool(getattr(backend, "uses_files", True)) for name, backend in backends.items()
        }
        self._timeouts, self._deadlines = hat_limits(config, backends)
        # only the extensions that override a per-iteration hook are called (hot path)
        self._starters = [e for e in self.extensions if overrides(e, "on_iteration_start")]
        self._prompters = [e for e in self.extensions if overrides(e, "prompt_section")]
        self._blockers = [e for e in self.extensions if overrides(e, "completion_blocker")]
        self._flushers = [e for e in self.extensions if overrides(e, "flush")]
        self._committers = [e for e in self.extensions if overrides(e, "committed")]
        self._next_yield = 0.0
        self._planned: tuple[int, Selection] | None = None
        self._turns = 0
        self._base_elapsed = 0.0
        self._t0 = 0.0

    # -- set-up -----------------------------------------------------------------------

    def _record(self, record: dict[str, Any], published: list[Event] | None = None) -> None:
        record.setdefault("ts", time.time())
        self.journal.append(record)
        apply(self.state, record, self.route_ctx, published)

    def _commit(self, record: dict[str, Any], published: list[Event], elapsed: float) -> bytes:
        """Journal an ``iteration.end`` and, in the same write, the next iteration's start.

        The next step is a pure function of the state this record leaves (limits, then
        the next hat), so its in-flight marker rides on this commit's write (and fsync)
        instead of costing a write of its own. When the loop is about to stop, or the
        next hat is exhausted, the record goes alone. State and journal agree whenever
        the write returns; a crash before it loses both, as with any append.

        Returns the record's journal line (the bytes written for it).
        """
        record.setdefault("ts", time.time())
        apply(self.state, record, self.route_ctx, published)
        records = [record]
        if check_limits(self.state, self.limits, elapsed) is None:
            selection = select_next(self.state, self.specs)
            if selection is not None and not selection.exhausted:
                self._planned = (self.state.iteration, selection)
                start = iteration_start_record(
                    self.state.iteration + 1, selection.hat, selection.triggers
                )
                start["ts"] = record["ts"]
                apply(self.state, start, self.route_ctx)
                records.append(start)
        try:
            return self.journal.append_many(records)[0]
        except SessionError:  # not written, so it did not happen: the journal is the truth
            self.state = fold(read_journal(self.paths.journal).records, self.route_ctx)
            raise

    def _notify_committed(self, record: dict[str, Any], line: bytes) -> None:
        for ext in self._committers:
            try:
                ext.committed(record, line)
            except Exception:  # like a bus subscriber: an extension's failure is its own
                log.exception("extension failed on a committed iteration", extension=ext.name)

    def _flush(self) -> None:
        for ext in self._flushers:
            try:
                ext.flush()
            except Exception:  # an extension's buffer is its own problem, never the loop's
                log.exception("extension flush failed", extension=ext.name)

    def _elapsed(self) -> float:
        return self._base_elapsed + (self.clock() - self._t0)

    def _start_session(self) -> None:
        if self.resume and not self.paths.journal.exists():  # refuse before creating anything
            raise SessionError(f"session {self.paths.session_id} has no journal to resume")
        self.paths.dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        contents = read_journal(self.paths.journal)
        if self.resume:
            if not contents.records:
                raise SessionError(f"session {self.paths.session_id} has no journal to resume")
            self.state = fold(contents.records, self.route_ctx)
            if self.state.termination == "completed":
                raise SessionError(
                    f"session {self.paths.session_id} already completed; start a new one"
                )
            if contents.torn:
                log.warning(
                    "journal had a torn last line; it was dropped", journal=str(self.paths.journal)
                )
            self.journal.open(truncate_to=contents.good_size)
            self._base_elapsed = self.state.elapsed
            # the first iteration after a resume may have been in flight: it starts clean
            self._rerun = self.state.iteration + 1
            self._record(
                {
                    "kind": "resume",
                    "pid": os.getpid(),
                    "iteration": self.state.iteration,
                    "in_flight": self.state.in_flight,
                }
            )
        else:
            if contents.records or contents.torn:
                raise SessionError(
                    f"session {self.paths.session_id} already exists; use --resume to continue it"
                )
            self.journal.open()
            self._record(session_start_record(self.config, self.paths.session_id))
        mark_latest(self.paths.sessions_dir, self.paths.session_id)
        self._children.base = base_env(
            self.child_env, session_id=self.paths.session_id, session_dir=self.paths.dir
        )

    def _collector(self, event: Event) -> None:
        if self._collecting is not None:
            self._collecting.append(event)

    # -- the run ----------------------------------------------------------------------

    async def run(self) -> RunSummary:
        """Run (or resume) the session until a termination reason; always journal the end."""
        try:
            self._start_session()
        except BaseException:  # refused before the run: leave nothing held
            self.journal.close()
            self._lock.release()
            raise
        self._t0 = self.clock()
        self.bus.subscribe("*", self._collector, name="engine")
        for ext in self.extensions:
            ext.attach(self.bus)
        reason = "error"
        notes: list[str] = []
        end_failure: SessionError | None = None
        try:
            await self.bus.publish(
                Event(
                    topic="loop.resumed" if self.resume else "loop.started",
                    payload=loop_header(
                        self.config,
                        self.paths.session_id,
                        self.paths.dir,
                        self.state.iteration if self.resume else None,
                    ),
                    source="loop",
                )
            )
            reason = await self._loop(notes)
        except anyio.get_cancelled_exc_class():
            reason = "interrupted"
            raise
        except BaseException:
            reason = "error"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                end_failure = await self._finish(reason)
        if end_failure is not None:  # the run itself went well: the journal's end did not
            raise end_failure
        return self.summary(reason, notes)

    async def _finish(self, reason: str) -> SessionError | None:
        """Journal the end, tell the subscribers, close every extension, release the session.

        A journal that cannot take the end record (the disk filled up) does not stop the
        rest: the recording still gets its footer and is closed. The error is returned,
        for :meth:`run` to raise when no earlier error is already on its way out.
        """
        failure: SessionError | None = None
        try:
            end = session_end_record(reason, self.state.iteration, self._elapsed())
            try:
                self._record(end)
            except SessionError as exc:
                failure = exc
            payload = {k: end[k] for k in ("reason", "iterations", "elapsed")}
            payload["exit_code"] = exit_code_for(reason)
            await self.bus.publish(Event(topic="loop.terminated", source="loop", payload=payload))
        finally:
            for ext in self.extensions:
                try:
                    await ext.aclose()
                except Exception:  # one extension's close never keeps the others open
                    log.exception("extension failed to close", extension=ext.name)
            self.journal.close()
            self._lock.release()
        return failure

    async def _loop(self, notes: list[str]) -> str:
        while True:
            # Instant backends never yield to the event loop: a cancellation (a replay's
            # comparer stopping the run) is checked every CANCEL_CHECK_EVERY iterations,
            # and the loop gets a turn (signals, progress) every YIELD_INTERVAL.
            self._turns += 1
            if self._turns % CANCEL_CHECK_EVERY == 0:
                if time.monotonic() >= self._next_yield:
                    self._flush()
                    await anyio.lowlevel.checkpoint()
                    self._next_yield = time.monotonic() + YIELD_INTERVAL
                else:
                    await anyio.lowlevel.checkpoint_if_cancelled()
            planned, self._planned = self._planned, None
            selection: Selection | None
            if planned is not None and planned[0] == self.state.iteration:
                # limits checked and hat chosen at the last commit, on this same state
                selection = planned[1]
            else:
                reason = check_limits(self.state, self.limits, self._elapsed())
                if reason is not None:
                    return reason
                selection = select_next(self.state, self.specs)
            assert selection is not None
            if selection.exhausted:
                await self._exhaust(selection.hat, [p.seq for p in selection.triggers])
                continue
            try:
                await self._iteration(selection.hat, selection.triggers)
            except BackendUnavailable as exc:
                notes.append(str(exc))
                log.error("backend unavailable", error=str(exc))  # noqa: TRY400 - expected, no traceback
                return "backend_unavailable"

    async def _exhaust(self, hat: str, dropped: list[int]) -> None:
        event = Event(
            topic=f"{hat}.exhausted",
            source="loop",
            payload=f"hat {hat!r} reached max_activations "
            f"({self.specs[hat].max_activations}); its events were dropped",
        )
        self._record(
            {"kind": "hat.exhausted", "hat": hat, "dropped": dropped, "event": event.to_dict()}
        )
        log.warning("hat exhausted", hat=hat, dropped=len(dropped))
        await self.bus.publish(event)

    def _request(
        self, hat: str, iteration: int, activation: int, triggers: tuple[PendingEvent, ...]
    ) -> BackendRequest:
        """The backend call of an iteration: its prompt, events file, environment, timeout."""
        context = [s for ext in self._prompters if (s := ext.prompt_section(hat))]
        trigger_events = (
            (triggers[0].event,) if len(triggers) == 1 else tuple([p.event for p in triggers])
        )
        prompt = self._templates[hat].render(iteration, trigger_events, context)
        it_dir = f"{self._iterations_root}/{iteration:06d}"  # text: no Path built (hot path)
        events_file = f"{it_dir}/events.jsonl"
        rerun = iteration == self._rerun
        if rerun or self._uses_files[hat]:  # in-process hats: nothing to prepare (hot path)
            prepare_events_file(it_dir, events_file, uses_files=self._uses_files[hat], rerun=rerun)
        return BackendRequest(
            hat=hat,
            prompt=prompt,
            iteration=iteration,
            session_id=self.paths.session_id,
            activation=activation,
            events_file=events_file,
            workdir=self.workdir,
            env=partial(self._children.build, hat, iteration, activation, events_file),
            timeout_seconds=self._timeouts[hat],
            iteration_dir=it_dir,
            triggers=trigger_events,
        )

    async def _call(self, backend: Backend, request: BackendRequest) -> BackendResult:
        """Run the hat; once it returns (or is cancelled) what its children got is void."""
        try:
            if self._instant[request.hat]:  # it never suspends: no timeout could ever fire
                return await call_backend(backend, request)
            self._flush()  # the hat may take a while: nothing waits in a buffer meanwhile
            return await call_with_timeout(backend, request, self._deadlines[request.hat])
        finally:  # a late tool call of its agent is refused from here on
            self._children.release(request.iteration)

    async def _iteration(self, hat: str, triggers: tuple[PendingEvent, ...]) -> None:
        iteration = self.state.iteration + 1
        activation = self.state.activations.get(hat, 0)
        spec = self.specs[hat]
        backend = self.backends[hat]
        if self.state.in_flight != iteration or self.state.in_flight_hat != hat:
            # not journaled with the last commit (the first iteration, after a resume...)
            self._record(iteration_start_record(iteration, hat, triggers))
        if ARMED:
            crash_point("iteration.start")
        started = self.clock()
        published: list[Event] = []
        if self._starters:
            self._collecting = published
            try:
                for ext in self._starters:
                    for event in await ext.on_iteration_start(iteration, hat):
                        await self.bus.publish(event)
            finally:
                self._collecting = None
        request = self._request(hat, iteration, activation, triggers)
        result = await self._call(backend, request)
        emitted, events, problems = collect_events(
            hat, result.output, None if result.wrote_events_file is False else request.events_file
        )
        blocker = None
        if events and events[-1].topic == self.config.loop.completion_event:
            blocker = next((b for ext in self._blockers if (b := ext.completion_blocker())), None)
        outcome = decide_outcome(
            spec,
            ok=result.ok,
            failure=result.reason,
            events=events,
            completion_event=self.config.loop.completion_event,
            completion_blocker=blocker,
        )
        outcome.notes.extend(problems)
        self._collecting = published
        try:
            for event in outcome.publish:
                await self.bus.publish(event)
                if ARMED:
                    crash_point("publish")
        finally:
            self._collecting = None
        now = self.clock()
        elapsed = self._base_elapsed + (now - self._t0)
        record = iteration_record(
            iteration=iteration,
            hat=hat,
            activation=activation,
            backend=backend.kind,
            prompt=request.prompt,
            result=result,
            outcome=outcome,
            triggers=triggers,
            events=events,
            emitted=emitted,
            published=published,
            duration=now - started,
            elapsed=elapsed,
        )
        if ARMED:
            crash_point("iteration.end")
        line = self._commit(record, published, elapsed)
        if ARMED:
            crash_point("iteration.committed")
        if self._committers:
            self._notify_committed(record, line)
        await self.bus.publish(Event(topic="loop.iteration.done", source="loop", payload=record))
        if ARMED:
            crash_point("iteration.recorded")

    def summary(self, reason: str, notes: list[str]) -> RunSummary:
        """The run summary for ``reason``."""
        return RunSummary.of(
            self.state,
            reason,
            session_id=self.paths.session_id,
            session_dir=str(self.paths.dir),
            elapsed=self._elapsed(),
            resumed=self.resume,
            notes=notes,
        )
