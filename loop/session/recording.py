"""The session recording format: one JSON record per line, versioned, with a JSON Schema.

A recording is a header, one record per iteration, the events published between
iterations, optional markers (the size cap was reached, the session was resumed, records
were lost to write failures), the journal's ``override`` records (a resume changed the
limits or backends from that point on) and a footer::

    {"kind": "header", "schema_version": 2, "session_id": ..., "hats": {...}, ...}
    {"kind": "iteration", "iteration": 1, "hat": "planner", "prompt": ..., ...}
    {"kind": "published", "after": 1, "events": [...], ...}
    {"kind": "marker", "marker": "cap_reached", "message": ..., ...}
    {"kind": "footer", "reason": "completed", "iterations": 5, "elapsed": 0.04, ...}

The records are made of the journal's (:mod:`loop.records`): the header holds what the
journal's ``session.start`` says of the session, each iteration line holds the fields
of its ``iteration.end`` (its tool calls included) plus a readable ``timestamp``, a
``published`` line what an ``events.published`` record says, and the footer what
``session.end`` says. These models are the format: the recorder writes them, the
reader validates them, and ``python -m loop schema recording`` prints the schema made
from them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, with_config

from loop.events import Event
from loop.records import (
    RECORD_CONFIG,
    EventsPublished,
    IterationEnd,
    IterationFields,
    IterationStart,
    Override,
    SessionEnd,
    SessionEndFields,
    SessionFields,
    record_data,
    validation_message,
)

__all__ = [
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "FooterRecord",
    "HeaderRecord",
    "IterationRecord",
    "MarkerRecord",
    "PublishedRecord",
    "RecordingRecord",
    "StartRecord",
    "footer_record",
    "iso_time",
    "iteration_data",
    "parse_header",
    "parse_iteration",
    "parse_line",
    "published_record",
    "recording_json_schema",
    "resumed_marker",
    "start_record",
]

# Version 2: iterations carry their tool calls, the header its workdir, and events
# published between iterations have a line of their own. A recording of version 1 holds
# none of them, so it cannot replay what its agents did with the tools: re-record it.
# Version 3: a session whose hats run at once has a ``start`` line per activation, so
# the recording holds the real interleaving (starts and commits, in order). Version 2 is
# version 3 without them: it is read as it is.
# Version 4: an iteration keeps the tool calls of its attempts that a kill (or a
# rate-limit wait) cut short (``lost_calls``), which a replay makes again. Version 3 is
# version 4 without them: it is read as it is.
SCHEMA_VERSION = 4
READABLE_VERSIONS = (2, 3, 4)


@dataclass(kw_only=True)
class HeaderRecord(SessionFields):
    """The first line: format version, the session (as ``session.start`` says), versions."""

    kind: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    hatloop_version: str
    python_version: str
    redacted: Annotated[bool, Field(description="secret-looking values were redacted")]
    max_bytes: int
    ts: float


@dataclass(kw_only=True)
class IterationRecord(IterationFields):
    """One iteration: its ``iteration.end`` record's fields, and when it ended, readably."""

    kind: Literal["iteration"] = "iteration"
    timestamp: Annotated[str, Field(description="ISO 8601, UTC, when the iteration ended")]


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class PublishedRecord:
    """Events published while no iteration collected, after iteration ``after`` (as the
    journal's ``events.published`` says): routed like an iteration's."""

    kind: Literal["published"] = "published"
    after: Annotated[int, Field(ge=0, description="the iterations committed before them")]
    events: tuple[Event, ...]
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class StartRecord:
    """An activation of a session with parallel hats started (its ``iteration.start``):
    with the iteration lines (their commits), the order the activations ran in."""

    kind: Literal["start"] = "start"
    iteration: Annotated[int, Field(ge=1)]
    hat: str
    triggers: Annotated[tuple[int, ...], Field(description="the pending events' numbers")]
    ts: float


def start_record(record: IterationStart) -> StartRecord:
    """The recording's line of a journaled ``iteration.start`` (parallel hats only)."""
    return StartRecord(
        iteration=record.iteration, hat=record.hat, triggers=record.triggers, ts=record.ts
    )


def published_record(record: EventsPublished) -> PublishedRecord:
    """The recording's line of a journaled ``events.published`` record."""
    return PublishedRecord(after=record.after, events=record.events, ts=record.ts)


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class MarkerRecord:
    """Something happened to the recording itself (not to the loop)."""

    kind: Literal["marker"] = "marker"
    marker: Literal["cap_reached", "resumed", "write_failed"]
    message: str
    max_bytes: int | None = None
    lost_records: int | None = None
    session_id: str | None = None
    resumed_at_iteration: int | None = None
    config_digest: str | None = None
    base_digest: Annotated[
        str | None,
        Field(description="the resumed configuration's, without what an override changes"),
    ] = None
    ts: float


@dataclass(kw_only=True)
class FooterRecord(SessionEndFields):
    """The last line: how the loop ended (as ``session.end`` says) and how the recording went."""

    kind: Literal["footer"] = "footer"
    exit_code: int
    records: Annotated[int, Field(ge=0, description="records written before this footer")]
    write_failures: Annotated[int, Field(ge=0)]
    cap_reached: bool
    ts: float


RecordingRecord = Annotated[
    HeaderRecord
    | IterationRecord
    | StartRecord
    | PublishedRecord
    | MarkerRecord
    | Override
    | FooterRecord,
    Field(discriminator="kind"),
]
_RECORD: TypeAdapter[RecordingRecord] = TypeAdapter(RecordingRecord)
_ITERATION: TypeAdapter[IterationRecord] = TypeAdapter(IterationRecord)
_HEADER: TypeAdapter[HeaderRecord] = TypeAdapter(HeaderRecord)


def resumed_marker(
    session_id: str,
    at: int,
    ts: float,
    *,
    config_digest: str | None = None,
    base_digest: str | None = None,
    backfilled: bool = False,
) -> MarkerRecord:
    """The ``resumed`` marker of a run that took the session over after iteration ``at``
    (``backfilled``: a run that was not recorded, whose configuration the journal does
    not hold, so its digests are left out)."""
    note = " (not recorded: taken from the journal)" if backfilled else ""
    return MarkerRecord(
        marker="resumed",
        session_id=session_id,
        resumed_at_iteration=at,
        config_digest=config_digest,
        base_digest=base_digest,
        message=f"session resumed after iteration {at}{note}",
        ts=ts,
    )


def footer_record(
    end: SessionEnd,
    exit_code: int,
    records: int,
    write_failures: int,
    *,
    cap_reached: bool,
    ts: float | None = None,
) -> FooterRecord:
    """The footer of a run that ended as ``end`` says (at ``ts``: the end's own time)."""
    return FooterRecord(
        reason=end.reason[:64],
        iterations=end.iterations,
        elapsed=end.elapsed,
        exit_code=exit_code,
        records=records,
        write_failures=write_failures,
        cap_reached=cap_reached,
        ts=end.ts if ts is None else ts,
    )


def parse_line(line: bytes | str) -> RecordingRecord:
    """One recording line (JSON), validated against its kind's schema.

    Raises:
        ValueError: not JSON, or not a record of the format; the message says what, in
            one line (without the file and line, which the caller knows).
    """
    try:
        return _RECORD.validate_json(line)
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def parse_iteration(line: bytes | str) -> IterationRecord:
    """One iteration line, validated (raises ``ValueError`` like :func:`parse_line`)."""
    try:
        return _ITERATION.validate_json(line)
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def parse_header(line: bytes | str) -> HeaderRecord:
    """A header line, validated (raises ``ValueError`` like :func:`parse_line`)."""
    try:
        return _HEADER.validate_json(line)
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def iteration_data(record: IterationEnd) -> dict[str, Any]:
    """The recording's line of a committed iteration, as data to encode: an
    :class:`IterationRecord` (the record's fields, its kind, a readable time).

    Data rather than an :class:`IterationRecord` object: the recorder writes one per
    iteration, and building the object first would double its cost. A copy of the
    record's fields (keys in their order: ``kind`` keeps its place, ``timestamp`` last).
    """
    data = record_data(record)
    data["kind"] = "iteration"
    data["timestamp"] = iso_time(record.ts)
    return data


def recording_json_schema() -> dict[str, Any]:
    """The JSON Schema of one line of a recording (version :data:`SCHEMA_VERSION`)."""
    schema = _RECORD.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"hatloop session recording line (schema version {SCHEMA_VERSION})",
        "description": "Each line of a recording is one JSON object matching this schema; "
        "the first is a header, the last (normally) a footer.",
        **schema,
    }


def iso_time(ts: float) -> str:
    """``ts`` (seconds since the epoch) as ISO 8601 UTC with milliseconds (truncated)."""
    ms = int(ts * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
