"""Following a session from its files while it runs (``watch``, ``status --follow``).

A running session is its journal, which grows one record per line, its iteration folders
(the running iteration's events file fills as its hat emits), and its lock, which the
process running it holds. :class:`JournalTail` reads the records a journal gained since
the last look; :class:`EventsTail` the events an iteration's events file gained;
:func:`is_running` tells whether a process still runs the session. Nothing here writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from loop._fs import open_file
from loop.engine.collect import read_events_file
from loop.engine.session_dir import SessionPaths, is_locked
from loop.errors import SessionError
from loop.events import Event
from loop.records import JournalRecord, parse_record

__all__ = ["EventsTail", "JournalTail", "is_running"]


class JournalTail:
    """The records a journal gained since the last :meth:`read`, whole lines only.

    A line still being written (no line end yet) is read once it is complete. The
    journal is opened without following a link (from ``root``, see :mod:`loop._fs`).
    """

    def __init__(self, path: Path, *, root: Path | None = None) -> None:
        self.path = path
        self.root = root
        self._pos = 0  # bytes of the complete lines read
        self._line = 0  # their number

    def read(self) -> list[JournalRecord]:
        """The new complete records, in order (none when the journal does not exist yet).

        Raises:
            SessionError: a complete line is not a valid record (names the file and the
                line), or the journal cannot be read.
            PathError: a link is at the journal or on the way to it.
        """
        try:
            fd = open_file(self.path, os.O_RDONLY, root=self.root)
            with os.fdopen(fd, "rb") as fh:
                fh.seek(self._pos)
                data = fh.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionError(f"{self.path}: cannot read journal: {exc.strerror or exc}") from exc
        *lines, _partial = data.split(b"\n")
        records: list[JournalRecord] = []
        for line in lines:
            self._line += 1
            self._pos += len(line) + 1
            try:
                records.append(parse_record(line))
            except ValueError as exc:
                raise SessionError(
                    f"{self.path}:{self._line}: corrupt journal line ({exc})"
                ) from None
        return records


class EventsTail:
    """The events an iteration's events file gained since the last :meth:`read`."""

    def __init__(self, path: Path, hat: str, *, root: Path | None = None) -> None:
        self.path = path
        self.hat = hat
        self.root = root
        self._seen = 0

    def read(self) -> list[Event]:
        """The new events (malformed lines skipped: the engine reports them at the end)."""
        events = read_events_file(self.path, self.hat, 0.0, root=self.root).events
        new = events[self._seen :]
        self._seen = max(self._seen, len(events))
        return new


def is_running(paths: SessionPaths) -> bool:
    """Whether a process runs the session now (it holds the session's lock)."""
    return is_locked(paths.lock, root=paths.trusted)
