"""``loop watch [ID]`` (and ``status --follow``): follow a session from another terminal.

Everything comes from the session's files (:mod:`loop.session.follow`): the journal's
records as they are written, the events of each activation in flight as its hat emits
them (parallel hats run several at once), and the lock that tells whether a process
still runs it. One line per iteration (and per limit waited out) on stdout, the live
status line below them on a terminal, until the session ends; the exit code is the
session's own. A session that is already over is shown and its code returned at once;
a named session that does not exist yet is waited for.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import anyio

from loop._log import live_line_allowed, use_colors
from loop.commands.common import (
    add_sessions_options,
    run_interruptible,
    sessions_root,
)
from loop.commands.live import LiveView
from loop.engine.collect import EVENTS_FILE_NAME
from loop.engine.lifecycle import Waiting, spent
from loop.engine.progress import usage_text
from loop.engine.session_dir import SessionPaths
from loop.engine.state import LoopState, RouteContext, apply
from loop.errors import InputError
from loop.exits import EXIT_INTERRUPTED, exit_code_for
from loop.records import (
    EventMalformed,
    EventsPublished,
    HatExhausted,
    IterationEnd,
    IterationStart,
    JournalRecord,
    Resume,
    SessionEnd,
    SessionStart,
    Wait,
    encode_record,
)
from loop.session.follow import EventsTail, JournalTail, is_running
from loop.session.store import find_session, latest_session

__all__ = ["add_color_option", "register", "watch"]

POLL_SECONDS = 0.2  # how often the files are looked at
CATCH_UP = 10  # iterations shown, at most, of a session already under way


def add_color_option(p: argparse.ArgumentParser) -> None:
    """``--color``, as ``watch`` and ``status --follow`` take it."""
    p.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour, and the live status line on a terminal (default: auto)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``watch``."""
    p = sub.add_parser(
        "watch",
        help="follow a running session from its files until it ends",
        description="Follow a session from another terminal, from its files alone, until "
        "it ends; exit with the session's exit code.",
    )
    p.add_argument(
        "session_id",
        nargs="?",
        metavar="ID",
        help="default: the most recent; a session that does not exist yet is waited for",
    )
    add_sessions_options(p)
    add_color_option(p)
    p.add_argument("--json", action="store_true", help="the journal's records, as JSON lines")
    p.set_defaults(handler=watch)


def watch(args: argparse.Namespace) -> int:
    """Follow the session ``args`` names; its exit code."""
    root, trusted = sessions_root(args)
    sid = args.session_id or latest_session(root, root=trusted)
    if sid is None:
        raise InputError(f"no session in {root}: give the id of a session to wait for")
    # a session that does not exist yet is waited for: a prefix names only one that does
    found = find_session(root, sid, root=trusted)
    paths = SessionPaths(root, found or sid, root=trusted)
    live = not args.json and live_line_allowed(args.color, sys.stdout)
    view = LiveView(stream="stdout", live=live, colors=use_colors(args.color, sys.stdout))
    follower = _Follower(paths, view, json=bool(args.json))
    try:
        return int(run_interruptible(follower.run))  # SIGTERM, SIGHUP: as Ctrl-C
    finally:
        view.stop()


@dataclass(frozen=True, slots=True)
class _Running:
    """An attempt at an iteration in flight: what watch follows (its events file)."""

    iteration: int
    hat: str
    attempt: int


def _running(state: LoopState) -> list[_Running]:
    """The attempts in flight, as the journal folded into ``state`` says: one per
    iteration started and not ended (a resume closes them all; at the session's end,
    watch stops), in the order of their numbers; each iteration's attempt is its last
    start's."""
    return [
        _Running(
            number,
            flight.hat,
            max((a.attempt for a in state.attempts if a.iteration == number), default=1),
        )
        for number, flight in sorted(state.in_flight.items())
    ]


@dataclass
class _Follower:
    paths: SessionPaths
    view: LiveView
    json: bool = False
    state: LoopState = field(default_factory=LoopState)
    ctx: RouteContext | None = None
    followed: dict[_Running, EventsTail] = field(default_factory=dict)  # their events

    async def run(self) -> int:
        tail = JournalTail(self.paths.journal, root=self.paths.trusted)
        if not self.paths.journal.exists():
            print(f"waiting for session {self.paths.session_id} to start", file=sys.stderr)
        catching_up = True
        while True:
            records = tail.read()
            if catching_up and records:
                records = self._catch_up(records)
                catching_up = False
            for record in records:
                self._take(record)
            if self.state.termination is not None and self.ctx is not None:
                return exit_code_for(self.state.termination)
            if self.ctx is None and self.paths.journal.exists() and not is_running(self.paths):
                if not (records := tail.read()):  # made by a run that stopped at once
                    raise InputError(f"{self.paths.journal}: no session.start record")
                catching_up = False
                for record in self._catch_up(records):
                    self._take(record)
                continue
            if self.ctx is not None and not records and not is_running(self.paths):
                for record in tail.read():  # its last words, written before it let go
                    self._take(record)
                if self.state.termination is not None:
                    return exit_code_for(self.state.termination)
                self._say(
                    f"session {self.paths.session_id} stopped without an end "
                    f"(killed?): resume with python -m loop run --resume {self.paths.session_id}"
                )
                return EXIT_INTERRUPTED
            self._follow()
            await anyio.sleep(POLL_SECONDS)

    # -- records ----------------------------------------------------------------------

    def _catch_up(self, records: list[JournalRecord]) -> list[JournalRecord]:
        """Of a session under way, fold all but the last :data:`CATCH_UP` iterations
        quietly, saying how many; the rest is shown as it would have been."""
        ends = [i for i, r in enumerate(records) if isinstance(r, IterationEnd)]
        if len(ends) <= CATCH_UP or self.json:
            return records
        cut = ends[-CATCH_UP - 1] + 1
        for record in records[:cut]:
            self._apply(record)
        self._say(f"  ... {len(ends) - CATCH_UP} earlier iteration(s)")
        return records[cut:]

    def _apply(self, record: JournalRecord) -> None:
        if isinstance(record, SessionStart):
            self.ctx = RouteContext.from_start(record)
            self.view.session(record.session_id)
            self._say(
                f"session {record.session_id} · started {record.started_at} · "
                f"{len(record.hats)} hat(s): {', '.join(record.hats)}",
                quiet=self.json,
            )
        if self.ctx is not None:
            apply(self.state, record, self.ctx)

    def _take(self, record: JournalRecord) -> None:
        """Show ``record``."""
        self._apply(record)
        if self.json:
            sys.stdout.write(encode_record(record).decode())
            sys.stdout.flush()
            return
        match record:
            case IterationStart():
                self.view.start()
                self.view.iteration_started(
                    record.iteration, record.hat, record.ts, spent(self.state)
                )
            case IterationEnd():
                self._say(_iteration_line(record))
                self.view.iteration_ended(record)
            case Wait():
                self._say(_wait_line(record))
                if record.until > time.time():  # the live line counts down to its end
                    self.view.waiting(Waiting(record.limit.replace("_", " "), record.until, record))
            case EventsPublished():
                topics = ", ".join(e.topic for e in record.events)
                self._say(f"  published outside any iteration (routed): {topics}")
            case EventMalformed():
                where = f"line {record.line}: " if record.line is not None else ""
                self._say(f"  #{record.iteration} {record.hat} dropped {where}{record.problem}")
            case HatExhausted():
                dropped = len(record.dropped)
                self._say(f"  hat {record.hat} reached max_activations: {dropped} event(s) dropped")
            case Resume():
                self._say(f"  resumed by pid {record.pid} after iteration {record.iteration}")
            case SessionEnd():
                self.view.stop()
                self._say(
                    f"session {record.reason} after {record.iterations} iteration(s) in "
                    f"{record.elapsed:.2f}s (exit {exit_code_for(record.reason)})"
                )

    def _follow(self) -> None:
        """Follow every activation in flight, as the journal says so far: a line for each
        one that started running since the last look (off a terminal, where no status
        line shows it), then what each one's hat has emitted since. One that ended is
        let go (its end line names its events), and so are those a resume or the
        session's end closed."""
        if self.json:
            return
        followed: dict[_Running, EventsTail] = {}
        for running in _running(self.state):
            tail = self.followed.get(running)
            if tail is None:
                folder = self.paths.attempt_dir(running.iteration, running.attempt)
                tail = EventsTail(folder / EVENTS_FILE_NAME, running.hat, root=self.paths.trusted)
                if not self.view.live:
                    self._say(f"  #{running.iteration} {running.hat} running")
            followed[running] = tail
        self.followed = followed
        for running, tail in followed.items():
            for event in tail.read():
                payload = _short(
                    event.payload if isinstance(event.payload, str) else str(event.payload)
                )
                self._say(f"  #{running.iteration} {event.source} emitted {event.topic}: {payload}")

    def _say(self, line: str, *, quiet: bool = False) -> None:
        if not quiet:
            self.view.print(line)


def _short(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _wait_line(rec: Wait) -> str:
    """``  #1 planner waiting out a rate limit for 34.89s, until 15:55:31: <message>``."""
    until = time.strftime("%H:%M:%S", time.localtime(rec.until))
    said = _short(rec.message)
    return (
        f"  #{rec.iteration} {rec.hat} waiting out a {rec.limit.replace('_', ' ')} for "
        f"{rec.seconds:.2f}s, until {until}" + (f": {said}" if said else "")
    )


def _iteration_line(rec: IterationEnd) -> str:
    status = "ok" if rec.status == "ok" else f"failed: {_short(rec.reason or '')}"
    parts = [f"  #{rec.iteration} {rec.hat}", status, f"{rec.duration:.2f}s"]
    topics = ", ".join(e.topic for e in rec.events)
    if topics:
        parts.append(f"events {topics}")
    if rec.tool_calls:
        parts.append(f"{len(rec.tool_calls)} hatloop tool call(s)")
    if spend := usage_text(rec.cost_usd, rec.input_tokens, rec.output_tokens):
        parts.append(spend)
    return " · ".join(parts)
