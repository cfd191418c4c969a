"""Read a loop session's journal (``journal.jsonl``) for export, tolerating a torn last line.

Only what the export needs is kept: the session header, one record per finished
iteration (an ``iteration.end``), and the session's end. Unknown record kinds are
skipped, so the journal can grow new kinds without breaking the export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from loop.errors import StoreError

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


def _parse_lines(path: Path, text: str) -> tuple[list[dict[str, Any]], bool]:
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    records: list[dict[str, Any]] = []
    torn = False
    for index, (number, line) in enumerate(lines):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if index == len(lines) - 1:  # a crash mid-append: the last line may be torn
                log.warning("journal: ignoring a torn last line", file=str(path), line=number)
                torn = True
                break
            raise StoreError(f"line {number}: invalid JSON: {exc.msg}", file=path) from exc
        if isinstance(value, dict):
            records.append(value)
    return records, torn


def read_journal(session_dir: Path) -> SessionJournal:
    """Read ``session_dir / journal.jsonl``.

    Raises:
        StoreError: the journal is missing, unreadable, or corrupt before its last line.
    """
    path = session_dir / JOURNAL_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise StoreError("no journal: not a loop session folder", file=path) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read: {exc}", file=path) from exc
    records, torn = _parse_lines(path, text)
    journal = SessionJournal(path=path, torn_tail=torn)
    finished: dict[int, IterationRecord] = {}
    for record in records:
        kind = record.get("kind")
        if kind == "session.start" and journal.session_id is None:
            journal.session_id = _str(record.get("session_id"))
            journal.started_at = _str(record.get("started_at"))
            journal.start_ts = _float(record.get("ts"))
            hats = record.get("hats")
            journal.hats = {k: v for k, v in hats.items() if isinstance(v, dict)} \
                if isinstance(hats, dict) else {}
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
