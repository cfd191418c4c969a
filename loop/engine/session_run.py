"""How an engine's run of a session starts and ends (:class:`~loop.engine.driver.Engine`
calls these around its loop).

The start takes the session's lock and opens its journal: a new session journals its
``session.start``; a resumed one folds its journal back into the loop's state, stops
what the stopped run left running, and journals its ``resume`` (and the limits changed
on the command line). The end journals ``session.end`` whatever happened, tells the
subscribers (``loop.terminated``), closes every extension and releases the session.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import structlog

from loop._faults import crash_point
from loop._fs import make_folders, stat_nofollow
from loop.backends._process import KILL_GRACE_SECONDS
from loop.backends.base import Backend
from loop.config import LoadedConfig
from loop.engine.decide import Limits, limits_from
from loop.engine.invoke import HatCaller, session_env
from loop.engine.journal import Journal, read_journal
from loop.engine.lifecycle import LOOP_TERMINATED, SessionEnded, SessionStarted
from loop.engine.outside import OutsideEvents
from loop.engine.records import session_end, session_start
from loop.engine.resume import (
    LimitOverrides,
    journaled_limits,
    resume_records,
    streak_hat_changed,
)
from loop.engine.schedule import Schedule
from loop.engine.session_dir import SessionLock, SessionPaths, mark_latest
from loop.engine.stale import stop_stale
from loop.engine.state import LoopState, RouteContext, fold, restart_streak
from loop.errors import SessionError
from loop.events import Event
from loop.exits import exit_code_for
from loop.extensions import Extension
from loop.records import JournalRecord, LimitSettings, Override, Resume, SessionStart

__all__ = ["finish_session", "start_session"]

log = structlog.get_logger("loop.engine")


class Engine(Protocol):
    """What the start and the end use of the engine (:class:`loop.engine.driver.Engine`):
    its session, journal, state and limits, and how it journals and publishes."""

    config: LoadedConfig
    paths: SessionPaths
    resume: bool
    journal: Journal
    state: LoopState
    limits: Limits
    route_ctx: RouteContext
    schedule: Schedule
    limit_overrides: LimitOverrides
    extensions: list[Extension]
    wall_clock: Callable[[], float]
    _root: Path
    _lock: SessionLock
    _base_elapsed: float
    ended_elapsed: float | None
    _caller: HatCaller
    _extra_env: dict[str, str]
    _run_id: str
    _outside: OutsideEvents

    @property
    def backends(self) -> Mapping[str, Backend]: ...
    def _record(self, record: JournalRecord) -> None: ...
    def _elapsed(self) -> float: ...
    async def _publish_own(self, event: Event) -> None: ...


def _grace(engine: Engine) -> float:
    """How long what the stopped run left running gets between SIGTERM and SIGKILL: the
    shortest of its hats' backends' (an agent's orphan is killed at once, as it would
    be at a timeout)."""
    state = engine.state
    hats = {
        state.in_flight[a.iteration].hat for a in state.attempts if a.iteration in state.in_flight
    }
    graces = [engine.backends[h].stop_grace_seconds for h in hats if h in engine.backends]
    return min(graces, default=KILL_GRACE_SECONDS)


def _redaction(journal: Journal) -> Callable[[str], str] | None:
    """What the journal does to the text it holds (its secrets masked), or None."""
    return journal.redactor.text if journal.redactor is not None else None


async def start_session(engine: Engine) -> SessionStarted:
    """Start or resume ``engine``'s session: its folder, lock and journal (a resume stops
    what the stopped run left running first); what ``loop.started``/``resumed`` says."""
    root = engine._root
    if engine.resume and stat_nofollow(engine.paths.journal, root=root) is None:
        raise SessionError(f"session {engine.paths.session_id} has no journal to resume")
    make_folders(engine.paths.dir, root=root)
    engine._lock.acquire()
    contents = read_journal(engine.paths.journal, root=root)
    now = engine.wall_clock()
    start = session_start(engine.config, engine.paths.session_id, now)
    resumed_at: int | None = None
    override: Override | None = None
    before: LimitSettings | None = None
    if engine.resume:
        if not contents.records:
            raise SessionError(f"session {engine.paths.session_id} has no journal to resume")
        engine.state, settings, appended = resume_records(
            contents.records,
            engine.route_ctx,
            engine.config,
            engine.limit_overrides,
            pid=os.getpid(),
            now=now,
        )
        engine.limits = limits_from(settings, engine.config.loop.stale_threshold)
        first = contents.records[0]  # its session.start (resume_records checked it)
        if isinstance(first, SessionStart):  # what it ran with: an override names changes
            before = journaled_limits(engine.state, first)
        if streak_hat_changed(
            contents.records,
            engine.state,
            engine._caller.templates,
            engine.backends,
            _redaction(engine.journal),
        ):
            restart_streak(engine.state)  # the hat that repeated itself runs as changed
        if contents.torn:
            log.warning(
                "journal had a torn last line; it was dropped", journal=str(engine.paths.journal)
            )
        engine.journal.open(truncate_to=contents.good_size)
        engine._base_elapsed = engine.state.elapsed
        resumed_at = engine.state.iteration
        # what the stopped run left running goes first: no stale writer in a new attempt
        stopped = await stop_stale(engine.state.attempts, engine.paths, _grace(engine))
        for record in appended:  # resume, and the limits changed from here on
            engine._record(
                replace(record, stopped=stopped) if isinstance(record, Resume) else record
            )
        override = next((r for r in appended if isinstance(r, Override)), None)
    else:
        if contents.records or contents.torn:
            sid = engine.paths.session_id
            if fold(contents.records, engine.route_ctx).termination == "completed":
                raise SessionError(
                    f"session {sid} already exists and has completed; choose another session id"
                )
            raise SessionError(f"session {sid} already exists; use --resume to continue it")
        engine.journal.open()
        engine._record(start)
    mark_latest(engine.paths.sessions_dir, engine.paths.session_id, root=root)
    engine._caller.env = session_env(
        engine._extra_env, session_dir=engine.paths.dir, run_id=engine._run_id
    )
    return SessionStarted(
        start=start,
        session_dir=engine.paths.dir,
        resumed_at=resumed_at,
        cost_usd=engine.state.cost_usd,
        tokens=engine.state.tokens,
        override=override,
        limits_before=before,
        parallel=engine.schedule.parallel,
    )


async def finish_session(engine: Engine, reason: str, *, ended: bool) -> SessionError | None:
    """Journal the end, tell the subscribers, close every extension, release the session.

    A journal that cannot take the end record (the disk filled up) does not stop the
    rest: the recording still gets its footer and is closed. The error is returned, for
    :meth:`loop.engine.driver.Engine.run` to raise when no earlier error is on its way out
    (``ended``: the loop ended by itself, for ``reason``); the run then exits with that
    error's code, and so says the exit code the subscribers are told (the footer's).
    """
    failure: SessionError | None = None
    try:
        try:  # published in the last moments: journaled, never lost
            engine._outside.journal(engine.state.iteration, engine.wall_clock())
        except SessionError as exc:
            failure = exc
        end = session_end(
            reason,
            engine.state.iteration,
            engine._elapsed(),
            engine.wall_clock(),
            unrouted_topic=engine.state.unrouted,
        )
        engine.ended_elapsed = end.elapsed  # what the summary says: the journal's figure
        try:
            engine._record(end)
        except SessionError as exc:
            failure = failure or exc
        crash_point("session.end")  # journaled, not yet told to the recording
        engine._outside.ended = True
        code = failure.exit_code if failure is not None and ended else exit_code_for(reason)
        await engine._publish_own(
            Event(
                topic=LOOP_TERMINATED,
                source="loop",
                payload=SessionEnded(end=end, exit_code=code),
                ts=end.ts,
            )
        )
    finally:
        for ext in engine.extensions:
            try:
                await ext.aclose()
            except Exception:  # one extension's close never keeps the others open
                log.exception("extension failed to close", extension=ext.name)
        engine.journal.close()
        engine._lock.release()
    return failure
