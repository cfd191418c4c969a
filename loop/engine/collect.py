"""The events an iteration produced, from its two channels: the emit file and output tags.

``python -m loop emit`` (and in-process emitters) append JSON lines to the attempt's
events file; agents also write ``<event>`` tags in their output. Emitted events come
first, in the order they were written, then the tags in the order they appear.

The events file also carries the tool calls the agent made (a line of kind
``tool.call``, :class:`~loop.records.ToolCallLine`), in the order they ran: read in the
same pass, so an iteration without calls costs nothing more.

An agent writes the events file, so it is input: it is opened without following a
link, read in chunks of :data:`CHUNK_BYTES`, a line longer than
:data:`~loop.emit.MAX_LINE_BYTES` is dropped without being held in memory, and reading
stops after :data:`MAX_FILE_BYTES`. A line that is not an event or a tool call is never
fatal: it is a :class:`Problem` (the engine journals it as ``event.malformed``, logs a
warning and tells the hat in its next prompt).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import structlog

from loop import _json
from loop._fs import open_file
from loop.emit import MAX_LINE_BYTES
from loop.engine.session_dir import EVENTS_FILE_NAME, SessionPaths
from loop.errors import InputError
from loop.events import PLACEHOLDER_TOPICS, Event, is_valid_topic, parse_event_tags
from loop.records import EventMalformed, LostCalls, ToolCall, parse_tool_call_line

__all__ = [
    "CHUNK_BYTES",
    "EVENTS_FILE_NAME",
    "MALFORMED_REPORTED",
    "MAX_FILE_BYTES",
    "Collected",
    "EventsFile",
    "Problem",
    "collect_events",
    "lost_calls",
    "malformed_notice",
    "malformed_records",
    "read_events_file",
]

log = structlog.get_logger("loop.engine")

CHUNK_BYTES = 64 * 1024
MAX_FILE_BYTES = 16 * 1024 * 1024  # an iteration's emitted events, at most
MALFORMED_REPORTED = 20  # malformed lines journaled one by one per attempt; then a count


@dataclass(frozen=True, slots=True)
class Problem:
    """What was wrong with the emit file: a line (its number), or the file (``None``)."""

    line: int | None
    problem: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}" if self.line is not None else self.problem


def _event(line: bytes, hat: str, now: float) -> Event | ToolCall | str:
    """The event or tool call of one events-file line, or what is wrong with it."""
    try:
        data = _json.loads(line, max_depth=_json.INPUT_DEPTH)
    except _json.TooDeep:
        return f"JSON nested deeper than {_json.INPUT_DEPTH} levels"
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
    when = now
    if ts is not None:
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            return "ts is not a number"
        try:
            when = float(ts) if ts else now
        except OverflowError:
            return "ts is not a finite number"
        if not math.isfinite(when):
            return "ts is not a finite number"
    return Event(topic=topic, payload=data.get("payload", ""), source=hat, target=target, ts=when)


_OVER = -1  # the line number :func:`_lines` gives "the file passes MAX_FILE_BYTES"


def _lines(fd: int) -> Iterator[tuple[int, bytes | None, int]]:
    """``(number, line, size)`` for each line: ``line`` is ``None`` when it passed the cap
    (``size`` bytes long); a last line without its newline counts. Past
    :data:`MAX_FILE_BYTES`, the line being read is dropped and ``_OVER`` comes last."""
    number, pending, size, total = 0, bytearray(), 0, 0
    while True:
        chunk = os.read(fd, min(CHUNK_BYTES, MAX_FILE_BYTES - total) or 1)
        if not chunk:
            break
        if total == MAX_FILE_BYTES:
            yield _OVER, None, 0
            return
        total += len(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            number += 1
            size += end - start
            if size > MAX_LINE_BYTES:
                yield number, None, size
            else:
                yield (
                    number,
                    (bytes(pending) + chunk[start:end]) if pending else chunk[start:end],
                    size,
                )
            pending.clear()
            size, start = 0, end + 1
        size += len(chunk) - start
        if size <= MAX_LINE_BYTES:
            pending += chunk[start:]
        else:
            pending.clear()  # too long already: only its length is kept
    if size:
        yield number + 1, (bytes(pending) if size <= MAX_LINE_BYTES else None), size


class EventsFile(NamedTuple):
    """What an events file holds: events, tool calls, and what was wrong with it."""

    events: list[Event]
    calls: list[ToolCall]
    problems: list[Problem]


def read_events_file(
    path: str | Path, hat: str, now: float, *, root: Path | None = None
) -> EventsFile:
    """The events in an events file (as published by ``hat``), its tool calls, and what
    was wrong with it.

    No file means no events. The file is opened without following a link (from
    ``root``, see :mod:`loop._fs`); a link or anything but a regular file there is a
    :class:`Problem`, never read. ``now``: the time of an event that has none.
    """
    if not os.access(path, os.F_OK):  # most in-process hats emit nothing: no file, no error
        return EventsFile([], [], [])
    try:
        fd = open_file(Path(path), os.O_RDONLY, root=root)
    except FileNotFoundError:
        return EventsFile([], [], [])
    except InputError as exc:  # a link, a FIFO...: refused, never read
        return EventsFile([], [], [Problem(None, f"the events file was not read: {exc.message}")])
    except OSError as exc:
        why = f"the events file cannot be read: {exc.strerror or exc}"
        return EventsFile([], [], [Problem(None, why)])
    found = EventsFile([], [], [])
    try:
        for number, raw, size in _lines(fd):
            if number == _OVER:
                why = f"the events file passes {MAX_FILE_BYTES} bytes: the rest was not read"
                found.problems.append(Problem(None, why))
            elif raw is None:
                why = f"longer than {MAX_LINE_BYTES} bytes ({size} bytes)"
                found.problems.append(Problem(number, why))
            elif raw.strip():
                item = _event(raw, hat, now)
                if isinstance(item, Event):
                    found.events.append(item)
                elif isinstance(item, str):
                    found.problems.append(Problem(number, item))
                else:
                    found.calls.append(item)
    except OSError as exc:
        why = f"the events file cannot be read: {exc.strerror or exc}"
        found.problems.append(Problem(None, why))
    finally:
        os.close(fd)
    return found


class Collected(NamedTuple):
    """An iteration's events from both channels, its agent's tool calls, the problems."""

    emitted: list[Event]
    events: list[Event]
    calls: list[ToolCall]
    problems: list[Problem]


def collect_events(
    hat: str, output: str, events_file: str | Path | None, now: float, *, root: Path | None = None
) -> Collected:
    """The emit-file events, all events, the agent's tool calls, and what was wrong.

    ``events_file``: ``None`` for a backend that writes none
    (:attr:`~loop.backends.base.Backend.writes_events`): only the output's tags count.
    ``now``: the time given to events that carry none (every ``<event>`` tag).
    """
    if events_file is None:
        return Collected([], parse_event_tags(output, source=hat, ts=now), [], [])
    emitted, calls, problems = read_events_file(events_file, hat, now, root=root)
    events = emitted + parse_event_tags(output, source=hat, ts=now)
    return Collected(emitted, events, calls, problems)


def lost_calls(
    paths: SessionPaths,
    iteration: int,
    attempt: int,
    *,
    reran: bool,
    hat: str,
    now: float,
    root: Path | None,
) -> tuple[LostCalls, ...]:
    """The tool calls of the backend calls of ``iteration`` that did not end, in order:
    those of the attempts before ``attempt`` (the run was killed, and a resume runs the
    iteration again as a new attempt), and those of the calls of an attempt that a
    rate-limit wait cut short (``reran``: the current attempt's were), whose events files
    were set aside. What they changed stayed; their events did not count and are not read.
    """
    lost = []
    for number in range(1, attempt + 1):
        files = paths.cut_events_files(iteration, number) if number < attempt or reran else []
        if number < attempt:
            files.append(paths.events_path(iteration, number))
        for path in files:
            calls = read_events_file(path, hat, now, root=root).calls
            if calls:
                lost.append(LostCalls(attempt=number, tool_calls=tuple(calls)))
    return tuple(lost)


def malformed_records(
    hat: str, iteration: int, attempt: int, problems: list[Problem], now: float
) -> list[EventMalformed]:
    """The ``event.malformed`` records of an attempt's problems (logged as warnings):
    the first :data:`MALFORMED_REPORTED` one by one, then how many more."""
    records = []
    for problem in problems[:MALFORMED_REPORTED]:
        log.warning(
            "malformed emit-file line dropped",
            hat=hat,
            iteration=iteration,
            line=problem.line,
            problem=problem.problem,
        )
        records.append(
            EventMalformed(
                iteration=iteration,
                attempt=attempt,
                hat=hat,
                line=problem.line,
                problem=problem.problem,
                ts=now,
            )
        )
    if len(problems) > MALFORMED_REPORTED:
        more = f"{len(problems) - MALFORMED_REPORTED} more malformed line(s) dropped"
        records.append(
            EventMalformed(
                iteration=iteration, attempt=attempt, hat=hat, line=None, problem=more, ts=now
            )
        )
    return records


def malformed_notice(problems: tuple[str, ...]) -> str:
    """The prompt block telling a hat which of its emitted lines were dropped, and why."""
    lines = [
        "## Events you emitted that were dropped",
        "",
        "In your last iteration, these lines of your events file ($LOOP_EVENTS_FILE) were "
        "not events, and were dropped:",
        *(f"- {p}" for p in problems),
        "Publish with `python -m loop emit TOPIC [PAYLOAD]`, one event per line.",
    ]
    return "\n".join(lines)
