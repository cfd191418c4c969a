"""The session recording format: one JSON record per line, versioned, with a JSON Schema.

A recording is a header, one record per iteration, optional markers (the size cap was
reached, the session was resumed, records were lost to write failures) and a footer::

    {"kind": "header", "schema_version": 1, "session_id": ..., "hats": {...}, ...}
    {"kind": "iteration", "iteration": 1, "hat": "planner", "prompt": ..., ...}
    {"kind": "marker", "marker": "cap_reached", "message": ..., ...}
    {"kind": "footer", "reason": "completed", "iterations": 5, "elapsed": 0.04, ...}

The models here are the single source of truth: the recorder writes them, the reader
validates them, and ``python -m loop schema recording`` prints the schema made from them.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from loop import _json

__all__ = [
    "SCHEMA_VERSION",
    "FooterRecord",
    "HatTopology",
    "HeaderRecord",
    "IterationRecord",
    "MarkerRecord",
    "Record",
    "RecordedEvent",
    "backend_succeeded",
    "iso_time",
    "iteration_data",
    "iteration_line",
    "parse_record",
    "recording_json_schema",
]

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedEvent(_Model):
    """An event as recorded: what replay compares is topic, payload and target."""

    topic: str
    payload: Any = ""
    source: str = "loop"
    target: str | None = None
    ts: float | None = None


class HatTopology(_Model):
    """One hat as the header describes it: how events route to it and what it publishes."""

    description: str = ""
    triggers: list[str]
    publishes: list[str] = Field(default_factory=list)
    default_publishes: str | None = None
    max_activations: int | None = None
    backend: str


class HeaderRecord(_Model):
    """The first line: format version, session, hat topology, configuration, versions."""

    kind: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    session_id: str
    started_at: str = Field(description="ISO 8601, UTC")
    hatloop_version: str
    python_version: str
    config_digest: str = Field(description="sha256 of the canonical JSON of `config`")
    starting_event: str
    completion_event: str
    hats: dict[str, HatTopology]
    config: dict[str, Any] = Field(description="the effective configuration (a snapshot)")
    redacted: bool = Field(description="secret-looking environment values were redacted")
    max_bytes: int
    ts: float


class IterationRecord(_Model):
    """One iteration: the seed's fields plus how the backend and the engine saw it."""

    kind: Literal["iteration"] = "iteration"
    iteration: int = Field(ge=1)
    hat: str
    timestamp: str = Field(description="ISO 8601, UTC, when the iteration ended")
    prompt: str
    output: str
    events: list[RecordedEvent] = Field(description="the hat's events, both channels")
    emitted: list[RecordedEvent] = Field(
        default_factory=list, description="the events that came through the emit file"
    )
    published: list[RecordedEvent] = Field(
        default_factory=list, description="everything published during the iteration"
    )
    triggers: list[RecordedEvent] = Field(default_factory=list)
    backend: str
    backend_ok: bool = Field(description="the backend itself succeeded (replay serves this)")
    status: Literal["ok", "failed"]
    reason: str | None = None
    exit_code: int | None = None
    activation: int = Field(default=0, ge=0)
    consumed: list[int] = Field(default_factory=list)
    completed: bool = False
    notes: list[str] = Field(default_factory=list)
    duration: float = Field(ge=0)
    elapsed: float = Field(ge=0)
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    ts: float


def iteration_data(rec: dict[str, Any], ts: float) -> dict[str, Any]:
    """The recording line of an engine ``iteration.end`` record, as plain data.

    The record's own fields (the engine's ``iteration_record`` makes exactly the fields
    of :class:`IterationRecord`) plus the recording's: ``kind`` and ``timestamp`` (and
    ``backend_ok`` for a record of a journal written before the engine journaled it).
    Built without validating, because the engine's record has one fixed shape; the tests
    validate what this makes against the model.
    """
    data = dict(rec)
    data["kind"] = "iteration"
    data["timestamp"] = iso_time(ts)
    if "backend_ok" not in rec:
        data["backend_ok"] = backend_succeeded(rec["status"], rec.get("reason"))
    data["meta"] = rec.get("meta") or {}
    data["ts"] = ts
    return data


_END_PREFIX = b'{"kind":"iteration.end",'


def iteration_line(rec: dict[str, Any], journal_line: bytes | None, ts: float) -> bytes:
    """The recording line (JSONL, not redacted) of an engine ``iteration.end`` record.

    Exactly ``dumps_record_line(iteration_data(rec, ts))``; when the journal's own line
    for ``rec`` is given, built from it instead of encoding the record a second time:
    the recording line is the journal line with ``kind`` renamed and ``timestamp`` added
    after ``ts``, the record's last key (and ``backend_ok`` after it, for a record of an
    older journal). A record of any other shape (no ``meta`` dict, ``ts`` not last or
    not ``ts``) is encoded afresh.
    """
    if (
        journal_line is not None
        and journal_line.startswith(_END_PREFIX)
        and journal_line.endswith(b"}\n")
        and rec.get("ts") == ts
        and next(reversed(rec)) == "ts"
        and isinstance(rec.get("meta"), dict)
    ):
        if "backend_ok" in rec:  # journaled with the record: only the timestamp is new
            end = b'"}\n'
        elif backend_succeeded(rec["status"], rec.get("reason")):
            end = b'","backend_ok":true}\n'
        else:
            end = b'","backend_ok":false}\n'
        return b"".join(
            (
                b'{"kind":"iteration",',
                memoryview(journal_line)[len(_END_PREFIX) : -2],  # joined without a copy
                b',"timestamp":"',
                iso_time(ts).encode(),
                end,
            )
        )
    return _json.dumps_record_line(iteration_data(rec, ts))


class MarkerRecord(_Model):
    """Something happened to the recording itself (not to the loop)."""

    kind: Literal["marker"] = "marker"
    marker: Literal["cap_reached", "resumed", "write_failed"]
    message: str
    max_bytes: int | None = None
    lost_records: int | None = None
    session_id: str | None = None
    resumed_at_iteration: int | None = None
    config_digest: str | None = None
    ts: float


class FooterRecord(_Model):
    """The last line: how the loop ended and how the recording went."""

    kind: Literal["footer"] = "footer"
    reason: str
    iterations: int = Field(ge=0)
    elapsed: float = Field(ge=0)
    exit_code: int
    records: int = Field(ge=0, description="records written before this footer")
    write_failures: int = Field(ge=0)
    cap_reached: bool
    ts: float


Record = Annotated[
    HeaderRecord | IterationRecord | MarkerRecord | FooterRecord, Field(discriminator="kind")
]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


def parse_record(data: dict[str, Any]) -> Record:
    """Validate one decoded line (raises ``pydantic.ValidationError``)."""
    return _RECORD.validate_python(data)


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


def backend_succeeded(status: str, reason: str | None) -> bool:
    """Whether the backend succeeded in an iteration the engine judged ``status``.

    For the records of journals written before the engine journaled ``backend_ok``
    itself; newer records carry the backend's own verdict.

    The engine fails an iteration whose backend succeeded only when the hat emitted
    nothing (``decide_outcome``: "no events emitted..."); any other failure came from
    the backend, and replay must serve it as a failure again.
    """
    return status == "ok" or (reason or "").startswith("no events emitted")


# The last second and the last millisecond formatted, each as one (key, text) pair that
# is replaced whole: a reader in another thread never sees one's key with the other's text.
_last_second: list[tuple[int | None, str]] = [(None, "")]
_last_milli: list[tuple[int | None, str]] = [(None, "")]


def iso_time(ts: float | None = None) -> str:
    """``ts`` (default: now) as ISO 8601 UTC with milliseconds (truncated)."""
    ms = int((time.time() if ts is None else ts) * 1000)
    milli = _last_milli[0]
    if milli[0] == ms:  # iterations of instant hats share a millisecond (hot path)
        return milli[1]
    whole = ms // 1000
    second = _last_second[0]
    if second[0] != whole:  # one strftime per second, not per record
        second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
        _last_second[0] = second
    text = f"{second[1]}.{ms % 1000:03d}Z"
    _last_milli[0] = (ms, text)
    return text
