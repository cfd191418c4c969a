"""Interpret a loop session's journal (``journal.jsonl``) for export.

Parsing, and the torn-last-line rule, are the engine's (:mod:`loop.engine.journal`).
Only what the export needs is kept: the session header, one record per finished
iteration (an ``iteration.end``), and the session's end. Unknown record kinds are
skipped, so the journal can grow new kinds without breaking the export.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from loop.engine.journal import read_journal as read_records
from loop.errors import SessionError, StoreError

__all__ = ["IterationRecord", "SessionJournal", "read_journal"]

log = structlog.get_logger(__name__)

JOURNAL_NAME = "journal.jsonl"


@dataclass(frozen=True)
class IterationRecord:
    """One finished iteration, from its ``iteration.end`` record."""

    iteration: int
    hat: str
    prompt: str
    output: str
    status: str
    reason: str | None
    events: list[dict[str, Any]]
    duration: float | None
    backend: str | None
    ts: float | None
    elapsed: float | None
    cost_usd: float | None

    @property
    def ok(self) -> bool:
        """Whether the iteration succeeded."""
        return self.status == "ok"


@dataclass
class SessionJournal:
    """What a journal says about a session."""

    path: Path
    session_id: str | None = None
    started_at: str | None = None
    start_ts: float | None = None
    hats: dict[str, dict[str, Any]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    completion_event: str | None = None
    iterations: list[IterationRecord] = field(default_factory=list)
    end: dict[str, Any] | None = None
    torn_tail: bool = False


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _iteration(record: dict[str, Any]) -> IterationRecord | None:
    number, hat = record.get("iteration"), record.get("hat")
    if not isinstance(number, int) or not isinstance(hat, str):
        return None
    events = [e for e in record.get("events") or [] if isinstance(e, dict) and "topic" in e]
    return IterationRecord(
        iteration=number,
        hat=hat,
        prompt=_str(record.get("prompt")) or "",
        output=_str(record.get("output")) or "",
        status=_str(record.get("status")) or "ok",
        reason=_str(record.get("reason")),
        events=events,
        duration=_float(record.get("duration")),
        backend=_str(record.get("backend")),
        ts=_float(record.get("ts")),
        elapsed=_float(record.get("elapsed")),
        cost_usd=_float(record.get("cost_usd")),
    )


def read_journal(session_dir: Path) -> SessionJournal:
    """Read ``session_dir / journal.jsonl`` with the engine's own journal reader.

    Raises:
        StoreError: the journal is missing, unreadable, or corrupt before its last line.
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
    records, torn = contents.records, contents.torn
    journal = SessionJournal(path=path, torn_tail=torn)
    finished: dict[int, IterationRecord] = {}
    for record in records:
        kind = record.get("kind")
        if kind == "session.start" and journal.session_id is None:
            journal.session_id = _str(record.get("session_id"))
            journal.started_at = _str(record.get("started_at"))
            journal.start_ts = _float(record.get("ts"))
            hats = record.get("hats")
            journal.hats = (
                {k: v for k, v in hats.items() if isinstance(v, dict)}
                if isinstance(hats, dict)
                else {}
            )
            journal.completion_event = _str(record.get("completion_event"))
            config = record.get("config")
            journal.config = config if isinstance(config, dict) else {}
        elif kind == "iteration.end":
            parsed = _iteration(record)
            if parsed is not None:
                finished[parsed.iteration] = parsed  # a resumed session may repeat one: last wins
        elif kind == "session.end":
            journal.end = record
    journal.iterations = [finished[n] for n in sorted(finished)]
    return journal
