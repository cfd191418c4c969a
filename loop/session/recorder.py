"""The session recorder: a bus subscriber that writes the session as JSONL.

It listens to the engine's lifecycle events (``loop.started`` / ``loop.resumed``,
``loop.terminated``), takes each committed iteration's typed record (the ``committed``
hook) and each record of events published between iterations (the ``published`` hook),
and writes one record per line, each encoded here. Lines go out in batches, one
``write`` per batch: before every hat that waits (the engine calls
:meth:`Recorder.flush`), at least every few milliseconds while hats are instant, and at
the end. A crash leaves at most a torn last line, and the lines a crash kept from the
file are backfilled from the journal when the session resumes, with everything a run
that was not recorded did (a resume without ``--record-session``): its ``resumed``
marker, its ``override``, its iterations and ``published`` and ``start`` lines, and its
footer, each encoded as the live run encodes it. A session that has ended for good gets
the same lines, to its last footer, from :meth:`Recorder.complete`, with no run at all.

Guarantees:

* the file never passes ``max_bytes``: room for a cap marker and the footer is always
  kept, and when the next record would need it, the marker is written instead and
  recording stops (with a warning; the loop goes on). The one exception is the header,
  which makes the file a recording: it is written even when it leaves no room under the
  cap (or passes it), and then the cap is reached at once, the marker and the footer
  following it (a recording of no iteration, which replays as a prefix);
* a failed write (disk full, permission) is counted and logged, the partial line is cut
  off, and the loop goes on; the next record that gets through is preceded by a
  ``write_failed`` marker saying how many records were lost;
* one run writes the file at a time: it is created exclusively, or opened, and locked
  (``flock``) by :meth:`Recorder.claim` (``run`` claims it before the run starts; else
  the session's start does), and the lock is held until :meth:`Recorder.aclose`. A
  second writer is refused, and leaves the file as it was (``force`` cuts the file only
  once its lock is held and the session has started);
* an existing file is refused unless ``force``; ``append`` (a resumed session) adds a
  ``resumed`` marker after the previous records, and a file that holds another
  session's recording is refused before the run starts when the session is known (and
  left alone, with every record counted as a write failure, when it is not);
* values of secret-looking environment variables are redacted from every string.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from loop import _json
from loop._fs import write_all
from loop._version import __version__
from loop.bus import EventBus
from loop.config import base_digest, config_digest
from loop.engine.journal import read_journal
from loop.engine.lifecycle import (
    ACTIVATION_STARTED,
    LOOP_RESUMED,
    LOOP_STARTED,
    LOOP_TERMINATED,
    SessionEnded,
    SessionStarted,
)
from loop.engine.session_dir import JOURNAL_NAME
from loop.errors import InputError, LoopError, RecorderClosed
from loop.events import Event
from loop.extensions import Extension
from loop.records import (
    EventsPublished,
    IterationEnd,
    IterationStart,
    JournalRecord,
    SessionStart,
    encode_record,
)
from loop.redact import Redactor, redact_line
from loop.session.backfill import Held, missing_lines
from loop.session.recording import (
    HeaderRecord,
    MarkerRecord,
    RecordingRecord,
    footer_record,
    iso_time,
    iteration_data,
    published_record,
    resumed_marker,
    start_record,
)
from loop.session.target import check_target, claim_target, prepare_target

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MIN_MAX_BYTES",
    "Recorder",
    "RecorderClosed",
    "RecordingStats",
    "Redactor",
]

log = structlog.get_logger("loop.recorder")

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
# Room kept free for the cap marker and the footer; both are built to fit in it.
MARKER_RESERVE = 256
FOOTER_RESERVE = 320
MIN_MAX_BYTES = 1024
BATCH_BYTES = 64 * 1024  # a batch of lines is written once it reaches this size


_write_all = write_all  # one name to patch in tests


def _line(record: RecordingRecord | dict[str, Any], redactor: Redactor | None) -> bytes:
    """A record (or its data) as its line, with secrets redacted.

    A marker is written without the fields its kind leaves unset, so that it fits the
    room kept for it.
    """
    if isinstance(record, MarkerRecord):
        record = {k: v for k, v in vars(record).items() if v is not None}
    line = _json.dumps_record_line(record) if isinstance(record, dict) else encode_record(record)
    return redact_line(line, redactor)


@dataclass(frozen=True, slots=True)
class RecordingStats:
    """How a run's recording went: its file, the records and bytes written, its cap,
    whether it was reached, and the records lost to write failures."""

    path: str
    records: int
    bytes: int
    max_bytes: int
    cap_reached: bool
    write_failures: int


class Recorder(Extension):
    """Records one session to ``path`` (JSONL); see the module docstring for guarantees."""

    name = "recorder"

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        force: bool = False,
        append: bool = False,
        session_id: str | None = None,
        redact: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Check the target now, so a refused recording stops the run before it starts.

        ``session_id``, with ``append``: the session that will be resumed, when the caller
        knows it; an existing recording must be of that session.

        Raises:
            InputError: ``path`` exists (without ``force`` or ``append``), is a folder, a
                link or anything but a plain file, cannot be written (a missing or
                read-only folder, ``/proc``), holds another session's recording (with
                ``append`` and ``session_id``), or ``max_bytes`` is below
                :data:`MIN_MAX_BYTES`.
        """
        if max_bytes < MIN_MAX_BYTES:
            raise InputError(
                f"--record-max-bytes {max_bytes}: the cap must be at least {MIN_MAX_BYTES} bytes"
            )
        check_target(path, force=force, append=append, session_id=session_id)
        self.path = path
        self.max_bytes = max_bytes
        self.force = force
        self.append = append
        self.redactor = Redactor(os.environ if environ is None else environ) if redact else None
        self.records = 0
        self.bytes = 0
        self.write_failures = 0
        self.cap_reached = False
        self._limit = max_bytes  # the cap, or past it what a header too large took
        self._lost = 0
        self._fd: int | None = None
        self._created = False  # the claim created the file (removed if never started)
        self._started = False
        self._ready = False  # the file is claimed and prepared for the session's records
        self._disabled = False
        self._attached = False
        self._closed = False
        self._footer_written = False
        self._batch: list[bytes] = []  # lines not yet written (see flush)
        self._batched = 0
        self._batch_records = 0
        self._batch_lost = 0

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Recorder:
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def attach(self, bus: EventBus) -> None:
        """Follow the loop's lifecycle events on ``bus`` (once)."""
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        if self._attached:
            raise RecorderClosed(f"recorder for {self.path} is already attached (one-shot)")
        self._attached = True
        bus.subscribe(LOOP_STARTED, self._on_start, name="recorder")
        bus.subscribe(LOOP_RESUMED, self._on_start, name="recorder")
        bus.subscribe(LOOP_TERMINATED, self._on_terminated, name="recorder")
        bus.subscribe(ACTIVATION_STARTED, self._on_activation, name="recorder")

    def claim(self) -> None:
        """Create the file (exclusively) or open it, and lock it for this run: call it
        before the run starts, so that a file another run created or writes in the
        meantime stops this run then, rather than leave it unrecorded (idempotent; the
        session's start claims the file if no one did). :meth:`aclose` lets go of it, and
        removes the file it created if no session started.

        Raises:
            InputError: the file is there now (without ``force`` or ``append``), another
                run writes it, or it cannot be opened (one line naming it).
        """
        if self._fd is not None:
            return
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        try:
            self._fd, self._created = claim_target(self.path, append=self.append, force=self.force)
            size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot write the recording: {exc.strerror or exc}"
            ) from None
        if self.append and size + MARKER_RESERVE + FOOTER_RESERVE > self.max_bytes:
            # it could take neither the resume's records nor a cap marker: it would stay
            # as it is, and replay as the shorter session it holds
            self.close()
            raise InputError(
                f"{self.path}: the recording holds {size} bytes, too close to its cap of "
                f"{self.max_bytes} for a resume to add to it; raise --record-max-bytes "
                "or record into another file"
            )

    async def aclose(self) -> None:
        """Write what is buffered and close the file (idempotent)."""
        self.close()

    def close(self) -> None:
        """Write what is buffered, close the file and let go of its lock (idempotent). A
        file the claim created for a session that never started is removed: a run
        refused after the claim (its session locked, an unknown id) leaves no empty file
        that would refuse the next one."""
        self.flush()
        self._closed = True
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._created and not self._started and _is_at(fd, self.path):
                self.path.unlink()  # under the lock: no other run writes it yet
        except OSError as exc:
            log.warning(
                "recording: cannot remove the unused file", file=str(self.path), error=str(exc)
            )
        try:
            os.close(fd)  # the lock goes with it
        except OSError as exc:
            log.warning("recording: close failed", file=str(self.path), error=str(exc))

    def stats(self) -> RecordingStats:
        """What :meth:`describe` says, as data (``run --json``'s ``recording``)."""
        return RecordingStats(
            path=str(self.path),
            records=self.records,
            bytes=self.bytes,
            max_bytes=self.max_bytes,
            cap_reached=self.cap_reached,
            write_failures=self.write_failures,
        )

    def describe(self) -> str:
        """One line for the run summary."""
        cap = f"cap reached ({self.max_bytes} bytes)" if self.cap_reached else "cap not reached"
        return (
            f"recording {self.path}: {self.records} records, {self.bytes} bytes, {cap}, "
            f"{self.write_failures} write failure(s)"
        )

    # -- the file ---------------------------------------------------------------------

    def _open(self) -> bool:
        try:  # never through a link planted at the file (see loop.session.target)
            self.claim()  # claimed already by a run that was told to (run does)
            assert self._fd is not None  # claim() opened it or raised
            size = prepare_target(self._fd, self.path, append=self.append, force=self.force)
        except (OSError, InputError) as exc:
            self._disabled = True
            why = exc.message if isinstance(exc, InputError) else exc.strerror or str(exc)
            log.warning(
                "recording: cannot open the file; the loop goes on without it",
                file=str(self.path),
                error=why,
            )
            return False
        self.bytes = size
        self._ready = True
        return True

    def flush(self) -> None:
        """Write the buffered lines with one ``write`` (the loop is about to wait or end).

        While hats are instant the engine calls this at least every few milliseconds, and
        always before a hat that waits, so the file lags the journal by at most that. A
        batch that fails to write counts each of its records as lost, as single writes did.
        """
        if not self._batch:
            return
        data = self._batch[0] if len(self._batch) == 1 else b"".join(self._batch)
        records, lost_before = self._batch_records, self._batch_lost
        lines = len(self._batch)
        self._batch, self._batched, self._batch_records, self._batch_lost = [], 0, 0, 0
        if self._write(data, lines=lines):
            return
        self.write_failures += records
        self._lost += records + lost_before  # a lost write_failed marker is owed again

    def _queue(self, line: bytes, *, record: bool = True, owed: int = 0) -> None:
        self._batch.append(line)
        self._batched += len(line)
        self._batch_records += record
        self._batch_lost += owed
        if self._batched >= BATCH_BYTES:
            self.flush()

    def _write(self, data: bytes, *, lines: int = 1) -> bool:
        """Write whole lines; on failure cut any partial line and return ``False``."""
        if self._fd is None:
            return False
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            log.warning(
                "recording: write failed; the loop goes on",
                file=str(self.path),
                error=exc.strerror or str(exc),
                failures=self.write_failures + 1,
            )
            try:  # a half-written line would corrupt the middle of the file: cut it off
                os.ftruncate(self._fd, self.bytes)
            except OSError:
                log.warning("recording: could not cut a partial line", file=str(self.path))
            return False
        self.bytes += len(data)
        self.records += lines
        return True

    def _refused(self) -> bool:
        """Whether records are refused now: cap reached, or no usable file (counted)."""
        if self.cap_reached:
            return True
        if self._disabled:
            self.write_failures += 1
            return True
        return False

    def _put(self, record: RecordingRecord) -> None:
        """Write one record, keeping room for the cap marker and the footer."""
        if not self._refused():
            self._put_line(_line(record, self.redactor))

    def _put_line(self, line: bytes) -> None:
        """Write one accepted record's line, keeping room for the cap marker and the footer."""
        owed = self._owed_marker()
        if owed is not None:
            if not self._fits(owed, MARKER_RESERVE + FOOTER_RESERVE):
                return self._cap()
            self._queue(owed, record=False, owed=self._lost)
            self._lost = 0
        if not self._fits(line, MARKER_RESERVE + FOOTER_RESERVE):
            return self._cap(len(line))
        self._queue(line)
        return None

    def _put_header(self, header: HeaderRecord) -> None:
        """Write the header, which makes the file a recording: always, even when it
        leaves no room for the cap marker and the footer under the cap (or passes it).
        Then the cap is reached at once, and the marker and the footer follow it."""
        if self._refused():
            return
        line = _line(header, self.redactor)
        reserve = MARKER_RESERVE + FOOTER_RESERVE
        if self._fits(line, reserve):
            self._queue(line)
            return
        self._limit = self.bytes + self._batched + len(line) + reserve
        self._queue(line)
        self._cap(what=f"the header ({len(line)} bytes) leaves no room under the cap")

    def _fits(self, line: bytes, reserve: int) -> bool:
        return self.bytes + self._batched + len(line) + reserve <= self._limit

    def _cap(self, needed: int | None = None, *, what: str | None = None) -> None:
        self.flush()  # what is buffered fits: it was checked line by line
        self.cap_reached = True
        if what is None:
            what = (
                f"the next record ({needed} bytes) would pass the cap"
                if needed
                else "the next record would pass the cap"
            )
        marker = MarkerRecord(
            marker="cap_reached",
            max_bytes=self.max_bytes,
            ts=_now(),
            message=f"recording stopped: {what}",
        )
        line = _line(marker, None)
        if len(line) <= MARKER_RESERVE and self._fits(line, FOOTER_RESERVE):
            self._write(line)
        log.warning(
            "recording: size cap reached; recording stopped, the loop goes on",
            file=str(self.path),
            max_bytes=self.max_bytes,
            written=self.bytes,
        )

    # -- bus handlers -----------------------------------------------------------------

    def _on_start(self, event: Event) -> None:
        if not isinstance(event.payload, SessionStarted):
            return
        started = event.payload
        self._started = True
        if self.redactor is not None:  # secrets in backend env tables, before any record
            self.redactor.learn_from_config(started.start.config)
        if not (self._ready or self._disabled):
            self._open()
        if self._disabled or self.bytes == 0:
            self._put_header(self._header(started, event.ts))
        elif not self._same_session(started.start.session_id):
            self._disabled = True
            log.error(
                "recording: the file holds another session; nothing appended",
                file=str(self.path),
                session=started.start.session_id,
            )
        if started.resumed_at is not None:
            if not self._disabled:
                self._backfill(started)
            config = started.start.config
            if self.redactor is not None:  # as the header's digest: of what is recorded
                config = self.redactor.value(config)
            self._put(
                resumed_marker(
                    started.start.session_id,
                    started.resumed_at,
                    event.ts,
                    config_digest=started.start.config_digest,
                    base_digest=base_digest(config),
                )
            )
            if started.override is not None:  # replay applies it at the same point
                self._put(started.override)

    def _same_session(self, session_id: str) -> bool:
        if self._fd is None:
            return False
        try:
            with os.fdopen(os.dup(self._fd), "rb") as fh:  # the file opened, never a link
                fh.seek(0)
                first = _json.loads(fh.readline())
        except (OSError, ValueError):
            return False
        return isinstance(first, dict) and first.get("session_id") == session_id

    def _header(self, started: SessionStarted, ts: float) -> HeaderRecord:
        start = started.start
        config = start.config
        if self.redactor is not None:  # the digest must describe the config as recorded
            config = self.redactor.value(config)  # its secrets were learnt in _on_start
        return HeaderRecord(
            session_id=start.session_id,
            started_at=iso_time(start.ts),
            config_digest=config_digest(config),
            starting_event=start.starting_event,
            completion_event=start.completion_event,
            hats=start.hats,
            config=config,
            workdir=start.workdir,
            hatloop_version=__version__,
            python_version=sys.version.split()[0],
            redacted=self.redactor is not None,
            max_bytes=self.max_bytes,
            ts=ts,
        )

    def _recorded(self) -> Held:
        """What the file holds, to tell the journal's records it lacks (lines that are not
        JSON are skipped)."""
        held = Held()
        if self._fd is None:
            return held
        with os.fdopen(os.dup(self._fd), "rb") as fh:  # the file opened, never a link
            fh.seek(0)
            for raw in fh:
                try:
                    data = _json.loads(raw)
                except ValueError:
                    continue
                if isinstance(data, dict):
                    held.add(data)
        return held

    def _backfill(self, started: SessionStarted) -> None:
        """Record, in the journal's order, what the journal holds before this run's resume
        and the file does not (:mod:`loop.session.backfill` decides which lines)."""
        journal = started.session_dir / JOURNAL_NAME
        try:
            held = self._recorded()
            records = read_journal(journal).records
        except (OSError, LoopError) as exc:
            log.warning(
                "recording: cannot check the journal for unrecorded iterations",
                journal=str(journal),
                error=str(exc),
            )
            return
        self._put_missing(missing_lines(records, held, started.start.session_id, started.parallel))

    def _put_missing(self, lines: Sequence[RecordingRecord | IterationEnd]) -> None:
        """Record the lines taken from the journal, in its order."""
        for line in lines:
            if isinstance(line, IterationEnd):  # not only past the last one: parallel
                self._record_iteration(line)  # hats commit out of their numbers' order
            else:
                self._put(line)

    def complete(
        self, records: Sequence[JournalRecord], session_id: str, *, parallel: bool
    ) -> int | None:
        """Complete the recording of session ``session_id``, which has ended for good
        (completed or cancelled: no run will record it again), from its journal's
        ``records``: the lines the file lacks, to the last footer, taken as a resume
        takes them, with no ``resumed`` marker (no run takes the session over). For a
        recorder made with ``append``; the caller closes it.

        Returns:
            The number of lines the file lacked (0: it is whole, and nothing is written),
            or ``None`` when the file holds no recording of that session.

        Raises:
            InputError: the file cannot be claimed, prepared or read.
        """
        self.claim()
        assert self._fd is not None  # claim() opened it or raised
        try:
            self.bytes = prepare_target(self._fd, self.path, append=self.append, force=self.force)
            self._ready = True
            if self.bytes == 0 or not self._same_session(session_id):
                return None
            held = self._recorded()
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot complete the recording: {exc.strerror or exc}"
            ) from None
        start = records[0] if records else None
        if self.redactor is not None and isinstance(start, SessionStart):
            self.redactor.learn_from_config(start.config)  # as a run learns them
        missing = missing_lines(records, held, session_id, parallel, ended=True)
        self._put_missing(missing)
        self._footer_written = True  # the journal's, taken above
        self.flush()
        return len(missing)

    def committed(self, record: IterationEnd) -> None:
        """Record an iteration the engine just committed."""
        self._record_iteration(record)

    def _on_activation(self, event: Event) -> None:
        """An activation of a session with parallel hats started: its ``start`` line."""
        if isinstance(event.payload, IterationStart) and not self._refused():
            self._put(start_record(event.payload))

    def published(self, record: EventsPublished) -> None:
        """Record events the engine journaled as published between iterations."""
        self._put(published_record(record))

    def _record_iteration(self, record: IterationEnd) -> None:
        if not self._refused():
            self._put_line(_line(iteration_data(record), self.redactor))

    def _on_terminated(self, event: Event) -> None:
        if self._footer_written or not isinstance(event.payload, SessionEnded):
            return
        ended = event.payload
        self.flush()
        self._footer_written = True
        if self._disabled:
            self.write_failures += 1
            return
        owed = self._owed_marker()  # the last records lost: said before the footer
        fits = owed is not None and self.bytes + len(owed) + FOOTER_RESERVE <= self._limit
        if owed is not None and fits and self._write(owed):
            self._lost = 0
        footer = footer_record(
            ended.end,
            ended.exit_code,
            self.records,
            self.write_failures,
            cap_reached=self.cap_reached,
            ts=event.ts,
        )
        line = _line(footer, None)
        if self.bytes + len(line) <= self._limit:
            if not self._write(line):
                self.write_failures += 1
        else:
            log.warning("recording: no room left for the footer", file=str(self.path))

    def _owed_marker(self) -> bytes | None:
        """The ``write_failed`` marker owed for the records lost since the last one."""
        if not self._lost:
            return None
        lost = MarkerRecord(
            marker="write_failed",
            lost_records=self._lost,
            message=f"{self._lost} record(s) were lost to write failures",
            ts=_now(),
        )
        return _line(lost, None)


def _now() -> float:
    return time.time()


def _is_at(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not replaced since)."""
    try:
        st, here = os.fstat(fd), path.lstat()
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)
