"""Replay a recording through the real engine and compare what happens with what was recorded.

:class:`RecordingReader` indexes a recording in one streaming pass (byte offsets of the
iteration records, never their contents) and reads each iteration on demand, so memory
stays flat however large the file is. :func:`replay_recording` rebuilds the recorded
configuration in a scratch folder, runs :func:`loop.runner.run_loop` with a
:class:`~loop.backends.replay.ReplayBackend` for every hat, and compares, iteration by
iteration: the hat, its status, its trigger topics, its events (topic, payload, target;
never timestamps) and the events it published; then the iteration count and the
termination reason. The first difference stops the run and becomes a :class:`Divergence`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import anyio
import structlog
from pydantic import ValidationError

from loop.backends.replay import ReplayBackend
from loop.bus import EventBus
from loop.config import LoadedConfig, config_from_snapshot
from loop.errors import RecordingError, ReplayDivergence
from loop.events import Event
from loop.extensions import Extension
from loop.session.recording import (
    SCHEMA_VERSION,
    FooterRecord,
    HatTopology,
    HeaderRecord,
    IterationRecord,
    MarkerRecord,
    Record,
    RecordedEvent,
    config_digest,
    parse_record,
)

__all__ = ["Divergence", "RecordingReader", "ReplayResult", "compare_iteration",
           "replay_file", "replay_recording"]

log = structlog.get_logger("loop.replay")

# Terminations a replay cannot reproduce (a clock, a signal): only the prefix is compared.
_UNREPRODUCIBLE = frozenset({"interrupted", "max_runtime"})


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
        self._cache: tuple[int, IterationRecord] | None = None
        self._fh: BinaryIO = self._open()
        try:
            self.header = self._scan()
        except BaseException:
            self._fh.close()
            raise

    def _open(self) -> BinaryIO:
        try:
            return self.path.open("rb")
        except FileNotFoundError as exc:
            raise RecordingError("recording not found", file=self.path) from exc
        except IsADirectoryError as exc:
            raise RecordingError("is a folder, expected a .jsonl recording",
                                 file=self.path) from exc
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
            if not raw.strip():
                offset += size
                continue
            try:
                data = json.loads(raw)
            except ValueError as exc:
                if header is None:
                    raise self._error("not a JSONL recording: the line is not JSON",
                                      number) from exc
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
            self.warnings.append(f"{self.path}:{bad[0]}: torn last line ignored "
                                 "(the recording was cut off mid-write)")
            log.warning("recording has a torn last line; the rest replays",
                        file=str(self.path), line=bad[0])
        return header

    def _read_header(self, data: Any, number: int) -> HeaderRecord:
        if not isinstance(data, dict) or "kind" not in data:
            raise self._error("not a hatloop recording: a record has no \"kind\"", number)
        if data.get("kind") != "header":
            raise self._error(f"expected a header record first, found {data.get('kind')!r}",
                              number)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise self._error(f"unknown schema version {version!r} (this hatloop reads "
                              f"version {SCHEMA_VERSION}; re-record or upgrade)", number)
        try:
            return HeaderRecord.model_validate(data)
        except ValidationError as exc:
            raise self._error(f"invalid header: {_first_error(exc)}", number) from exc

    def _add(self, data: Any, number: int, offset: int, size: int,
             header: HeaderRecord) -> None:
        if not isinstance(data, dict):
            raise self._error("corrupt record: not a JSON object", number)
        try:
            record = parse_record(data)
        except ValidationError as exc:
            raise self._error(f"invalid record: {_first_error(exc)}", number) from exc
        if isinstance(record, IterationRecord):
            if record.iteration in self._index:
                raise self._error(f"iteration {record.iteration} is recorded twice", number)
            if record.hat not in header.hats:
                raise self._error(f"iteration {record.iteration} names hat {record.hat!r}, "
                                  "which the header does not define", number)
            self._index[record.iteration] = (offset, size, number)
        elif isinstance(record, MarkerRecord):
            self.markers.append((number, record))
        elif isinstance(record, FooterRecord):
            self.footer = record
        else:
            raise self._error("a second header record", number)

    # -- on demand ------------------------------------------------------------------

    @property
    def iterations(self) -> int:
        """How many iteration records the recording holds."""
        return len(self._index)

    @property
    def last_iteration(self) -> int:
        """The highest recorded iteration number (0 for none)."""
        return max(self._index, default=0)

    def iteration(self, number: int) -> IterationRecord | None:
        """Read iteration ``number`` from disk (the last one read is cached)."""
        if self._cache is not None and self._cache[0] == number:
            return self._cache[1]
        entry = self._index.get(number)
        if entry is None:
            return None
        offset, size, line = entry
        self._fh.seek(offset)
        try:
            record = IterationRecord.model_validate_json(self._fh.read(size))
        except ValidationError as exc:  # the file changed under us
            raise self._error(f"invalid record: {_first_error(exc)}", line) from exc
        self._cache = (number, record)
        return record

    def records(self) -> Iterator[tuple[int, Record]]:
        """Every record with its line number, streamed from disk (the torn line skipped)."""
        with self.path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if raw.strip():
                    try:
                        yield number, parse_record(json.loads(raw))
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
            raise self._error("header does not match its configuration: config_digest "
                              "differs (was the recording edited?)", 1)
        config = config_from_snapshot(header.config, base_dir=Path.cwd(),
                                      source=f"{self.path}:1 (recorded config)")
        derived = topology(config)
        for name in sorted(set(derived) | set(header.hats)):
            mine, theirs = header.hats.get(name), derived.get(name)
            if mine != theirs:
                raise self._error(f"header does not match the hats: hat {name!r} is "
                                  f"{_brief(mine)} in the header, {_brief(theirs)} in the "
                                  "recorded configuration", 1)
        if (header.starting_event, header.completion_event) != (
                config.loop.starting_event, config.loop.completion_event):
            raise self._error("header does not match the hats: starting or completion event "
                              "differs from the recorded configuration", 1)
        lost = [(n, m) for n, m in self.markers if m.marker == "write_failed"]
        if lost or (self.footer is not None and self.footer.write_failures):
            where = lost[0][0] if lost else None
            raise self._error("recording is incomplete: records were lost to write failures; "
                              "re-record it", where)
        for _, marker in self.markers:
            if marker.marker == "resumed" and marker.config_digest not in (
                    None, header.config_digest):
                self.warnings.append(f"{self.path}: resumed with a different configuration; "
                                     "the replay uses the header's")

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._fh.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def topology(config: LoadedConfig) -> dict[str, HatTopology]:
    """The hat topology a configuration implies (what a header records)."""
    return {name: HatTopology(
        description=hat.description, triggers=list(hat.triggers), publishes=list(hat.publishes),
        default_publishes=hat.default_publishes, max_activations=hat.max_activations,
        backend=str(config.hat_backend(name).type),
    ) for name, hat in config.hats.items()}


def _brief(hat: HatTopology | None) -> str:
    if hat is None:
        return "missing"
    return f"triggers={hat.triggers} publishes={hat.publishes}"


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


def _event_text(event: RecordedEvent) -> str:
    payload = json.dumps(event.payload, ensure_ascii=False)
    if len(payload) > 200:
        payload = payload[:197] + "..."
    return f"{event.topic} {payload}" + (f" -> {event.target}" if event.target else "")


def _events(raw: Any) -> list[RecordedEvent]:
    return [RecordedEvent.model_validate(e) for e in raw or []]


def _status(rec: dict[str, Any]) -> str:
    return f"{rec.get('status')}" + (f" ({rec['reason']})" if rec.get("reason") else "")


def compare_iteration(number: int, expected: IterationRecord | None, actual: dict[str, Any],
                      last: int) -> Divergence | None:
    """Compare one replayed iteration (the engine's record) with its recording."""
    hat = str(actual.get("hat"))
    if expected is None:
        what = (f"the recording ends at iteration {last}" if number > last
                else "this iteration is missing from the recording")
        return Divergence(number, what, ["(no iteration recorded)"],
                          [f"hat {hat}: {_status(actual)}"])
    if expected.hat != hat:
        return Divergence(number, "a different hat ran", [expected.hat], [hat])
    if expected.status != actual.get("status"):
        return Divergence(number, f"hat {hat}: status differs",
                          [_status(expected.model_dump())], [_status(actual)])
    checks: list[tuple[str, list[RecordedEvent], list[RecordedEvent]]] = [
        ("trigger topics differ", expected.triggers, _events(actual.get("triggers"))),
        ("events differ", expected.events, _events(actual.get("events"))),
        ("published events differ",
         [e for e in expected.published if e.source == hat],
         [e for e in _events(actual.get("published")) if e.source == hat]),
    ]
    for what, want, got in checks:
        if what.startswith("trigger"):
            same = [e.topic for e in want] == [e.topic for e in got]
        else:
            same = [e.key() for e in want] == [e.key() for e in got]
        if not same:
            return Divergence(number, f"hat {hat}: {what}", [_event_text(e) for e in want],
                              [_event_text(e) for e in got])
    return None


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
        return (f"ok       {self.path}: {self.actual_iterations} iteration(s), "
                f"{self.actual_reason or 'stopped'} in {self.duration:.2f}s{tail}")

    def raise_for_divergence(self) -> None:
        """Raise :class:`ReplayDivergence` with the readable diff if the replay diverged."""
        if self.divergence is not None:
            raise ReplayDivergence(f"{self.path}: {self.divergence.render()}")


class _Comparer(Extension):
    """Compares each iteration as it ends; stops the run at the first divergence."""

    name = "replay-compare"

    def __init__(self, reader: RecordingReader, result: ReplayResult, scope: anyio.CancelScope,
                 stop_after: int | None) -> None:
        self.reader = reader
        self.result = result
        self.scope = scope
        self.stop_after = stop_after
        self.stopped = False

    def attach(self, bus: EventBus) -> None:
        """Follow the iterations and the end of the replayed loop."""
        bus.subscribe("loop.started", self._on_started, name=self.name)
        bus.subscribe("loop.iteration.done", self._on_iteration, name=self.name)
        bus.subscribe("loop.terminated", self._on_terminated, name=self.name)

    def _stop(self) -> None:
        self.stopped = True
        self.scope.cancel()

    def _on_started(self, event: Event) -> None:
        if self.stop_after == 0:
            self._stop()

    def _on_iteration(self, event: Event) -> None:
        if self.stopped or not isinstance(event.payload, dict):
            return
        number = int(event.payload.get("iteration", 0))
        self.result.actual_iterations = number
        expected = self.reader.iteration(number)
        diff = compare_iteration(number, expected, event.payload, self.reader.last_iteration)
        if diff is not None:
            self.result.divergence = diff
            self._stop()
        elif self.stop_after is not None and number >= self.stop_after:
            self._stop()

    def _on_terminated(self, event: Event) -> None:
        if self.stopped or not isinstance(event.payload, dict):
            return
        self.result.actual_reason = str(event.payload.get("reason"))
        self.result.actual_iterations = int(event.payload.get("iterations", 0))


def replay_config(reader: RecordingReader, scratch: Path) -> LoadedConfig:
    """The recorded configuration, with every file it writes moved into ``scratch``."""
    snapshot = json.loads(json.dumps(reader.header.config))
    snapshot.setdefault("loop", {}).update(sessions_dir=".loop/sessions", durable=False)
    for section, key, value in (("tasks", "file", ".loop/tasks.json"),
                                ("themes", "workspace", ".loop/works"),
                                ("experience", "base_directory", ".loop/experiences")):
        if isinstance(snapshot.get(section), dict):
            snapshot[section][key] = value
    return config_from_snapshot(snapshot, base_dir=scratch,
                                source=f"{reader.path}:1 (recorded config)")


def _final_check(reader: RecordingReader, result: ReplayResult) -> None:
    if result.divergence is not None:
        return
    want = reader.last_iteration if result.partial else reader.iterations
    if result.actual_iterations < want:
        nxt = reader.iteration(result.actual_iterations + 1)
        result.divergence = Divergence(
            result.actual_iterations + 1, "the replayed loop ended early",
            [f"hat {nxt.hat}: {nxt.status}" if nxt else "(an iteration)"],
            [f"loop terminated: {result.actual_reason}"])
    elif not result.partial and result.expected_reason != result.actual_reason:
        result.divergence = Divergence(
            None, "termination differs",
            [f"{result.expected_reason} after {result.expected_iterations} iteration(s)"],
            [f"{result.actual_reason} after {result.actual_iterations} iteration(s)"])


async def replay_recording(path: Path) -> ReplayResult:
    """Replay ``path`` through the real engine and compare it with the recording.

    Returns the :class:`ReplayResult` (check ``.ok`` or call ``.raise_for_divergence()``).

    Raises:
        RecordingError: the recording is bad input (see :class:`RecordingReader`).
        ConfigError: the recorded configuration is not valid for this hatloop.
    """
    from loop.runner import RunOptions, run_loop  # noqa: PLC0415 - runner imports session

    started = time.perf_counter()
    with RecordingReader(path) as reader:
        reader.check_replayable()
        footer = reader.footer
        result = ReplayResult(path=path, expected_iterations=reader.iterations,
                              expected_reason=footer.reason if footer else None,
                              warnings=list(reader.warnings))
        if footer is None:
            result.partial = "the recording has no footer"
        elif footer.cap_reached:
            result.partial = "the recording reached its size cap"
        elif footer.reason in _UNREPRODUCIBLE:
            result.partial = f"the recorded run ended by {footer.reason}"
        with tempfile.TemporaryDirectory(prefix="hatloop-replay-") as tmp:
            config = replay_config(reader, Path(tmp))
            backend = ReplayBackend(reader)
            options = RunOptions(workdir=Path(tmp), session_id="replay", progress=False,
                                 backends=dict.fromkeys(config.hats, backend),
                                 handle_signals=False)
            with anyio.CancelScope() as scope:
                comparer = _Comparer(reader, result, scope,
                                     reader.last_iteration if result.partial else None)
                await run_loop(config, options, [comparer])
        _final_check(reader, result)
    result.duration = time.perf_counter() - started
    return result


def replay_file(path: Path) -> ReplayResult:
    """Synchronous :func:`replay_recording` (runs its own event loop on asyncio)."""
    return anyio.run(replay_recording, path, backend="asyncio")
