"""The events an iteration produced, from its two channels: the emit file and output tags.

``python -m loop emit`` (and in-process emitters) append JSON lines to the iteration's
events file; agents also write ``<event>`` tags in their output. Emitted events come
first, in the order they were written, then the tags in the order they appear.

The events file also carries the tool calls the agent made (a line of kind
``tool.call``, :class:`~loop.records.ToolCallLine`), in the order they ran: read in the
same pass, so an iteration without calls costs nothing more.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from loop import _json
from loop.events import PLACEHOLDER_TOPICS, Event, is_valid_topic, parse_event_tags
from loop.records import ToolCall, parse_tool_call_line

__all__ = ["EVENTS_FILE_NAME", "Collected", "EventsFile", "collect_events", "read_events_file"]

EVENTS_FILE_NAME = "events.jsonl"  # in the iteration's folder; LOOP_EVENTS_FILE names it


def _event(line: bytes, hat: str, now: float) -> Event | ToolCall | str:
    """The event or tool call of one events-file line, or what is wrong with it."""
    try:
        data = _json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not JSON"
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("kind") == "tool.call":
        try:
            return parse_tool_call_line(line)
        except ValueError as exc:
            return f"invalid tool call ({exc})"
    topic, target, ts = data.get("topic"), data.get("target"), data.get("ts")
    if not isinstance(topic, str) or not is_valid_topic(topic):
        return "no valid topic"
    if topic in PLACEHOLDER_TOPICS:
        return f"topic {topic} is the prompt's placeholder, ignored: name the event's topic"
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


class EventsFile(NamedTuple):
    """What an events file holds: events, tool calls, and what was wrong with its lines."""

    events: list[Event]
    calls: list[ToolCall]
    problems: list[str]


_EMPTY = EventsFile([], [], [])


def read_events_file(path: str | Path, hat: str, now: float) -> EventsFile:
    """The events in an events file (as published by ``hat``), its tool calls, and what
    was wrong with it.

    No file means no events. A malformed line is reported in ``problems`` (with its
    number), never fatal. ``now``: the time of an event that has none.
    """
    if not os.access(path, os.F_OK):  # most in-process hats emit nothing: no file, no error
        return _EMPTY
    try:
        with open(path, "rb") as fh:  # noqa: PTH123 - a text path: no Path built for it
            data = fh.read()
    except FileNotFoundError:
        return _EMPTY
    found = EventsFile([], [], [])
    for number, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            item = _event(raw, hat, now)
            if isinstance(item, Event):
                found.events.append(item)
            elif isinstance(item, str):
                found.problems.append(f"line {number}: {item}")
            else:
                found.calls.append(item)
    return found


class Collected(NamedTuple):
    """An iteration's events from both channels, its agent's tool calls, the problems."""

    emitted: list[Event]
    events: list[Event]
    calls: list[ToolCall]
    problems: list[str]


def collect_events(hat: str, output: str, events_file: str | Path, now: float) -> Collected:
    """The emit-file events, all events, the agent's tool calls, and what was wrong.

    ``now``: the time given to events that carry none (every ``<event>`` tag).
    """
    emitted, calls, problems = read_events_file(events_file, hat, now)
    events = emitted + parse_event_tags(output, source=hat, ts=now)
    return Collected(emitted, events, calls, [f"emit file {p}" for p in problems])
