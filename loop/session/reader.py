"""Read a recording: one streaming pass builds an index; iterations are read on demand.

:class:`RecordingReader` keeps the byte offset of each iteration record, so memory
stays bounded however large the recording is. The pass validates the first
iteration records into their typed form and keeps them, as long as their lines fit in
:data:`KEEP_PARSED` bytes, so a recording of that size is parsed exactly once; beyond
it, the pass reads only each line's kind, number and hat, and the record is validated
when it is read. Bad input is a
:class:`~loop.errors.RecordingError` naming the file and the line; a torn last line
(a crash mid-write) is a warning and the rest is read. A UTF-8 byte order mark before
the header (an editor's) is skipped, as ``loop.toml`` skips one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from loop import _fs, _json
from loop._gc import collector_paused
from loop.config import base_digest, config_digest, config_from_snapshot
from loop.engine.lanes import RESUMED, RecordedOrder
from loop.errors import PathError, RecordingError
from loop.records import HatTopology, Override, validation_message
from loop.session.recording import (
    READABLE_VERSIONS,
    FooterRecord,
    HeaderRecord,
    IterationRecord,
    MarkerRecord,
    PublishedRecord,
    RecordingRecord,
    StartRecord,
    parse_header,
    parse_iteration,
    parse_line,
)
from loop.session.store import validate_session_id

__all__ = [  # RESUMED: see loop.engine.lanes
    "RESUMED",
    "RecordingReader",
    "hat_difference",
    "schedule_start",
]


def _versions() -> str:
    *first, last = map(str, READABLE_VERSIONS)
    return f"{', '.join(first)} and {last}" if first else last


log = structlog.get_logger("loop.replay")


def schedule_start(iteration: int, hat: str, triggers: Sequence[int]) -> str:
    """The schedule's entry of an activation's start: its iteration, its hat and the
    pending events (by number) it runs on, as a replay compares them.

    >>> schedule_start(5, "synthesizer", (5, 6, 7))
    'start 5 synthesizer on events 5, 6, 7'
    """
    return f"start {iteration} {hat} on events {', '.join(map(str, triggers))}"


READ_BUFFER = 256 * 1024  # bytes read per system call while scanning or replaying
# Iteration lines (bytes) whose typed records the scan keeps: each one kept is parsed
# once instead of twice (once to index it, once when it is replayed). Kept records take
# about twice their line's size in memory.
KEEP_PARSED = 16 * 1024 * 1024


class _LineKey(BaseModel):
    """What the scan reads of a line: its kind, and an iteration's number and hat (the
    rest of an iteration line is validated when it is read)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    kind: str
    iteration: int | None = None
    hat: str | None = None
    emitted: object = None
    tool_calls: object = None
    lost_calls: object = None


class RecordingReader:
    """A recording, indexed in one streaming pass; iterations are read on demand.

    Raises:
        RecordingError: missing, empty, not JSONL, a corrupt line before the last, an
            unknown schema version or record kind (each names the file and the line).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.footer: FooterRecord | None = None
        self.markers: list[tuple[int, MarkerRecord]] = []
        self.overrides: list[Override] = []  # a resume's changed limits, in order
        # the iterations after which the recorded session went on from a stale_loop stop
        # (its stale streak started afresh there)
        self.streak_restarts: list[int] = []
        self._stale_stop: int | None = None  # a stale_loop footer, no iteration after it yet
        self.published: list[tuple[int, PublishedRecord]] = []
        # a session with parallel hats: its starts and commits in order ("start 3 hat on
        # events 4, 5": schedule_start; "end 3 hat"); empty for a sequential one, which
        # has no start lines
        self.schedule: list[str] = []
        self.commit_order: list[int] = []  # a parallel session's iterations, as committed
        self.resume_starts: list[int] = []  # activations started before each resume
        self.warnings: list[str] = []
        self.torn = False
        self._torn_line: int | None = None  # the torn last line's number, if any
        # an iteration emitted events through the events file or made tool calls (which
        # reach the engine through it): a replay's backend writes the file
        self.file_events = False
        self._index: dict[int, tuple[int, int, int]] = {}  # iteration -> offset, size, line
        self._last = 0
        self._cache: tuple[int, IterationRecord] | None = None
        self._parsed: dict[int, IterationRecord] = {}  # kept by the scan (KEEP_PARSED)
        self._kept = 0  # bytes of the lines kept in _parsed
        self._fh: BinaryIO = self._open()
        try:
            with collector_paused():  # what the scan builds lives on (see loop._gc)
                self.header = self._scan()
        except BaseException:
            self._fh.close()
            raise

    def _open(self) -> BinaryIO:
        try:
            # a large buffer: the scan and a replay read the file front to back
            return _fs.open_input(self.path, buffering=READ_BUFFER)
        except FileNotFoundError as exc:
            raise RecordingError("recording not found", file=self.path) from exc
        except IsADirectoryError as exc:
            raise RecordingError(
                "is a folder, expected a .jsonl recording", file=self.path
            ) from exc
        except OSError as exc:
            raise RecordingError(f"cannot read: {exc.strerror or exc}", file=self.path) from exc

    def _error(self, message: str, line: int | None = None) -> RecordingError:
        return RecordingError(message, file=self.path, line=line)

    def _scan(self) -> HeaderRecord:
        header: HeaderRecord | None = None
        offset = 0
        bad: tuple[int, str] | None = None  # a line that is not JSON: torn if it is the last
        for number, line in enumerate(self._fh, start=1):
            if bad is not None:
                raise self._error(f"corrupt record ({bad[1]})", bad[0])
            size = len(line)  # offsets are the file's, a byte order mark counted
            raw = _json.without_bom(line) if number == 1 else line
            if not raw.strip():
                pass
            elif header is None:
                header = self._read_header(raw, number)
            elif self._kept + size <= KEEP_PARSED and (record := _typed(raw)) is not None:
                self._add_record(record, number, offset=offset, size=size, header=header)
            else:  # the index only (or a bad line: the errors are said from here)
                try:
                    key = _LineKey.model_validate_json(raw)
                except ValidationError as exc:
                    if exc.errors()[0]["type"] != "json_invalid":
                        raise self._error(
                            f"not a recording record: {validation_message(exc)}", number
                        ) from None
                    bad = (number, f"not JSON: {validation_message(exc)}")
                else:
                    self._add(key, raw, number, offset=offset, size=size, header=header)
            offset += size
        if header is None:
            raise self._error("empty recording (no records)")
        if not any(s.startswith("start") for s in self.schedule):  # sequential
            self.schedule, self.commit_order, self.resume_starts = [], [], []
        if bad is not None:
            self.torn, self._torn_line = True, bad[0]
            self.warnings.append(
                f"{self.path}:{bad[0]}: torn last line ignored "
                "(the recording was cut off mid-write)"
            )
            log.warning(
                "recording has a torn last line; the rest replays", file=str(self.path), line=bad[0]
            )
        return header

    def _read_header(self, raw: bytes, number: int) -> HeaderRecord:
        try:
            data = _json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise self._error("not a JSONL recording: the line is not JSON", number) from exc
        if not isinstance(data, dict) or "kind" not in data:
            raise self._error('not a hatloop recording: a record has no "kind"', number)
        if data.get("kind") == "session.start":  # a journal's first record
            raise self._error(
                "a session journal, not a recording: record a session to replay with "
                "run --record-session FILE (show, events and report read a journal too)",
                number,
            )
        if data.get("kind") != "header":
            raise self._error(f"expected a header record first, found {data.get('kind')!r}", number)
        version = data.get("schema_version")
        if type(version) is int and version == 1:  # not True, not 1.0: those are no version
            raise self._error(
                "schema version 1, an older format that holds no tool calls, so what its "
                f"agents did with hatloop's tools cannot be replayed (this hatloop reads "
                f"versions {_versions()}): re-record it",
                number,
            )
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise self._error(
                f"unknown schema version {version!r} (this hatloop reads "
                f"versions {_versions()}; re-record or upgrade)",
                number,
            )
        try:
            header = parse_header(raw)
            validate_session_id(header.session_id)  # the replay names its session by it
        except (ValueError, PathError) as exc:
            raise self._error(f"invalid header: {exc}", number) from None
        return header

    def _add(
        self,
        key: _LineKey,
        raw: bytes,
        number: int,
        *,
        offset: int,
        size: int,
        header: HeaderRecord,
    ) -> None:
        if key.kind == "iteration":
            # indexed from its number and hat; the whole record is validated when it is
            # read (once per replayed iteration): a bad one is the same error then
            if key.iteration is None or key.iteration < 1 or key.hat is None:
                self._parse(raw, number)  # says exactly what is wrong
                raise self._error("invalid record: iteration or hat", number)
            self._index_iteration(
                key.iteration, key.hat, number, offset=offset, size=size, header=header
            )
            self.file_events = self.file_events or bool(
                key.emitted or key.tool_calls or key.lost_calls
            )
            return
        self._add_record(self._parse(raw, number), number, offset=offset, size=size, header=header)

    def _index_iteration(
        self, iteration: int, hat: str, number: int, *, offset: int, size: int, header: HeaderRecord
    ) -> None:
        self._check_iteration(iteration, hat, number, header)
        self._index[iteration] = (offset, size, number)
        self._went_on()
        self.schedule.append(f"end {iteration} {hat}")
        self.commit_order.append(iteration)
        self._last = max(self._last, iteration)

    def _add_record(
        self,
        record: RecordingRecord,
        number: int,
        *,
        offset: int,
        size: int,
        header: HeaderRecord,
    ) -> None:
        if isinstance(record, IterationRecord):
            self._index_iteration(
                record.iteration, record.hat, number, offset=offset, size=size, header=header
            )
            self._parsed[record.iteration] = record
            self._kept += size
            self.file_events = self.file_events or bool(
                record.emitted or record.tool_calls or record.lost_calls
            )
        elif isinstance(record, MarkerRecord):
            self.markers.append((number, record))
            if record.marker == "resumed":  # what was in flight was lost: a replay drops it
                self.schedule.append("resume")
                self.commit_order.append(RESUMED)
                self.resume_starts.append(sum(1 for s in self.schedule if s.startswith("start")))
        elif isinstance(record, Override):
            self.overrides.append(record)
        elif isinstance(record, PublishedRecord):
            self.published.append((number, record))
        elif isinstance(record, StartRecord):
            self._went_on()
            self.schedule.append(schedule_start(record.iteration, record.hat, record.triggers))
        elif isinstance(record, FooterRecord):
            self.footer = record
            if record.reason == "stale_loop":
                self._stale_stop = record.iterations
        else:
            raise self._error("a second header record", number)

    def _went_on(self) -> None:
        """An activation started or committed: after a stale_loop stop, the resume that
        went on started the stale streak afresh (as the journal's fold does)."""
        if self._stale_stop is not None:
            self.streak_restarts.append(self._stale_stop)
            self._stale_stop = None

    def _check_iteration(self, iteration: int, hat: str, number: int, header: HeaderRecord) -> None:
        """Refuse iteration ``iteration`` of line ``number`` if recorded twice or of no hat."""
        if iteration in self._index:
            raise self._error(f"iteration {iteration} is recorded twice", number)
        if hat not in header.hats:
            raise self._error(
                f"iteration {iteration} names hat {hat!r}, which the header does not define",
                number,
            )

    def _parse(self, raw: bytes, number: int) -> RecordingRecord:
        try:
            return parse_line(raw)
        except ValueError as exc:
            raise self._error(f"invalid record: {exc}", number) from None

    # -- on demand ------------------------------------------------------------------

    @property
    def recorded_order(self) -> RecordedOrder | None:
        """How a session with parallel hats committed (``None``: a sequential one)."""
        if not self.commit_order:
            return None
        return RecordedOrder(self.commit_order, self.resume_starts)

    @property
    def iterations(self) -> int:
        """How many iteration records the recording holds."""
        return len(self._index)

    @property
    def last_iteration(self) -> int:
        """The highest recorded iteration number (0 for none)."""
        return self._last

    def iteration(self, number: int) -> IterationRecord | None:
        """Iteration ``number``, read from disk and validated (the last one read is kept:
        replay asks for each iteration twice, to serve it and to compare it)."""
        if self._cache is not None and self._cache[0] == number:
            return self._cache[1]
        if (kept := self._parsed.get(number)) is not None:
            return kept
        entry = self._index.get(number)
        if entry is None:
            return None
        offset, size, line = entry
        self._fh.seek(offset)
        try:
            record = parse_iteration(self._fh.read(size))
        except ValueError as exc:
            raise self._error(f"invalid record: {exc}", line) from None
        self._cache = (number, record)
        return record

    def records(self) -> Iterator[tuple[int, RecordingRecord]]:
        """Every record with its line number, streamed from disk (the torn line skipped).

        Raises:
            RecordingError: an invalid record. The scan validated every line but the
                iterations past :data:`KEEP_PARSED` (or not valid in full: it read only
                their number and hat), so a bad field of one is found here, and it is
                bad input, not the end of the recording: only the torn last line is.
        """
        with _fs.open_input(self.path) as fh:
            for number, line in enumerate(fh, start=1):
                raw = _json.without_bom(line) if number == 1 else line
                if not raw.strip() or number == self._torn_line:
                    continue
                try:
                    record = parse_line(raw)
                except ValueError as exc:
                    raise self._error(f"invalid record: {exc}", number) from None
                yield number, record

    def check_replayable(self) -> None:
        """Check that the header agrees with its configuration and nothing was lost.

        Raises:
            RecordingError: the config digest, the hats or the events do not match the
                recorded configuration, or records were lost to write failures.
        """
        header = self.header
        if config_digest(header.config) != header.config_digest:
            raise self._error(
                "header does not match its configuration: config_digest "
                "differs (was the recording edited?)",
                1,
            )
        config = config_from_snapshot(
            header.config, base_dir=Path.cwd(), source=f"{self.path}:1 (recorded config)"
        )
        derived = config.topology()
        for name in sorted(set(derived) | set(header.hats)):
            mine, theirs = header.hats.get(name), derived.get(name)
            if mine != theirs:
                raise self._error(
                    f"header does not match the hats: {hat_difference(name, mine, theirs)}", 1
                )
        events = [
            _differs(field, in_header, in_config)
            for field, in_header, in_config in (
                ("starting_event", header.starting_event, config.loop.starting_event),
                ("completion_event", header.completion_event, config.loop.completion_event),
            )
            if in_header != in_config
        ]
        if events:
            raise self._error(f"header does not match the hats: {'; '.join(events)}", 1)
        lost = [(n, m) for n, m in self.markers if m.marker == "write_failed"]
        if lost or (self.footer is not None and self.footer.write_failures):
            where = lost[0][0] if lost else None
            raise self._error(
                "recording is incomplete: records were lost to write failures; re-record it", where
            )
        base = base_digest(header.config)
        for _, marker in self.markers:
            if marker.marker != "resumed":
                continue
            if marker.base_digest is not None:  # limits and backends are override lines
                differs = marker.base_digest != base
            else:
                differs = marker.config_digest not in (None, header.config_digest)
            if differs:
                self.warnings.append(
                    f"{self.path}: resumed with a different configuration; "
                    "the replay uses the header's"
                )

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._fh.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _typed(raw: bytes) -> RecordingRecord | None:
    """The line's typed record, or ``None`` if it is not a valid one."""
    try:
        return parse_line(raw)
    except ValueError:
        return None


def hat_difference(name: str, header: HatTopology | None, recorded: HatTopology | None) -> str:
    """How hat ``name`` in a header differs from the same hat in the recorded
    configuration: each field that differs, with both values (one line).

    >>> from dataclasses import replace
    >>> a = HatTopology(triggers=("go",), max_activations=9, backend="scripted")
    >>> hat_difference("builder", a, replace(a, max_activations=3))
    "hat 'builder': max_activations is 9 in the header, 3 in the recorded configuration"
    >>> hat_difference("ghost", a, None)
    "hat 'ghost' is in the header, not in the recorded configuration"
    """
    if recorded is None:
        return f"hat {name!r} is in the header, not in the recorded configuration"
    if header is None:
        return f"hat {name!r} is in the recorded configuration, not in the header"
    parts = [
        _differs(f.name, getattr(header, f.name), getattr(recorded, f.name))
        for f in fields(HatTopology)
        if getattr(header, f.name) != getattr(recorded, f.name)
    ]
    return f"hat {name!r}: " + "; ".join(parts)


def _differs(field: str, in_header: object, in_config: object) -> str:
    return (
        f"{field} is {_shown(in_header)} in the header, "
        f"{_shown(in_config)} in the recorded configuration"
    )


def _shown(value: object) -> str:
    """A value of a hat's topology as JSON writes it (``not set`` for none)."""
    return "not set" if value is None else json.dumps(value, ensure_ascii=False)
