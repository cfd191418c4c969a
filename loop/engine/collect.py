"""The events an iteration produced, from its two channels: the emit file and output tags.

``python -m loop emit`` (and in-process emitters) append JSON lines to the iteration's
events file; agents also write ``<event>`` tags in their output. Emitted events come
first, in the order they were written, then the tags in the order they appear.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from loop import _json
from loop.events import Event, is_valid_topic, parse_event_tags

__all__ = ["collect_events", "read_events_file"]


def read_events_file(path: Path | str) -> tuple[list[dict[str, Any]], list[str]]:
    """Read emitted event lines: ``(records, problems)``; no file means no events.

    A malformed line is reported in ``problems`` (with its number), never fatal.
    """
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    if not os.access(path, os.F_OK):  # the common case for in-process hats: no exception
        return records, problems
    try:
        with open(path, "rb") as fh:  # noqa: PTH123 - a str path on the hot path, no Path built
            data = fh.read()
    except FileNotFoundError:
        return records, problems
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rec = _json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            problems.append(f"line {number}: not JSON")
            continue
        topic = rec.get("topic") if isinstance(rec, dict) else None
        if not isinstance(topic, str) or not is_valid_topic(topic):
            problems.append(f"line {number}: no valid topic")
            continue
        records.append(rec)
    return records, problems


def collect_events(
    hat: str, output: str, events_file: Path | str | None
) -> tuple[list[Event], list[Event], list[str]]:
    """``(emitted, events, problems)``: the emit-file events, all events, what was wrong.

    ``events_file`` is ``None`` for a backend that has no emit channel.
    """
    if events_file is None:
        return [], parse_event_tags(output, source=hat), []
    records, problems = read_events_file(events_file)
    emitted = [
        Event(
            topic=r["topic"],
            payload=r.get("payload", ""),
            source=hat,
            target=r.get("target"),
            ts=float(r.get("ts") or time.time()),
        )
        for r in records
    ]
    events = emitted + parse_event_tags(output, source=hat) if output else list(emitted)
    return emitted, events, [f"emit file {p}" for p in problems]
