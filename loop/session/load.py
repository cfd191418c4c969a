"""Read a session's journal or recording into a :class:`~loop.session.view.SessionView`.

The one module that reads those files for ``show``, ``events`` and ``report``: it tells
a journal (first record ``session.start``) from a recording (first record ``header``),
reads either, and builds the view. Bad input is one line naming the file (and the
line): an unknown session, a file that is neither a journal nor a recording, a corrupt
line before the last. A torn last line (a crash mid-write) is a warning, and the rest
is read.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any

from loop import _fs, _json
from loop._fs import link_error, stat_nofollow
from loop._text import iterations_text, iterations_were, them
from loop.config.models import snapshot_limits
from loop.engine.journal import read_journal
from loop.engine.session_dir import JOURNAL_NAME, LOCK_NAME, is_locked
from loop.engine.state import RouteContext, fold
from loop.errors import InputError, PathError, SessionError
from loop.events import Event
from loop.exits import exit_code_for
from loop.records import (
    EventsPublished,
    HatExhausted,
    IterationEnd,
    IterationFields,
    IterationStart,
    JournalRecord,
    LimitSettings,
    Override,
    Resume,
    SessionEnd,
    SessionStart,
    Wait,
)
from loop.session.reader import RecordingReader
from loop.session.recording import (
    FooterRecord,
    IterationRecord,
    MarkerRecord,
    PublishedRecord,
    StartRecord,
)
from loop.session.runtime import RunClock
from loop.session.store import find_session, latest_session
from loop.session.view import (
    EndView,
    EventView,
    InFlightView,
    IterationView,
    LoopEvent,
    MarkerView,
    SessionView,
    WaitView,
)

__all__ = ["load_session", "resolve_session"]


# -- finding the file ---------------------------------------------------------------------


def _journal_of(sessions_dir: Path, sid: str, root: Path | None) -> Path | None:
    """Session ``sid``'s journal, reached without links from ``root``; ``None``: none.
    Something else in its place (a folder, a pipe) is returned, for the reader to refuse
    naming it."""
    journal = sessions_dir / sid / JOURNAL_NAME
    st = stat_nofollow(journal, root=root or sessions_dir)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise link_error(journal)
    return journal if st is not None else None


def resolve_session(target: str | None, sessions_dir: Path, root: Path | None = None) -> Path:
    """The file ``target`` names: a journal or recording, a session folder, or a session id.

    ``None`` is the most recent session in ``sessions_dir``. A session named by id (or
    ``latest``) is reached without following links (from ``root``, the sessions folder
    by default); a file or folder named by path is the user's choice.

    Raises:
        InputError: nothing of that name, or no session at all; a link on the way to a
            session's journal (PathError).
    """
    if target is None:
        sid = latest_session(sessions_dir, root=root)
        journal = None if sid is None else _journal_of(sessions_dir, sid, root)
        if journal is None:
            raise InputError(f"no session in {sessions_dir}: give a session id or a file")
        return journal
    path = Path(target)
    if path.is_dir():
        if (path / JOURNAL_NAME).is_file():
            return path / JOURNAL_NAME
        raise InputError(f"{path}: a folder without a {JOURNAL_NAME}; give a file or an id")
    if path.exists():
        return path
    try:
        sid = find_session(sessions_dir, target, root=root)
    except PathError:
        raise InputError(f"{target}: no such file") from None
    journal = None if sid is None else _journal_of(sessions_dir, sid, root)
    if journal is not None:
        return journal
    raise InputError(
        f"unknown session {target!r}: no such file, and no session of that id in {sessions_dir}"
    )


def load_session(path: Path) -> SessionView:
    """Read a journal or a recording into a :class:`SessionView`.

    Raises:
        InputError: missing, empty, neither a journal nor a recording, or corrupt before
            its last line (the message names the file and the line).
    """
    kind = _first_kind(path)
    if kind == "header":
        return _from_recording(path)
    if kind == "session.start":
        return _from_journal(path)
    raise InputError(
        f"{path}: neither a session journal nor a recording (its first record is {kind!r})"
    )


def _first_kind(path: Path) -> object:
    try:
        with _fs.open_input(path) as fh:
            first = fh.readline()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a journal or a recording") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    first = _json.without_bom(first)  # as the readers of both read it
    if not first.strip():
        raise InputError(f"{path}: empty file: neither a session journal nor a recording")
    try:
        data = _json.loads(first)
    except ValueError:
        raise InputError(
            f"{path}:1: neither a session journal nor a recording (the line is not JSON)"
        ) from None
    if not isinstance(data, dict) or "kind" not in data:
        raise InputError(
            f'{path}:1: neither a session journal nor a recording (a record has no "kind")'
        )
    return data["kind"]


# -- building the view --------------------------------------------------------------------


class _Builder:
    """Collects a session's parts record by record, in file order."""

    def __init__(self, limits: LimitSettings | None) -> None:
        self.limits = limits  # the limits in force: an override names what it changes
        self.iterations: list[IterationView] = []
        self.loop_events: list[LoopEvent] = []
        self.markers: list[MarkerView] = []
        self.end: EndView | None = None
        self.running: set[int] = set()  # parallel hats: started, not ended yet
        self.overlaps: dict[int, set[int]] = {}
        self.triggers: dict[int, tuple[int, ...]] = {}  # by iteration, its last start's
        self.hat_of: dict[int, str] = {}  # by iteration started, its hat
        self.clock = RunClock()  # a journal's: where its records fall on the runtime
        self.began: dict[int, float] = {}  # by iteration, its last start's time (journal)
        self.waits: list[WaitView] = []
        self.waits_of: dict[int, list[WaitView]] = {}  # by iteration, until it commits

    def started(self, record: IterationStart | StartRecord) -> None:
        """An activation started, on the events ``record`` numbers: it runs with every
        one in flight (parallel hats)."""
        iteration = record.iteration
        for other in self.running:
            self.overlaps.setdefault(iteration, set()).add(other)
            self.overlaps.setdefault(other, set()).add(iteration)
        self.running.add(iteration)
        self.triggers[iteration] = record.triggers
        self.hat_of[iteration] = record.hat
        if isinstance(record, IterationStart) and (at := self.clock.at(record.ts)) is not None:
            self.began[iteration] = round(at, 6)

    def waited(self, record: Wait) -> None:
        """A call of an iteration in flight hit a limit, and the loop waits it out: a
        marker where it happened, and the iteration's when it commits."""
        at = self.clock.at(record.ts)
        wait = WaitView.model_validate(record, from_attributes=True).model_copy(
            update={"at": None if at is None else round(at, 6)}
        )
        self.waits.append(wait)
        self.waits_of.setdefault(record.iteration, []).append(wait)
        self.markers.append(MarkerView(kind="wait", after=self.done, message=wait.text()))

    def iteration(self, record: IterationFields) -> None:
        it = IterationView.model_validate(record, from_attributes=True)
        number = record.iteration
        # without a start line, what it consumed: a consuming iteration takes all it ran on
        seqs = self.triggers.pop(number, record.consumed)
        update: dict[str, Any] = {"trigger_seqs": seqs} if seqs else {}
        if (began := self.began.pop(number, None)) is not None:
            update["began"] = began
        if waits := self.waits_of.pop(number, None):
            update["waits"] = tuple(waits)
        self.iterations.append(it.model_copy(update=update) if update else it)
        self.running.discard(number)

    def lanes(self) -> tuple[IterationView, ...]:
        """The iterations, each with the ones it ran with (an attempt a kill cut short
        included: a resume runs its number again, and that is the iteration shown)."""
        known = {it.iteration for it in self.iterations}
        out = []
        for it in self.iterations:
            ran_with = sorted(self.overlaps.get(it.iteration, set()) & known)
            out.append(it.model_copy(update={"ran_with": tuple(ran_with)}) if ran_with else it)
        return tuple(out)

    def overridden(self, record: Override) -> None:
        self.markers.append(_override_marker(record, self.done, self.limits))
        self.limits = record.settings()

    def ended(self, end: EndView) -> None:
        if self.end is not None:  # ended before, then resumed: the earlier end is history
            self.markers.append(_end_marker(self.end))
        self.end = end

    def published(self, record: EventsPublished | PublishedRecord) -> None:
        """Events published between iterations: loop events, and a marker saying so."""
        events = [_event(e) for e in record.events]
        self.loop_events += [LoopEvent(after=record.after, event=e) for e in events]
        shown = ", ".join(f"{e.topic} (from {e.source})" for e in events)
        self.markers.append(
            MarkerView(
                kind="published",
                after=record.after,
                message=f"published outside any iteration, routed: {shown}",
            )
        )

    def resumed(self, message: str) -> None:
        # in flight at the kill: lost, and run again after it under the same number, so
        # whom they ran with stays theirs
        self.running.clear()
        if self.end is not None:
            self.markers.append(_end_marker(self.end))
            self.end = None
        self.markers.append(MarkerView(kind="resumed", after=self.done, message=message))

    @property
    def done(self) -> int:
        return self.iterations[-1].iteration if self.iterations else 0

    def in_flight(
        self, numbers: tuple[int, ...], records: list[JournalRecord], start: SessionStart
    ) -> tuple[InFlightView, ...]:
        """The iterations ``numbers`` (started, not ended), each with the events it runs
        on: they stay pending until it commits, numbered as the loop's own reducer
        numbers them."""
        if not numbers:
            return ()
        state = fold(records, RouteContext.from_start(start))
        pending = {p.seq: p.event for p in state.pending}
        out = []
        for number in numbers:
            seqs = self.triggers.get(number, ())
            events = tuple(_event(pending[seq]) for seq in seqs if seq in pending)
            out.append(
                InFlightView(
                    iteration=number,
                    hat=self.hat_of[number],
                    began=self.began.get(number),
                    triggers=events,
                    trigger_seqs=seqs if len(events) == len(seqs) else (),
                )
            )
        return tuple(out)


def _open_text(numbers: tuple[int, ...], end: EndView | None, *, running: bool) -> str:
    """What the iterations started and not ended are: running, left by a run that
    stopped without an end (a kill, a crash), or cut short by the session's end."""
    one = len(numbers) == 1
    if end is None:
        started = f"{iterations_text(numbers)} started and {'has' if one else 'have'} not ended"
        if running:
            return f"{started} (running)"
        return (
            f"{started}: the session's run stopped without an end, by a kill or a crash; "
            f"a resume runs {them(numbers)} again"
        )
    return (
        f"{iterations_were(numbers)} in flight as the session ended ({end.reason}): "
        f"nothing of {them(numbers)} was committed"
    )


def _end_marker(end: EndView) -> MarkerView:
    return MarkerView(
        kind="ended",
        after=end.iterations,
        message=f"{end.reason} after {end.iterations} iteration(s) (exit {end.exit_code})",
    )


def _override_marker(record: Override, after: int, before: LimitSettings | None) -> MarkerView:
    """What a resume changed from here on: the limits that differ from ``before`` (all of
    them when the earlier ones are not known) and the hats' backends."""
    changes = [
        f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in record.changes(before).items()
    ]
    # none: what it changed, the recording's header holds already (a new file)
    said = ", ".join(changes) or "the limits in the header"
    return MarkerView(kind="override", after=after, message="from here on: " + said)


def _limits_of(config: dict[str, Any]) -> LimitSettings | None:
    """The limits a session started with (None: its snapshot does not say)."""
    try:
        return snapshot_limits(config)
    except ValueError:
        return None


def _event(event: Event) -> EventView:
    return EventView.model_validate(event, from_attributes=True)


def _from_journal(path: Path) -> SessionView:
    contents = read_journal(path)  # SessionError on a bad line before the last
    records = contents.records
    if not records:
        raise SessionError(f"{path}:1: no complete record (the first line is torn)")
    start = records[0]
    if not isinstance(start, SessionStart):
        raise SessionError(f"{path}:1: the first record is {start.kind!r}, not session.start")
    build = _Builder(_limits_of(start.config))
    build.loop_events.append(LoopEvent(after=0, event=_event(start.start_event)))
    build.clock.take(start)
    for record in records[1:]:
        build.clock.take(record)
        match record:
            case IterationEnd():
                build.iteration(record)
            case IterationStart():
                build.started(record)
            case Wait():
                build.waited(record)
            case HatExhausted():
                event = _event(record.event)
                build.loop_events.append(LoopEvent(after=build.done, event=event))
                build.markers.append(
                    MarkerView(
                        kind="hat_exhausted",
                        after=build.done,
                        message=f"hat {record.hat} reached its max_activations: "
                        f"{len(record.dropped)} pending event(s) dropped, "
                        f"{event.topic} published",
                    )
                )
            case Override():
                build.overridden(record)
            case EventsPublished():
                build.published(record)
            case Resume():
                lost = record.lost()
                build.resumed(
                    f"resumed by pid {record.pid} after iteration {record.iteration}"
                    + (f" ({iterations_were(lost)} in flight and ran again)" if lost else "")
                )
            case SessionEnd():
                build.ended(
                    EndView(
                        reason=record.reason,
                        iterations=record.iterations or build.done,
                        elapsed=record.elapsed,
                        exit_code=exit_code_for(record.reason),
                    )
                )
    # every start not ended since the last resume: parallel hats commit out of order, so
    # the last start and the last end alone do not say what is open (2 may end after 3
    # and 4 started); after an end record, the ones it cut short (never committed)
    in_flight = tuple(sorted(build.running))
    running = build.end is None and is_locked(path.parent / LOCK_NAME)
    if in_flight:
        build.markers.append(
            MarkerView(
                kind="in_flight",
                after=build.done,
                message=_open_text(in_flight, build.end, running=running),
            )
        )
    warnings = (f"{path}: torn last line ignored (a crash mid-write)",) if contents.torn else ()
    elapsed, as_of = build.clock.elapsed(running=running, now=time.time())
    return SessionView(
        source="journal",
        path=str(path),
        session_id=start.session_id,
        started_at=start.started_at,
        hatloop_version=start.version,
        schema_version=start.schema_version,
        config_digest=start.config_digest,
        starting_event=start.starting_event,
        completion_event=start.completion_event,
        hats=start.hats,
        iterations=build.lanes(),
        loop_events=tuple(build.loop_events),
        markers=tuple(build.markers),
        waits=tuple(build.waits),
        end=build.end,
        in_flight=in_flight[0] if in_flight else None,
        in_flight_all=in_flight,
        in_flight_runs=build.in_flight(in_flight, records, start),
        running=running,
        elapsed=round(elapsed, 6),  # as status rounds it: both say the same figure
        elapsed_as_of=as_of,
        records=len(records),
        warnings=warnings,
    )


def _from_recording(path: Path) -> SessionView:
    with RecordingReader(path) as reader:  # every line checked; a torn last one skipped
        header, warnings = reader.header, list(reader.warnings)
        footer = reader.footer
        build = _Builder(_limits_of(header.config))
        records = 1
        last_footer_records: int | None = None
        for _, record in reader.records():
            match record:
                case IterationRecord():
                    build.iteration(record)
                case PublishedRecord():
                    build.published(record)
                case StartRecord():
                    build.started(record)
                case MarkerRecord(marker="resumed"):
                    build.resumed(record.message)
                case Override():
                    build.overridden(record)
                case MarkerRecord():
                    build.markers.append(
                        MarkerView(kind=record.marker, after=build.done, message=record.message)
                    )
                case FooterRecord():
                    last_footer_records = record.records
                    build.ended(
                        EndView(
                            reason=record.reason,
                            iterations=record.iterations,
                            elapsed=record.elapsed,
                            exit_code=record.exit_code,
                        )
                    )
                case _:
                    continue
            records += 1
    markers = tuple(build.markers)
    end = build.end
    return SessionView(
        source="recording",
        path=str(path),
        session_id=header.session_id,
        started_at=header.started_at,
        hatloop_version=header.hatloop_version,
        python_version=header.python_version,
        schema_version=header.schema_version,
        config_digest=header.config_digest,
        starting_event=header.starting_event,
        completion_event=header.completion_event,
        hats=header.hats,
        iterations=build.lanes(),
        loop_events=(
            _start_event(header.starting_event, header.config, build.iterations),
            *build.loop_events,
        ),
        markers=markers,
        end=end,
        elapsed=end.elapsed if end else max((i.elapsed for i in build.iterations), default=0.0),
        elapsed_as_of="end" if end else "last_commit",
        records=records,
        # the run summary counts the footer it writes; the footer counts what came before
        last_run_records=(
            last_footer_records + 1
            if last_footer_records is not None and build.end is not None
            else None
        ),
        write_failures=footer.write_failures if footer is not None else 0,
        cap_reached=any(m.kind == "cap_reached" for m in markers),
        redacted=header.redacted,
        warnings=tuple(warnings),
    )


def _start_event(topic: str, config: dict[str, Any], its: list[IterationView]) -> LoopEvent:
    """The starting event of a recording (which has no record of its own): as the first
    iteration received it, else as its header and configuration imply it."""
    for event in its[0].triggers if its else ():
        if event.source == "loop" and event.topic == topic:
            return LoopEvent(after=0, event=event)
    prompt = config.get("prompt", "")
    return LoopEvent(
        after=0, event=EventView(topic=topic, payload=prompt if isinstance(prompt, str) else "")
    )
