"""The session journal: an append-only JSONL file of typed records, the session's truth.

Each line is one record of :mod:`loop.records`. The engine appends a record, then
applies it to its state; a restarted engine, ``status`` and ``export`` read the records
back. A torn last line (a crash mid-write) is dropped deterministically and cut off
before the next append; any other line that is not a valid record is an error naming
the file and the line, never a silent reset.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from loop._faults import crash_armed
from loop._fs import fsync_dir, open_file, write_all
from loop.config import LoadedConfig
from loop.errors import InputError, JournalWriteError, SessionError
from loop.records import IterationStart, JournalRecord, encode_record, parse_record
from loop.redact import Redactor, redact_line

__all__ = ["Journal", "JournalContents", "journal_redactor", "read_journal"]

# When durability is on, every record but ``iteration.start`` (an in-flight marker a crash
# may lose: the iteration then runs again) is synced to disk. The sync is ``fdatasync``
# where the platform has it: it flushes the appended bytes and the file size (what
# reading them back needs), not the timestamps. A durable journal's folder entry is
# synced once, when the journal is opened, so a new session's journal survives a power cut.
_sync = getattr(os, "fdatasync", os.fsync)


@dataclass(frozen=True, slots=True)
class JournalContents:
    """Records read from a journal, and where its last complete line ends."""

    records: list[JournalRecord]
    good_size: int
    torn: bool


def read_journal(path: Path, *, root: Path | None = None) -> JournalContents:
    """Read every complete record, validated; the file is opened without following a
    link (from ``root``, see :mod:`loop._fs`).

    Raises:
        SessionError: a line other than a torn last one is not a valid record (names
            the file, the line and what is wrong), or the file cannot be read.
        PathError: a link is at the journal or on the way to it.
        StoreError: something else than a regular file is there.
    """
    try:
        fd = open_file(path, os.O_RDONLY, root=root)
    except FileNotFoundError:
        return JournalContents([], 0, False)
    except OSError as exc:
        raise SessionError(f"{path}: cannot read journal: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise SessionError(f"{path}: cannot read journal: {exc.strerror or exc}") from exc
    *lines, tail = data.split(b"\n")  # tail: what follows the last newline
    records: list[JournalRecord] = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(parse_record(line))
        except ValueError as exc:
            raise SessionError(
                f"{path}:{number}: corrupt journal line ({exc}); the session cannot be "
                "derived: fix or remove that line"
            ) from None
    # a last line without its newline was cut by a crash mid-write: it never happened
    return JournalContents(records, len(data) - len(tail), torn=bool(tail))


class Journal:
    """Appends records, one ``write`` per line, and syncs commit points when durable."""

    def __init__(
        self,
        path: Path,
        *,
        durable: bool = True,
        redactor: Redactor | None = None,
        root: Path | None = None,
    ) -> None:
        """``redactor``: the secrets to keep out of the file (as in a recording); ``root``:
        the folder the file is reached from without following links."""
        self.path = path
        self.durable = durable
        self.redactor = redactor
        self.root = root
        self._fd: int | None = None
        self._size = 0  # bytes of whole lines: where a failed write is cut back to

    def open(self, *, truncate_to: int | None = None) -> None:
        """Open for appending, first cutting a torn tail at ``truncate_to`` if given.

        The file is opened without following a link (from ``root``): a link planted
        there is refused, never appended to or cut.

        Raises:
            PathError: a link at the journal or on the way; StoreError: not a file.
        """
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            self._fd = open_file(self.path, flags, root=self.root)
        except InputError:
            raise
        except OSError as exc:
            raise SessionError(
                f"{self.path}: cannot open the journal: {exc.strerror or exc}"
            ) from exc
        self._size = os.fstat(self._fd).st_size
        if truncate_to is not None and self._size > truncate_to:
            os.ftruncate(self._fd, truncate_to)
            self._size = truncate_to
        if self.durable:  # the file's entry in its folder, once: later syncs cover the data
            with contextlib.suppress(OSError):
                fsync_dir(self.path.parent)

    def append(self, record: JournalRecord) -> None:
        """Write one record as one line; sync it if durable and a commit point.

        Raises:
            JournalWriteError: the write failed (disk full...); no partial line is left.
            SessionError: the journal is not open.
        """
        fd = self._fd
        if fd is None:
            raise SessionError(f"{self.path}: journal is not open")
        line = redact_line(encode_record(record), self.redactor)
        if record.kind == "iteration.end" and crash_armed("journal.write"):
            os.write(fd, line[: len(line) // 2])  # a torn line, as a crash mid-write
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            write_all(fd, line)
        except OSError as exc:  # disk full, I/O error: leave no half line behind
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise JournalWriteError(
                f"{self.path}: cannot append to the journal: {exc.strerror or exc}"
            ) from exc
        self._size += len(line)
        if self.durable and not isinstance(record, IterationStart):
            _sync(fd)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def journal_redactor(config: LoadedConfig) -> Redactor | None:
    """What the journal keeps out of its lines, as a recording does (``[recording]
    redact_secrets``): secret-looking environment variables, and the ``env`` tables of
    the backends."""
    if not config.recording.redact_secrets:
        return None
    redactor = Redactor(os.environ)
    redactor.learn_from_config(config.snapshot())
    return redactor
