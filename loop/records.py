"""The session journal's records, typed: one class per kind, one parse function.

A journal (``journal.jsonl`` in a session's folder) holds one record per line::

    session.start     the configuration the session runs with, and its starting event
    iteration.start   an attempt at an iteration is in flight: its hat, its attempt
                      number and the pending events it runs on
    child.start       a backend started a child process for the attempt: what names it
                      across pid reuse (a resume stops it if it still runs)
    event.malformed   a line of the attempt's emit file was not an event: why
    iteration.end     an iteration committed (the commit point): prompt, output, events,
                      the tool calls made in its context, the engine's verdict, timings,
                      cost
    hat.exhausted     a hat reached max_activations: its pending events were dropped
    wait              a hat's call hit a rate or usage limit: the iteration runs again
                      once the wait is over
    events.published  events published while no iteration collected (by an extension
                      or a subscriber, e.g. on ``loop.iteration.done``): routed like an
                      iteration's
    resume            a process took over a session that had stopped (and stopped what
                      the stopped run had left running)
    override          ...with other limits or backends, from this point on
    session.end       why the session ended

The engine builds these, the journal writes them (:func:`encode_record`), the reducer
folds them into the loop's state, and ``status``, ``run --resume``, the recorder and
``export`` read them back with :func:`parse_record`. A line that does not match its
record's schema is an error that says what is wrong, never a guess. A session
recording's records (:mod:`loop.session.recording`) are made of the same fields.

A :class:`ToolCall` is one call of a hatloop tool made in an iteration's context (over
the CLI, MCP or the bus): the iteration's ``iteration.end`` holds them in order. A
process that cannot write the journal (an agent's ``python -m loop task create``)
appends a :class:`ToolCallLine` to the iteration's events file instead, which the
engine reads when the iteration ends.

Each record is a dataclass whose schema pydantic validates (strict: ``"3"`` is not an
iteration number nor ``true`` a count; closed: an unknown field is an error) and turns
into JSON Schema. The engine builds two records per iteration on its hot path: a
dataclass costs a fifth of a validating model to build and encodes three times faster,
and what the engine builds is checked by the type checker, not at run time. Records
are values: treat them as immutable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config

from loop import _json
from loop.events import Event

__all__ = [
    "JOURNAL_VERSION",
    "RECORD_CONFIG",
    "CallError",
    "ChildStarted",
    "EventMalformed",
    "EventsPublished",
    "FlagValue",
    "HatExhausted",
    "HatTopology",
    "IterationEnd",
    "IterationFields",
    "IterationStart",
    "JournalRecord",
    "LimitSettings",
    "LostCalls",
    "Override",
    "Resume",
    "SessionEnd",
    "SessionEndFields",
    "SessionFields",
    "SessionStart",
    "ToolCall",
    "ToolCallLine",
    "Wait",
    "encode_record",
    "parse_record",
    "parse_tool_call_line",
    "record_data",
    "validation_message",
]

# The journal's format; session.start records it. Version 1 (before tool calls were
# journaled) reads as it is: it has no tool calls and no events.published records.
# Version 2 reads as it is: its session.start has no ``flags`` (a resume of it keeps
# what the file says for them). Version 3 reads as it is: its iterations have no
# ``lost_calls``. Another version is a one-line error.
JOURNAL_VERSION = 4

# A setting given as a flag of ``run``: a value, or a hat's budgets by hat name
# (``--hat-max-cost-usd HAT=USD``).
FlagValue = str | int | float | dict[str, int | float]
READABLE_JOURNAL_VERSIONS = (1, 2, 3, JOURNAL_VERSION)

RECORD_CONFIG = ConfigDict(strict=True, extra="forbid")

Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]
Iteration = Annotated[int, Field(ge=1)]
Attempt = Annotated[int, Field(ge=1, description="1 for an iteration's first attempt")]


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class HatTopology:
    """One hat as a session records it: how events route to it and what it publishes."""

    description: str = ""
    triggers: tuple[str, ...]
    publishes: tuple[str, ...] = ()
    default_publishes: str | None = None
    max_activations: Annotated[int, Field(ge=1)] | None = None
    backend: Annotated[str, Field(description="the backend type (scripted, command...)")]


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class SessionFields:
    """What a session is: its id, hats, events and configuration (session.start, and a
    recording's header)."""

    kind: str
    session_id: str
    started_at: Annotated[str, Field(description="ISO 8601, UTC")]
    config_digest: Annotated[str, Field(description="sha256 of the canonical JSON of `config`")]
    starting_event: str
    completion_event: str
    hats: dict[str, HatTopology]
    config: Annotated[dict[str, Any], Field(description="the effective configuration")]
    workdir: Annotated[
        str,
        Field(
            description="the folder the loop ran in (its relative state paths resolve "
            "there; a replay maps the paths of tool calls below it to its own)"
        ),
    ] = ""


@dataclass(kw_only=True)
class SessionStart(SessionFields):
    """The journal's first record: the configuration and the loop's starting event."""

    kind: Literal["session.start"] = "session.start"
    schema_version: Annotated[int, Field(description="the journal's format")] = JOURNAL_VERSION
    version: Annotated[str, Field(description="the hatloop that started the session")]
    config_source: str
    fallback_hat: str | None = None
    flags: Annotated[
        dict[str, FlagValue],
        Field(
            description="the settings given as flags of run (--max-iterations, --backend...): "
            "a resume keeps them unless it is given them again"
        ),
    ] = field(default_factory=dict)
    start_event: Event
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class IterationStart:
    """An attempt at an iteration is in flight: its hat, and the pending events (by
    number) it runs on. An iteration a crash interrupted runs again as its next attempt,
    with files of its own (``iterations/NNNNNN/attempt-K/``)."""

    kind: Literal["iteration.start"] = "iteration.start"
    iteration: Iteration
    hat: str
    triggers: Annotated[tuple[int, ...], Field(description="the pending events' numbers")]
    attempt: Attempt = 1
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class ChildStarted:
    """A backend started a child process for an attempt: what names it and what it starts,
    so that a resume stops them if they outlived the run, and nothing else.

    ``start_ticks`` (field 22 of ``/proc/<pid>/stat``) on ``boot_id`` tells the child
    from a later process with the same pid; ``tag`` is in the environment of the child
    and of everything it starts. ``start_ticks`` is ``None`` when the child was gone
    before it could be read.
    """

    kind: Literal["child.start"] = "child.start"
    iteration: Iteration
    attempt: Attempt
    pid: Annotated[int, Field(ge=1)]
    pgid: int
    start_ticks: int | None
    boot_id: str
    tag: str
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class EventMalformed:
    """A line of an attempt's emit file that is not an event (it was dropped), or the file
    itself refused (``line`` is ``None``): the hat is told in its next prompt."""

    kind: Literal["event.malformed"] = "event.malformed"
    iteration: Iteration
    attempt: Attempt
    hat: str
    line: Annotated[int, Field(ge=1)] | None
    problem: str
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class CallError:
    """A tool call's structured error (the shape the CLI, MCP and the bus report)."""

    code: str
    message: str
    details: Any = None


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class ToolCall:
    """One tool call made in an iteration's context: the call and what came back.

    ``ts`` and ``utc_offset`` are the call's clock: the time the tool took as "now"
    (a task's ``createdAt``, a heartbeat ID), with the caller's UTC offset, so a
    replay gives the tool the same time, whatever the replaying machine's time zone.
    """

    tool: str
    channel: Annotated[
        Literal["cli", "mcp", "bus", "loop"],
        Field(
            description="how it was called: cli, mcp, bus (a hat's request), loop (the "
            "loop's own, e.g. the theme heartbeat)"
        ),
    ]
    input: dict[str, Any]
    result: Annotated[dict[str, Any] | None, Field(description="the output, on success")] = None
    error: Annotated[CallError | None, Field(description="the error, on failure")] = None
    ts: float
    utc_offset: Annotated[int, Field(description="seconds east of UTC, the caller's")] = 0


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class ToolCallLine:
    """A tool call as an agent's process appends it to the iteration's events file."""

    kind: Literal["tool.call"] = "tool.call"
    call: ToolCall


@cache
def _tool_call_line() -> TypeAdapter[ToolCallLine]:
    """Built on first use: a tool command that only writes records never pays for it."""
    return TypeAdapter(ToolCallLine)


def parse_tool_call_line(line: bytes | str) -> ToolCall:
    """The call of an events-file line of kind ``tool.call`` (JSON).

    Raises:
        ValueError: the line is not a valid tool call; the message says what, in one line.
    """
    try:
        return _tool_call_line().validate_json(line).call
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class LostCalls:
    """The tool calls a backend call of an iteration made before it was lost: an earlier
    attempt (the run was killed, and the resumed run ran the iteration again as a new
    attempt), or an earlier call of the same attempt that a rate limit refused (the
    backend was called again after the wait).

    What they changed (a task started, a theme file taken) stayed, so they belong to
    the iteration: a replay makes them again, as they were, before the iteration's own.
    """

    attempt: Annotated[int, Field(ge=1, description="the attempt that made them")]
    tool_calls: tuple[ToolCall, ...]


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class IterationFields:
    """What an iteration amounted to: the seed's fields plus how the backend and the engine
    saw it (the journal's ``iteration.end`` and a recording's ``iteration`` line)."""

    kind: str
    iteration: Iteration
    hat: str
    activation: Annotated[Count, Field(description="the hat's runs before this one")] = 0
    backend: str
    backend_ok: Annotated[bool, Field(description="the backend itself succeeded")]
    status: Literal["ok", "failed"]
    reason: str | None = None
    exit_code: int | None = None
    prompt: str
    output: str
    triggers: Annotated[tuple[Event, ...], Field(description="the events it ran on")] = ()
    events: Annotated[tuple[Event, ...], Field(description="the hat's events, both channels")]
    emitted: Annotated[tuple[Event, ...], Field(description="through the emit file")] = ()
    published: Annotated[tuple[Event, ...], Field(description="all published meanwhile")] = ()
    consumed: Annotated[tuple[int, ...], Field(description="pending events it consumed")] = ()
    dropped: Annotated[
        tuple[Event, ...], Field(description="events strict_publishes dropped (not published)")
    ] = ()
    completed: bool = False
    cancelled: Annotated[bool, Field(description="it published the cancellation event")] = False
    notes: tuple[str, ...] = ()
    duration: Seconds
    elapsed: Annotated[Seconds, Field(description="the session's runtime when it ended")]
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    tool_calls: Annotated[
        tuple[ToolCall, ...], Field(description="hatloop tool calls made in its context")
    ] = ()
    lost_calls: Annotated[
        tuple[LostCalls, ...],
        Field(description="tool calls of its earlier attempts that did not end (left out: none)"),
    ] = ()
    ts: float


@dataclass(kw_only=True)
class IterationEnd(IterationFields):
    """An iteration committed: the commit point of the journal."""

    kind: Literal["iteration.end"] = "iteration.end"


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class HatExhausted:
    """A hat reached ``max_activations``: its pending events were dropped, ``event`` told."""

    kind: Literal["hat.exhausted"] = "hat.exhausted"
    hat: str
    dropped: Annotated[tuple[int, ...], Field(description="the dropped events' numbers")]
    event: Event
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class Wait:
    """A hat's call hit a rate or usage limit: the loop waits until ``until`` (seconds
    since the epoch) and runs the iteration again; a resumed session goes on waiting
    until the same time. A wait is not a failed iteration."""

    kind: Literal["wait"] = "wait"
    iteration: Iteration
    hat: str
    limit: Literal["rate_limit", "usage_limit"]
    message: str
    attempt: Annotated[int, Field(ge=1, description="the iteration's waits, this one included")]
    seconds: Seconds
    until: Annotated[float, Field(description="when the iteration runs again (epoch seconds)")]
    reset_at: Annotated[float | None, Field(description="the limit's reset, as the CLI said")] = (
        None
    )
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class EventsPublished:
    """Events published while no iteration collected (by an extension or a subscriber,
    after iteration ``after``): journaled, then routed like an iteration's events."""

    kind: Literal["events.published"] = "events.published"
    after: Annotated[Count, Field(description="the iterations committed before them")]
    events: tuple[Event, ...]
    ts: float


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class LimitSettings:
    """The limits and budgets a session runs with: what ``run --resume`` may change."""

    max_iterations: Annotated[int, Field(ge=1)]
    max_runtime_seconds: Annotated[float, Field(gt=0)]
    max_consecutive_failures: Annotated[int, Field(ge=1)]
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_wait_seconds: Seconds = 3600.0
    hat_max_cost_usd: dict[str, float] = field(default_factory=dict)
    hat_max_tokens: dict[str, int] = field(default_factory=dict)


@dataclass(kw_only=True)
class Override(LimitSettings):
    """A resumed session runs with other limits (and backends) from here on: after
    iteration ``after_iteration``. Replay applies the same change at the same point."""

    kind: Literal["override"] = "override"
    after_iteration: Count
    backends: Annotated[
        dict[str, str], Field(description="hat -> backend type, for the hats that changed")
    ] = field(default_factory=dict)
    ts: float

    def settings(self) -> LimitSettings:
        """The limits alone."""
        return LimitSettings(**{f.name: getattr(self, f.name) for f in fields(LimitSettings)})

    def changes(self, before: LimitSettings | None) -> dict[str, int | float | str]:
        """What it changes from ``before`` (all it sets, when the limits before are not
        known), by name, in the settings' order: each limit it sets to another value,
        each hat's budget where the hats' budgets changed (``builder.max_cost_usd``),
        and each hat's backend (``builder.backend``). What ``show`` and the resume's log
        line say."""
        out: dict[str, int | float | str] = {}
        for f in fields(LimitSettings):
            value = getattr(self, f.name)
            if before is not None and getattr(before, f.name) == value:
                continue
            if isinstance(value, dict):  # a hat's budgets: hat_max_cost_usd, hat_max_tokens
                budget = f.name.removeprefix("hat_")
                out.update({f"{hat}.{budget}": v for hat, v in value.items()})
            elif value is not None:
                out[f.name] = value
        out.update({f"{hat}.backend": kind for hat, kind in self.backends.items()})
        return out


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class Resume:
    """A process took the session over after ``iteration`` (``in_flight`` was running,
    the first of ``in_flight_all`` when parallel hats had several in flight);
    ``stopped``: the processes a previous run had left running, which it stopped."""

    kind: Literal["resume"] = "resume"
    pid: int
    iteration: Count
    in_flight: int | None = None
    # written only when several were in flight (``in_flight`` names one alone), so a
    # sequential session's resume line reads as it did before the field existed
    in_flight_all: Annotated[
        tuple[int, ...],
        Field(description="every iteration in flight, oldest first, when there were several"),
    ] = ()
    stopped: tuple[int, ...] = ()
    flags: Annotated[
        dict[str, FlagValue],
        Field(description="the settings given as flags to this run, or held from the last"),
    ] = field(default_factory=dict)
    ts: float

    def lost(self) -> tuple[int, ...]:
        """Every iteration that was in flight, and runs again: none, one or several."""
        if self.in_flight_all:
            return self.in_flight_all
        return () if self.in_flight is None else (self.in_flight,)


@with_config(RECORD_CONFIG)
@dataclass(kw_only=True)
class SessionEndFields:
    """How a session ended (session.end, and a recording's footer)."""

    kind: str
    reason: str
    iterations: Count
    elapsed: Seconds


@dataclass(kw_only=True)
class SessionEnd(SessionEndFields):
    """The journal's last record: why and when the session ended."""

    kind: Literal["session.end"] = "session.end"
    unrouted_topic: Annotated[
        str | None,
        Field(description="the topic no hat takes, when the session ended as unrouted_event"),
    ] = None
    ts: float


JournalRecord = Annotated[
    SessionStart
    | IterationStart
    | ChildStarted
    | EventMalformed
    | IterationEnd
    | HatExhausted
    | Wait
    | EventsPublished
    | Resume
    | Override
    | SessionEnd,
    Field(discriminator="kind"),
]


@cache
def _journal_record() -> TypeAdapter[JournalRecord]:
    """Built on first use (about 50 ms of schema building a tool command never needs)."""
    return TypeAdapter(JournalRecord)


def validation_message(exc: ValidationError) -> str:
    """The first problem of a failed validation, in one line: ``where: what``."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    more = len(exc.errors()) - 1
    text = f"{loc}: {err['msg']}" if loc else str(err["msg"])
    return text + (f" (and {more} more)" if more else "")


def parse_record(line: bytes | str) -> JournalRecord:
    """One journal line (JSON), validated against its kind's schema.

    Raises:
        ValueError: not JSON, not a record of a known kind, a field of the wrong shape,
            or another journal format; the message says which, in one line (without
            the file and line, which the caller knows).
    """
    try:
        record = _journal_record().validate_json(line)
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None
    if isinstance(record, SessionStart) and record.schema_version not in READABLE_JOURNAL_VERSIONS:
        raise ValueError(
            f"journal format version {record.schema_version}: this hatloop reads versions "
            f"1 to {JOURNAL_VERSION}"
        )
    return record


def encode_record(record: object) -> bytes:
    """A record (any of these dataclasses) as one JSONL line, through :mod:`loop._json`
    (an iteration's long texts decide its codec)."""
    large = isinstance(record, IterationFields) and (
        len(record.output) + len(record.prompt) > _json.LARGE
    )
    if isinstance(record, IterationFields | SessionEnd | Resume):
        return _json.dumps_line(record_data(record), large=large)
    return _json.dumps_line(record, large=large)


# The optional fields a line leaves out while they are unset (None or empty), each
# added to a format after lines without it were written: an older reader reads such a
# line as before. Every other field is always written.
_LEFT_OUT_UNSET: tuple[tuple[type, str], ...] = (
    (IterationFields, "lost_calls"),
    (SessionEnd, "unrouted_topic"),
    (Resume, "in_flight_all"),
)


def record_data(record: IterationFields | SessionEnd | Resume) -> dict[str, Any]:
    """A record's fields as data (a copy), without its optional field while that is
    unset (:data:`_LEFT_OUT_UNSET`)."""
    data = vars(record).copy()
    for kind, name in _LEFT_OUT_UNSET:
        if isinstance(record, kind) and not data[name]:
            del data[name]
    return data
