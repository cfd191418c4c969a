"""Read a recording: one streaming pass builds an index; iterations are read on demand.

:class:`RecordingReader` keeps the byte offset of each iteration record, never its
contents, so memory stays flat however large the recording is. Bad input is a
:class:`~loop.errors.RecordingError` naming the file and the line; a torn last line
(a crash mid-write) is a warning and the rest is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from loop import _json
from loop.backends.replay import ReplayIteration
from loop.config import LoadedConfig, config_digest, config_from_snapshot
from loop.engine.records import hats_record
from loop.errors import RecordingError
from loop.session.recording import (
    SCHEMA_VERSION,
    FooterRecord,
    HatTopology,
    HeaderRecord,
    IterationRecord,
    MarkerRecord,
    Record,
    parse_record,
)

__all__ = ["RecordingReader", "topology"]

log = structlog.get_logger("loop.replay")

_M = TypeVar("_M", bound=BaseModel)
READ_BUFFER = 256 * 1024  # bytes read per system call while scanning or replaying


# The first bytes of an iteration line as the recorder writes it (kind, iteration, hat).
_PREFIX = re.compile(rb'\{"kind":"iteration","iteration":([1-9][0-9]{0,17}),"hat":"([^"\\]*)",')


def _iteration_prefix(raw: bytes) -> tuple[int, str] | None:
    """``(iteration, hat)`` of a complete line that starts like the recorder's, else None."""
    if not raw.endswith(b"\n") or (match := _PREFIX.match(raw)) is None:
        return None
    try:
        return int(match.group(1)), match.group(2).decode()
    except UnicodeDecodeError:
        return None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else str(err["msg"])


class RecordingReader:
    """A recording, indexed in one streaming pass; iterations are read on demand.

    Raises:
        RecordingError: missing, empty, not JSONL, a corrupt line before the last, an
            unknown schema version or record kind (each names the file and the line).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.footer: FooterRecord | None = None
        self.markers: list[tuple[int, MarkerRecord]] = []
        self.warnings: list[str] = []
        self.torn = False
        self._index: dict[int, tuple[int, int, int]] = {}  # iteration -> offset, size, line
        self._last = 0
        self._cache: tuple[int, ReplayIteration] | None = None
        self._fh: BinaryIO = self._open()
        try:
            self.header = self._scan()
        except BaseException:
            self._fh.close()
            raise

    def _open(self) -> BinaryIO:
        try:
            # a large buffer: the scan and a replay read the file front to back, and each
            # read is a system call (a replayed iteration is only tens of microseconds)
            return self.path.open("rb", buffering=READ_BUFFER)
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
        bad: tuple[int, str] | None = None
        for number, raw in enumerate(self._fh, start=1):
            if bad is not None:
                raise self._error(f"corrupt record ({bad[1]})", bad[0])
            size = len(raw)
            if header is not None and (found := _iteration_prefix(raw)) is not None:
                # a whole line as the recorder writes it: indexed from its first bytes, its
                # JSON read once, when replayed (a torn line has no newline: it never gets here)
                self._index_iteration(
                    found[0], found[1], number=number, offset=offset, size=size, header=header
                )
                offset += size
                continue
            if raw[:1].isspace() and not raw.strip():
                offset += size
                continue
            try:
                data = _json.loads(raw)
            except ValueError as exc:
                if header is None:
                    raise self._error(
                        "not a JSONL recording: the line is not JSON", number
                    ) from exc
                bad = (number, f"not JSON: {exc}")
                offset += size
                continue
            if header is None:
                header = self._read_header(data, number)
            else:
                self._add(data, number, offset, size, header)
            offset += size
        if header is None:
            raise self._error("empty recording (no records)")
        if bad is not None:
            self.torn = True
            self.warnings.append(
                f"{self.path}:{bad[0]}: torn last line ignored "
                "(the recording was cut off mid-write)"
            )
            log.warning(
                "recording has a torn last line; the rest replays", file=str(self.path), line=bad[0]
            )
        return header

    def _read_header(self, data: Any, number: int) -> HeaderRecord:
        if not isinstance(data, dict) or "kind" not in data:
            raise self._error('not a hatloop recording: a record has no "kind"', number)
        if data.get("kind") != "header":
            raise self._error(f"expected a header record first, found {data.get('kind')!r}", number)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise self._error(
                f"unknown schema version {version!r} (this hatloop reads "
                f"version {SCHEMA_VERSION}; re-record or upgrade)",
                number,
            )
        try:
            return HeaderRecord.model_validate(data)
        except ValidationError as exc:
            raise self._error(f"invalid header: {_first_error(exc)}", number) from exc

    def _add(self, data: Any, number: int, offset: int, size: int, header: HeaderRecord) -> None:
        if not isinstance(data, dict):
            raise self._error("corrupt record: not a JSON object", number)
        if data.get("kind") == "iteration":
            # Indexed from the plain data; the whole record is validated when it is read
            # (once per replayed iteration, not twice): a bad one is the same error then.
            iteration, hat = data.get("iteration"), data.get("hat")
            if not (
                type(iteration) is int and iteration >= 1 and isinstance(hat, str)
            ):  # not indexable: the model says exactly what is wrong
                self._parse(data, number)
                raise self._error("invalid record: iteration or hat", number)
            self._index_iteration(
                iteration, hat, number=number, offset=offset, size=size, header=header
            )
            return
        record = self._parse(data, number)
        if isinstance(record, MarkerRecord):
            self.markers.append((number, record))
        elif isinstance(record, FooterRecord):
            self.footer = record
        else:
            raise self._error("a second header record", number)

    def _index_iteration(
        self, iteration: int, hat: str, *, number: int, offset: int, size: int, header: HeaderRecord
    ) -> None:
        if iteration in self._index:
            raise self._error(f"iteration {iteration} is recorded twice", number)
        if hat not in header.hats:
            raise self._error(
                f"iteration {iteration} names hat {hat!r}, which the header does not define",
                number,
            )
        self._index[iteration] = (offset, size, number)
        self._last = max(self._last, iteration)

    def _parse(self, data: dict[str, Any], number: int) -> Record:
        try:
            return parse_record(data)
        except ValidationError as exc:
            raise self._error(f"invalid record: {_first_error(exc)}", number) from exc

    # -- on demand ------------------------------------------------------------------

    @property
    def iterations(self) -> int:
        """How many iteration records the recording holds."""
        return len(self._index)

    @property
    def last_iteration(self) -> int:
        """The highest recorded iteration number (0 for none)."""
        return self._last

    def iteration(self, number: int) -> IterationRecord | None:
        """Read iteration ``number`` from disk, the whole record, validated."""
        return self._read(number, IterationRecord)

    def replay_iteration(self, number: int) -> ReplayIteration | None:
        """What replay needs of iteration ``number``, validated (the last one is cached).

        Replay asks for each iteration twice (to serve it, then to compare): the second
        time is the cache.
        """
        if self._cache is not None and self._cache[0] == number:
            return self._cache[1]
        record = self._read(number, ReplayIteration)
        if record is not None:
            self._cache = (number, record)
        return record

    def _read(self, number: int, model: type[_M]) -> _M | None:
        entry = self._index.get(number)
        if entry is None:
            return None
        offset, size, line = entry
        self._fh.seek(offset)
        try:
            return model.model_validate_json(self._fh.read(size))
        except ValidationError as exc:
            raise self._error(f"invalid record: {_first_error(exc)}", line) from exc

    def records(self) -> Iterator[tuple[int, Record]]:
        """Every record with its line number, streamed from disk (the torn line skipped)."""
        with self.path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if raw.strip():
                    try:
                        yield number, parse_record(_json.loads(raw))
                    except ValueError:  # only the torn last line gets here after the scan
                        return

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
        derived = topology(config)
        for name in sorted(set(derived) | set(header.hats)):
            mine, theirs = header.hats.get(name), derived.get(name)
            if mine != theirs:
                raise self._error(
                    f"header does not match the hats: hat {name!r} is "
                    f"{_brief(mine)} in the header, {_brief(theirs)} in the "
                    "recorded configuration",
                    1,
                )
        if (header.starting_event, header.completion_event) != (
            config.loop.starting_event,
            config.loop.completion_event,
        ):
            raise self._error(
                "header does not match the hats: starting or completion event "
                "differs from the recorded configuration",
                1,
            )
        lost = [(n, m) for n, m in self.markers if m.marker == "write_failed"]
        if lost or (self.footer is not None and self.footer.write_failures):
            where = lost[0][0] if lost else None
            raise self._error(
                "recording is incomplete: records were lost to write failures; re-record it", where
            )
        for _, marker in self.markers:
            if marker.marker == "resumed" and marker.config_digest not in (
                None,
                header.config_digest,
            ):
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


def topology(config: LoadedConfig) -> dict[str, HatTopology]:
    """The hat topology a configuration implies (what a header records)."""
    return {name: HatTopology(**hat) for name, hat in hats_record(config).items()}


def _brief(hat: HatTopology | None) -> str:
    if hat is None:
        return "missing"
    return f"triggers={hat.triggers} publishes={hat.publishes}"
