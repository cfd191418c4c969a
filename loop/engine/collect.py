"""The events an iteration produced, from its two channels: the emit file and output tags.

``python -m loop emit`` (and in-process emitters) append JSON lines to the iteration's
events file; agents also write ``<event>`` tags in their output. Emitted events come
first, in the order they were written, then the tags in the order they appear.
"""

from __future__ import annotations

import os
from pathlib import Path

from loop import _json
from loop.events import Event, is_valid_topic, parse_event_tags

__all__ = ["EVENTS_FILE_NAME", "collect_events", "read_events_file"]

EVENTS_FILE_NAME = "events.jsonl"  # in the iteration's folder; LOOP_EVENTS_FILE names it


def _event(line: bytes, hat: str, now: float) -> Event | str:
    """The event of one emit-file line, or what is wrong with it."""
    try:
        data = _json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not JSON"
    if not isinstance(data, dict):
        return "not a JSON object"
    topic, target, ts = data.get("topic"), data.get("target"), data.get("ts")
    if not isinstance(topic, str) or not is_valid_topic(topic):
        return "no valid topic"
    if target is not None and not isinstance(target, str):
        return "target is not a hat name"
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int | float)):
        return "ts is not a number"
    return Event(
        topic=topic,
        payload=data.get("payload", ""),
        source=hat,
        target=target,
        ts=float(ts) if ts else now,
    )


def read_events_file(path: str | Path, hat: str, now: float) -> tuple[list[Event], list[str]]:
    """The events in an emit file, as published by ``hat``, and what was wrong with it.

    No file means no events. A malformed line is reported in ``problems`` (with its
    number), never fatal. ``now``: the time of an event that has none.
    """
    if not os.access(path, os.F_OK):  # most in-process hats emit nothing: no file, no error
        return [], []
    try:
        with open(path, "rb") as fh:  # noqa: PTH123 - a text path: no Path built for it
            data = fh.read()
    except FileNotFoundError:
        return [], []
    events: list[Event] = []
    problems: list[str] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            found = _event(raw, hat, now)
            if isinstance(found, Event):
                events.append(found)
            else:
                problems.append(f"line {number}: {found}")
    return events, problems


def collect_events(
    hat: str, output: str, events_file: str | Path, now: float
) -> tuple[list[Event], list[Event], list[str]]:
    """``(emitted, events, problems)``: the emit-file events, all events, what was wrong.

    ``now``: the time given to events that carry none (every ``<event>`` tag).
    """
    emitted, problems = read_events_file(events_file, hat, now)
    events = emitted + parse_event_tags(output, source=hat, ts=now)
    return emitted, events, [f"emit file {p}" for p in problems]
