"""Replay a recording through the real engine and compare what happens with what was recorded.

:func:`replay_recording` reads the recording with a streaming
:class:`~loop.session.reader.RecordingReader` (iterations are read on demand, so memory
stays flat), rebuilds the recorded configuration in a scratch folder, runs
:func:`loop.runner.run_loop` with a :class:`~loop.backends.replay.ReplayBackend` for every
hat, and compares, iteration by iteration: the hat, the tool calls made in its context
(each call's tool, channel, input, and result or error), its status, its trigger topics,
its events (topic, payload, target; never timestamps) and the events it published; the
events published between iterations; then the termination reason and the iteration
count the footer gives (not for a prefix: a recording cut by its cap, without a footer,
or of a run whose end a replay cannot reproduce). The first difference stops the run and
becomes a :class:`Divergence`.

The replay runs under the recorded session's id, and gives every tool call the time
it had, so the ids and times the tools derive from them come out as recorded; the
agent's calls are made again through the tools (:mod:`loop.session.calls`), so the
tool state each iteration saw (its prompt's task section, the completion gate, the
replies to ``task.*`` requests) is the recorded one. In a session with parallel hats,
the calls of the activations that ran at once are made in the order they were made in
(:func:`~loop.session.call_order.call_order`), not in the order the replay runs the activations,
and the schedule is compared too: the order the activations started and committed in, and
the pending events each started on (:func:`~loop.session.reader.schedule_start`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from structlog.contextvars import bound_contextvars

from loop.backends.replay import ReplayBackend
from loop.bus import EventBus
from loop.config import LoadedConfig, config_from_snapshot
from loop.engine.lifecycle import (
    ACTIVATION_STARTED,
    ITERATION_DONE,
    LOOP_STARTED,
    LOOP_TERMINATED,
    SessionEnded,
)
from loop.errors import ReplayDivergence, UsageError
from loop.events import Event
from loop.extensions import Extension
from loop.locations import (
    DEFAULT_EXPERIENCES_DIR,
    DEFAULT_SESSIONS_DIR,
    DEFAULT_TASKS_FILE,
    DEFAULT_WORKSPACE,
)
from loop.records import (
    EventsPublished,
    IterationEnd,
    IterationFields,
    IterationStart,
    LostCalls,
)
from loop.runner import RunOptions, run_loop, tool_context
from loop.session.call_order import CallTurns
from loop.session.calls import (
    CallReplayer,
    PathMap,
    call_groups,
    call_line,
    compare_calls,
    recorded_clock,
)
from loop.session.reader import RecordingReader, schedule_start
from loop.session.recording import HeaderRecord
from loop.tools.base import ToolContext
from loop.tools.registry import known_tools

__all__ = [
    "Divergence",
    "RecordingReader",
    "ReplayResult",
    "compare_iteration",
    "missed_published",
    "replay_config",
    "replay_file",
    "replay_paths",
    "replay_recording",
]

# Terminations a replay cannot reproduce (a clock, a signal, an internal error such as a
# full disk, an agent's program missing on the recording's machine): only the prefix is
# compared.
_UNREPRODUCIBLE = frozenset({"interrupted", "max_runtime", "error", "backend_unavailable"})


# -- comparison (pure) --------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """The first difference between a replay and its recording."""

    iteration: int | None
    what: str
    expected: list[str]
    actual: list[str]

    def render(self) -> str:
        """A readable diff: where, what, expected and actual (one item per line)."""
        where = f"iteration {self.iteration}" if self.iteration is not None else "the end"
        lines = [f"diverged at {where}: {self.what}"]
        for label, items in (("expected", self.expected), ("actual  ", self.actual)):
            lines.append(f"  {label}: {items[0] if items else '(none)'}")
            lines += [f"            {item}" for item in items[1:]]
        return "\n".join(lines)


def _event_text(event: Event) -> str:
    payload = json.dumps(event.payload, ensure_ascii=False)
    if len(payload) > 200:
        payload = payload[:197] + "..."
    return f"{event.topic} {payload}" + (f" -> {event.target}" if event.target else "")


def _status(record: IterationFields) -> str:
    return record.status + (f" ({record.reason})" if record.reason else "")


def _event_key(event: Event) -> tuple[str, bool, str, str | None]:
    """What a replay compares: topic, payload (text as is, JSON canonical) and target."""
    if isinstance(event.payload, str):
        return (event.topic, True, event.payload, event.target)
    canonical = json.dumps(event.payload, sort_keys=True, ensure_ascii=False)
    return (event.topic, False, canonical, event.target)


def _same_events(expected: Sequence[Event], actual: Sequence[Event]) -> bool:
    """Whether two event lists have the same :func:`_event_key` one by one (text payloads
    are compared as they are, without building their keys)."""
    if len(expected) != len(actual):
        return False
    for want, got in zip(expected, actual, strict=True):
        if want.topic != got.topic or want.target != got.target:
            return False
        if type(want.payload) is str and type(got.payload) is str:
            if want.payload != got.payload:
                return False
        elif _event_key(want) != _event_key(got):
            return False
    return True


def compare_iteration(
    number: int,
    expected: IterationFields | None,
    actual: IterationFields,
    last: int,
    paths: PathMap | None = None,
    *,
    lost: Sequence[LostCalls] = (),
) -> Divergence | None:
    """Compare one replayed iteration (the engine's record) with its recording.

    ``paths`` maps the recorded run's locations in tool calls to the replay's; ``lost``:
    the calls of the recorded iteration's lost attempts, as the replay made them again.
    """
    hat = actual.hat
    if expected is None:
        what = (
            f"the recording ends at iteration {last}"
            if number > last
            else "this iteration is missing from the recording"
        )
        return Divergence(
            number, what, ["(no iteration recorded)"], [f"hat {hat}: {_status(actual)}"]
        )
    if expected.hat != hat:
        return Divergence(number, "a different hat ran", [expected.hat], [hat])
    for want, got in itertools.zip_longest(expected.lost_calls, lost):
        diff = _lost_differ(number, hat, want, got, paths or PathMap())
        if diff is not None:
            return diff
    if expected.tool_calls or actual.tool_calls:
        mapped = [(paths or PathMap()).call(c) for c in expected.tool_calls]
        calls = compare_calls(mapped, actual.tool_calls)
        if calls is not None:
            return Divergence(number, f"hat {hat}: {calls[0]}", calls[1], calls[2])
    if expected.status != actual.status:
        return Divergence(
            number, f"hat {hat}: status differs", [_status(expected)], [_status(actual)]
        )
    if [e.topic for e in expected.triggers] != [e.topic for e in actual.triggers]:
        return _differ(
            number, f"hat {hat}: trigger topics differ", expected.triggers, actual.triggers
        )
    if not _same_events(expected.events, actual.events):
        return _differ(number, f"hat {hat}: events differ", expected.events, actual.events)
    want = [e for e in expected.published if e.source == hat]
    got = [e for e in actual.published if e.source == hat]
    if not _same_events(want, got):
        return _differ(number, f"hat {hat}: published events differ", want, got)
    return None


def _lost_differ(
    number: int, hat: str, want: LostCalls | None, got: LostCalls | None, paths: PathMap
) -> Divergence | None:
    """How the calls of a lost attempt, made again, differ from the recorded ones."""
    if want is None or got is None:  # the replay makes exactly the recorded attempts
        what = f"hat {hat}: the calls of attempts that did not end differ"
        return Divergence(number, what, _attempt_lines(want), _attempt_lines(got))
    calls = compare_calls([paths.call(c) for c in want.tool_calls], got.tool_calls)
    if calls is None:
        return None
    what = f"hat {hat}: attempt {want.attempt}, which did not end: {calls[0]}"
    return Divergence(number, what, calls[1], calls[2])


def _attempt_lines(lost: LostCalls | None) -> list[str]:
    if lost is None:
        return ["(none)"]
    return [f"attempt {lost.attempt}: {call_line(c)}" for c in lost.tool_calls]


def _differ(
    number: int, what: str, expected: Sequence[Event], actual: Sequence[Event]
) -> Divergence:
    return Divergence(
        number, what, [_event_text(e) for e in expected], [_event_text(e) for e in actual]
    )


# -- the run ------------------------------------------------------------------------------


@dataclass
class ReplayResult:
    """How one recording replayed."""

    path: Path
    expected_iterations: int
    actual_iterations: int = 0
    expected_reason: str | None = None
    actual_reason: str | None = None
    divergence: Divergence | None = None
    partial: str | None = None
    warnings: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """No divergence."""
        return self.divergence is None

    def summary(self) -> str:
        """One line: the verdict, iterations, termination."""
        if self.divergence is not None:
            where = self.divergence.iteration
            return f"DIVERGED {self.path}: at {'iteration ' + str(where) if where else 'the end'}"
        tail = f" (prefix only: {self.partial})" if self.partial else ""
        return (
            f"ok       {self.path}: {self.actual_iterations} iteration(s), "
            f"{self.actual_reason or 'stopped'} in {self.duration:.2f}s{tail}"
        )

    def raise_for_divergence(self) -> None:
        """Raise :class:`ReplayDivergence` with the readable diff if the replay diverged."""
        if self.divergence is not None:
            raise ReplayDivergence(f"{self.path}: {self.divergence.render()}")


class _Comparer(Extension):
    """Compares each iteration as it ends; stops the run at the first divergence."""

    name = "replay-compare"

    def __init__(
        self,
        reader: RecordingReader,
        result: ReplayResult,
        scope: anyio.CancelScope,
        stop_after: int | None,
        paths: PathMap | None = None,
        *,
        lost: Mapping[int, tuple[LostCalls, ...]] | None = None,
    ) -> None:
        self.reader = reader
        self.lost = {} if lost is None else lost  # lost attempts' calls, made again
        self.result = result
        self.scope = scope
        self.stop_after = stop_after
        self.paths = paths
        self.stopped = False
        self.matched = 0  # recorded ``published`` lines compared so far
        self.step = 0  # the recorded schedule's entries compared so far (parallel hats)
        self.last: int | None = None  # the last iteration that ended

    def attach(self, bus: EventBus) -> None:
        """Follow the iterations and the end of the replayed loop."""
        bus.subscribe(LOOP_STARTED, self._on_started, name=self.name)
        bus.subscribe(ITERATION_DONE, self._on_iteration, name=self.name)
        bus.subscribe(ACTIVATION_STARTED, self._on_activation, name=self.name)
        bus.subscribe(LOOP_TERMINATED, self._on_terminated, name=self.name)

    def _stop(self) -> None:
        self.stopped = True
        self.scope.cancel()

    def _on_started(self, event: Event) -> None:
        if self.stop_after == 0:
            self._stop()

    def _scheduled(self, entry: str, number: int, hat: str) -> bool:
        """Compare the next entry of a parallel session's schedule (True: it differs): an
        activation's start (with the pending events it runs on) or its commit."""
        recorded = self.reader.schedule
        if not recorded:
            return False
        if self.step < len(recorded) and recorded[self.step] == "resume":
            self.step += 1  # the recorded session was resumed here: the replay goes on
        want = recorded[self.step] if self.step < len(recorded) else None
        self.step += 1
        if want == entry:
            return False
        context = recorded[max(self.step - 4, 0) : self.step - 1]
        what = "the schedule differs (the order activations started and committed in)"
        started = f"start {number} {hat} on events "
        if want is not None and want.startswith(started) and entry.startswith(started):
            what = f"hat {hat}: the activation started on other pending events"
        self.result.divergence = Divergence(
            number, what, [*context, want or "(nothing more)"], [*context, entry]
        )
        self._stop()
        return True

    def _on_activation(self, event: Event) -> None:
        start = event.payload
        if not self.stopped and isinstance(start, IterationStart):
            entry = schedule_start(start.iteration, start.hat, start.triggers)
            self._scheduled(entry, start.iteration, start.hat)

    def _on_iteration(self, event: Event) -> None:
        if self.stopped or not isinstance(event.payload, IterationEnd):
            return
        number = event.payload.iteration
        self.last = number
        if self._scheduled(f"end {number} {event.payload.hat}", number, event.payload.hat):
            return
        self.result.actual_iterations = max(self.result.actual_iterations, number)
        expected = self.reader.iteration(number)
        last = self.reader.last_iteration
        # events recorded as published before this iteration that the replay did not
        # publish (an extension of the recorded run is missing) are the first difference
        diff = missed_published(self.reader, self.matched, number - 1) or compare_iteration(
            number, expected, event.payload, last, self.paths, lost=self.lost.get(number, ())
        )
        if diff is not None:
            self.result.divergence = diff
            self._stop()
        elif self.stop_after is not None and number >= self.stop_after:
            self._stop()

    def published(self, record: EventsPublished) -> None:
        """Compare events published between iterations with the next recorded ones."""
        if self.stopped:
            return
        recorded = self.reader.published
        want = recorded[self.matched][1] if self.matched < len(recorded) else None
        self.matched += 1
        if want is not None and (want.after, list(map(_event_key, want.events))) == (
            record.after,
            list(map(_event_key, record.events)),
        ):
            return
        self.result.divergence = Divergence(
            record.after or None,
            f"the events published after iteration {record.after} (outside any iteration) differ",
            [f"after {want.after}: {_event_text(e)}" for e in want.events] if want else [],
            [f"after {record.after}: {_event_text(e)}" for e in record.events],
        )
        self._stop()

    def _on_terminated(self, event: Event) -> None:
        if self.stopped or not isinstance(event.payload, SessionEnded):
            return
        self.result.actual_reason = event.payload.end.reason
        self.result.actual_iterations = event.payload.end.iterations


def replay_paths(header: HeaderRecord, ctx: ToolContext) -> PathMap:
    """The recorded run's tool locations (from its workdir and configuration) mapped to
    the replay's (``ctx``, in its scratch folder)."""
    if not header.workdir:
        return PathMap()
    workdir = Path(header.workdir)
    config = header.config

    def recorded(section: str, key: str, default: str) -> Path:
        value = config.get(section, {}).get(key) if isinstance(config.get(section), dict) else None
        path = Path(value if isinstance(value, str) and value else default)
        return path if path.is_absolute() else workdir / path

    locations = {
        "workdir": (workdir, ctx.root),
        "workspace": (recorded("themes", "workspace", DEFAULT_WORKSPACE), ctx.workspace),
        "experiences": (
            recorded("experience", "base_directory", DEFAULT_EXPERIENCES_DIR),
            ctx.experiences_base,
        ),
        "sessions": (recorded("loop", "sessions_dir", DEFAULT_SESSIONS_DIR), ctx.sessions_dir),
    }
    if ctx.tasks_file is not None:
        locations["tasks"] = (recorded("tasks", "file", DEFAULT_TASKS_FILE), ctx.tasks_file)
    return PathMap.of(locations)


def replay_config(reader: RecordingReader, scratch: Path) -> LoadedConfig:
    """The recorded configuration, with every file it writes moved into ``scratch``."""
    snapshot = json.loads(json.dumps(reader.header.config))
    snapshot.setdefault("loop", {}).update(sessions_dir=DEFAULT_SESSIONS_DIR, durable=False)
    for section, key, value in (
        ("tasks", "file", DEFAULT_TASKS_FILE),
        ("themes", "workspace", DEFAULT_WORKSPACE),
        ("experience", "base_directory", DEFAULT_EXPERIENCES_DIR),
    ):
        if isinstance(snapshot.get(section), dict):
            snapshot[section][key] = value
    return config_from_snapshot(
        snapshot, base_dir=scratch, source=f"{reader.path}:1 (recorded config)"
    )


def missed_published(reader: RecordingReader, matched: int, upto: int) -> Divergence | None:
    """The first recorded ``published`` line after iteration ``upto`` at the latest that
    the replay has not published (its first ``matched`` were), as a divergence."""
    recorded = reader.published
    missed = next(
        (r for _, r in itertools.islice(recorded, matched, None) if r.after <= upto), None
    )
    if missed is None:
        return None
    return Divergence(
        missed.after or None,
        f"events published after iteration {missed.after} (outside any iteration) "
        "were not published on replay",
        [_event_text(e) for e in missed.events],
        [],
    )


def _final_check(reader: RecordingReader, result: ReplayResult, published: int) -> None:
    if result.divergence is not None:
        return
    want = reader.last_iteration if result.partial else reader.iterations
    # recorded events published between iterations that the replay did not publish: the
    # likely cause of what follows (an extension of the recorded run is missing), first
    if missed := missed_published(reader, published, result.actual_iterations):
        result.divergence = missed
    elif result.actual_iterations < want:
        nxt = reader.iteration(result.actual_iterations + 1)
        result.divergence = Divergence(
            result.actual_iterations + 1,
            "the replayed loop ended early",
            [f"hat {nxt.hat}: {nxt.status}" if nxt else "(an iteration)"],
            [f"loop terminated: {result.actual_reason}"],
        )
    elif not result.partial and reader.footer is not None:  # a whole recording: its end
        result.divergence = _end_divergence(
            reader.footer.reason,
            reader.footer.iterations,
            result.actual_reason,
            result.actual_iterations,
        )


def _end_divergence(
    reason: str, iterations: int, actual_reason: str | None, actual_iterations: int
) -> Divergence | None:
    """The recorded end (the footer's reason and iteration count) against the replay's."""
    if (reason, iterations) == (actual_reason, actual_iterations):
        return None
    what = (
        "termination differs"
        if reason != actual_reason
        else f"the iteration count differs: the footer says {iterations}, "
        f"the replay ran {actual_iterations}"
    )
    return Divergence(
        None,
        what,
        [f"{reason} after {iterations} iteration(s)"],
        [f"{actual_reason} after {actual_iterations} iteration(s)"],
    )


async def replay_recording(
    path: str | os.PathLike[str], extensions: Sequence[Extension] = ()
) -> ReplayResult:
    """Replay ``path`` through the real engine and compare it with the recording.

    ``extensions``: extensions of your own that took part in the recorded run (the
    configuration brings the task, theme and experience ones); what they publish
    between iterations is compared with the recording's ``published`` lines.

    Returns the :class:`ReplayResult` (check ``.ok`` or call ``.raise_for_divergence()``).

    Raises:
        RecordingError: the recording is bad input (see :class:`RecordingReader`).
        ConfigError: the recorded configuration is not valid for this hatloop.
    """
    path = Path(path)
    # the replayed engine's log lines (a hat exhausted ...) say which recording they are of
    with bound_contextvars(recording=str(path)):
        return await _replay(path, extensions)


async def _replay(path: Path, extensions: Sequence[Extension]) -> ReplayResult:
    started = time.perf_counter()
    with RecordingReader(path) as reader:
        reader.check_replayable()
        footer = reader.footer
        result = ReplayResult(
            path=path,
            expected_iterations=reader.iterations,
            expected_reason=footer.reason if footer else None,
            warnings=list(reader.warnings),
        )
        if footer is None:
            result.partial = "the recording has no footer"
        elif footer.cap_reached:
            result.partial = "the recording reached its size cap"
        elif footer.reason in _UNREPRODUCIBLE:
            result.partial = f"the recorded run ended by {footer.reason}"
        with tempfile.TemporaryDirectory(prefix="hatloop-replay-") as tmp:
            config = replay_config(reader, Path(tmp))
            paths = replay_paths(reader.header, tool_context(config, Path(tmp)))
            turns = (  # parallel hats: the calls of activations in flight together, in order
                CallTurns(reader.schedule, lambda n: call_groups(reader.iteration(n)))
                if reader.schedule and reader.file_events
                else None
            )
            replayer = CallReplayer(known_tools, tool_context(config, Path(tmp)), paths, turns)
            backend = ReplayBackend(reader, replayer, writes_events=reader.file_events)
            options = RunOptions(
                workdir=Path(tmp),
                session_id=reader.header.session_id,  # the ids the tools derive from it
                progress=False,
                backends=dict.fromkeys(config.hats, backend),
                handle_signals=False,
                scheduled_overrides=reader.overrides,  # a resume's limits, at its point
                streak_restarts=reader.streak_restarts,  # a resume that went on, stale
                call_clock=recorded_clock(reader.iteration),
                commit_order=reader.recorded_order,  # parallel hats: as recorded
            )
            with anyio.CancelScope() as scope:
                comparer = _Comparer(
                    reader,
                    result,
                    scope,
                    reader.last_iteration if result.partial else None,
                    paths,
                    lost=replayer.lost,
                )
                try:
                    own = [comparer] if turns is None else [comparer, turns]
                    await run_loop(config, options, [*own, *extensions])
                except ReplayDivergence as exc:  # a parallel schedule that cannot go on
                    if result.divergence is None:
                        result.divergence = Divergence(
                            comparer.last, "the schedule differs", [], [exc.message]
                        )
        _final_check(reader, result, comparer.matched)
    result.duration = time.perf_counter() - started
    return result


def replay_file(path: str | os.PathLike[str], extensions: Sequence[Extension] = ()) -> ReplayResult:
    """Synchronous :func:`replay_recording` (runs its own event loop on asyncio).

    ``extensions``: extensions of your own that took part in the recorded run, as for
    :func:`replay_recording`.

    Raises:
        UsageError: called where an event loop is already running (async code, a
            notebook), which cannot run another: await :func:`replay_recording` there.
        RecordingError: the recording is bad input (see :class:`RecordingReader`).
        ConfigError: the recorded configuration is not valid for this hatloop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # none: this thread may run one
        return anyio.run(replay_recording, path, extensions, backend="asyncio")
    raise UsageError(
        "replay_file() cannot run inside a running event loop (async code, a notebook): "
        "await replay_recording(path) there instead"
    )
