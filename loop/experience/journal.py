"""A loop session's journal (``journal.jsonl``) as the export reads it.

Parsing, validation and the torn-last-line rule are the engine's
(:mod:`loop.engine.journal`, records of :mod:`loop.records`). Only what the export needs
is kept: the session's start, one record per finished iteration (an ``iteration.end``),
and the session's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop._log import get_logger
from loop.engine.journal import read_journal as read_records
from loop.engine.session_dir import JOURNAL_NAME
from loop.errors import SessionError, StoreError
from loop.records import HatTopology, IterationEnd, SessionEnd, SessionStart

__all__ = ["SessionJournal", "read_journal"]

log = get_logger(__name__)


@dataclass
class SessionJournal:
    """What a journal says about a session."""

    path: Path
    start: SessionStart | None = None
    iterations: list[IterationEnd] = field(default_factory=list)
    end: SessionEnd | None = None
    torn_tail: bool = False

    @property
    def session_id(self) -> str | None:
        """The session's id (``None`` for a journal without its start)."""
        return self.start.session_id if self.start else None

    @property
    def started_at(self) -> str | None:
        """When the session started (ISO 8601, UTC)."""
        return self.start.started_at if self.start else None

    @property
    def hats(self) -> dict[str, HatTopology]:
        """The session's hats."""
        return self.start.hats if self.start else {}

    @property
    def config(self) -> dict[str, Any]:
        """The session's configuration (a snapshot)."""
        return self.start.config if self.start else {}

    @property
    def completion_event(self) -> str | None:
        """The session's completion event."""
        return self.start.completion_event if self.start else None


def read_journal(session_dir: Path) -> SessionJournal:
    """Read ``session_dir / journal.jsonl`` with the engine's own journal reader.

    Raises:
        StoreError: the journal is missing, unreadable, or holds a bad record before its
            last line (naming the line).
    """
    path = session_dir / JOURNAL_NAME
    if not path.is_file():
        raise StoreError("no journal: not a loop session folder", file=path)
    try:
        contents = read_records(path)
    except SessionError as exc:
        # The engine's message reads "<path>:<line>: ..."; keep the line, name the file once.
        raise StoreError("line " + exc.message.removeprefix(f"{path}:"), file=path) from exc
    if contents.torn:
        log.warning("journal: ignoring a torn last line", file=str(path))
    journal = SessionJournal(path=path, torn_tail=contents.torn)
    finished: dict[int, IterationEnd] = {}
    for record in contents.records:
        if isinstance(record, SessionStart) and journal.start is None:
            journal.start = record
        elif isinstance(record, IterationEnd):
            finished[record.iteration] = record  # a resumed session may repeat one: last wins
        elif isinstance(record, SessionEnd):
            journal.end = record
    journal.iterations = [finished[n] for n in sorted(finished)]
    return journal
