"""The session journal: an append-only JSONL file that is the session's truth.

Each line is one record (``{"kind": ..., "ts": ...}``). The engine appends a
record, then applies it to its state; a restarted engine reads the records back.
A torn last line (a crash mid-write) is dropped deterministically and cut off
before the next append; a line that cannot be parsed in the middle is an error
naming the file and the line, never a silent reset.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop import _json
from loop._faults import crash_armed
from loop._fs import fsync_dir, write_all
from loop.errors import SessionError

__all__ = ["Journal", "JournalContents", "read_journal"]

# Records after which the journal is synced to disk when durability is on. The sync is
# ``fdatasync`` where the platform has it: it flushes the appended bytes and the file
# size (what reading them back needs), not the timestamps, and on Linux costs a little
# less than ``fsync`` per commit. A durable journal's folder entry is synced once, when
# the journal is opened, so a new session's journal itself survives a power cut.
_sync = getattr(os, "fdatasync", os.fsync)
_DURABLE_KINDS = frozenset(
    {"session.start", "iteration.end", "session.end", "hat.exhausted", "resume"}
)


class JournalContents:
    """Records read from a journal, and where its last complete line ends."""

    def __init__(self, records: list[dict[str, Any]], good_size: int, torn: bool) -> None:
        self.records = records
        self.good_size = good_size
        self.torn = torn


def read_journal(path: Path) -> JournalContents:
    """Read every complete record.

    Raises:
        SessionError: a line other than the last cannot be parsed (names the line).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalContents([], 0, False)
    except OSError as exc:
        raise SessionError(f"{path}: cannot read journal: {exc.strerror or exc}") from exc
    records: list[dict[str, Any]] = []
    offset = 0
    number = 0
    torn = False
    while offset < len(data):
        end = data.find(b"\n", offset)
        number += 1
        last = end == -1
        line = data[offset:] if last else data[offset:end]
        try:
            rec = _json.loads(line)
            if not isinstance(rec, dict) or "kind" not in rec:
                raise ValueError("not a journal record")  # noqa: TRY301 - same handling as bad JSON
        except ValueError as exc:
            if last:  # a crash mid-write: only the final line may be torn
                torn = True
                break
            raise SessionError(
                f"{path}:{number}: corrupt journal line ({exc}); the session "
                "cannot be derived: fix or remove that line"
            ) from exc
        if last:  # complete JSON but no newline: the write was cut right at the end
            torn = True
            break
        records.append(rec)
        offset = end + 1
    return JournalContents(records, offset, torn)


class Journal:
    """Appends records; one ``write`` per batch of lines, a sync at commit points if durable."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self._fd: int | None = None
        self._size = 0  # bytes of whole lines: where a failed write is cut back to

    def open(self, *, truncate_to: int | None = None) -> None:
        """Open for appending, first cutting a torn tail at ``truncate_to`` if given."""
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        if truncate_to is not None and self._size > truncate_to:
            os.ftruncate(self._fd, truncate_to)
            self._size = truncate_to
        if self.durable:  # the file's entry in its folder, once: later syncs cover the data
            with contextlib.suppress(OSError):
                fsync_dir(self.path.parent)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line."""
        self.append_many((record,))

    def append_many(self, records: Sequence[dict[str, Any]]) -> list[bytes]:
        """Write records as lines, with one ``write``; sync once if any is a commit point.

        Returns the lines written, one per record.
        """
        fd = self._fd
        if fd is None:
            raise SessionError(f"{self.path}: journal is not open")
        lines = [_json.dumps_record_line(r) for r in records]
        if records[0].get("kind") == "iteration.end" and crash_armed("journal.write"):
            os.write(fd, lines[0][: len(lines[0]) // 2])  # a torn line, as a crash mid-write
            os.kill(os.getpid(), signal.SIGKILL)
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        try:
            write_all(fd, data)
        except OSError as exc:  # disk full, I/O error: leave no half line behind
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise SessionError(
                f"{self.path}: cannot append to the journal: {exc.strerror or exc}"
            ) from exc
        self._size += len(data)
        if self.durable and any(r.get("kind") in _DURABLE_KINDS for r in records):
            _sync(fd)
        return lines

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
