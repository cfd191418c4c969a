"""A session as one typed view: what ``show``, ``events`` and ``report`` work on.

:mod:`loop.session.load` is the one module that reads a journal or a recording and
builds a :class:`SessionView`; everything here is plain data and pure functions of it
(per-hat figures, the events that flowed between hats, the event list).

The iteration fields carry the records' own names, so an iteration is one validation of
its record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from loop import _json
from loop.events import topic_matches
from loop.exits import EXIT_INTERRUPTED, EXIT_LIMIT, EXIT_OK
from loop.records import HatTopology
from loop.session.runtime import ElapsedAsOf

__all__ = [
    "END",
    "CallErrorView",
    "EndView",
    "EventRow",
    "EventView",
    "Flow",
    "HatStats",
    "InFlightView",
    "IterationView",
    "LoopEvent",
    "LostCallsView",
    "MarkerKind",
    "MarkerView",
    "SessionView",
    "ToolCallView",
    "WaitView",
    "event_rows",
    "flows",
    "hat_stats",
    "outcome",
]

END = "(end)"  # the node a completion event flows to, in flows()


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class EventView(_View):
    """An event as the files keep it."""

    topic: str
    payload: Any = ""
    source: str = "loop"
    target: str | None = None
    ts: float | None = None

    def payload_text(self) -> str:
        """The payload as text: a string as it is, anything else as compact JSON."""
        if isinstance(self.payload, str):
            return self.payload
        return _json.dumps_line(self.payload).decode().rstrip("\n")


class CallErrorView(_View):
    """A tool call's structured error."""

    code: str
    message: str
    details: Any = None


class ToolCallView(_View):
    """A hatloop tool call made in an iteration's context, as the records keep it."""

    tool: str
    channel: str
    input: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    error: CallErrorView | None = None
    ts: float | None = None

    def outcome_text(self) -> str:
        """``ok``, or ``error <code>: <message>``."""
        if self.error is None:
            return "ok"
        return f"error {self.error.code}: {self.error.message}"


class LostCallsView(_View):
    """The tool calls of a backend call of the iteration that did not end (the run was
    killed, or a rate limit refused it): what they changed stayed."""

    attempt: int
    tool_calls: tuple[ToolCallView, ...] = ()


WAIT_MESSAGE_CHARS = 120  # of a limit's message, in a wait's one line


class WaitView(_View):
    """A rate or usage limit an iteration's call hit, and the wait the loop planned for
    it (a journal's ``wait`` record; a recording does not keep them)."""

    iteration: int
    hat: str
    limit: str  # rate_limit, usage_limit
    message: str = ""  # what the agent's CLI said
    attempt: int = 1  # the iteration's waits, this one included
    seconds: float
    until: float  # when the iteration's hat was called again (epoch seconds)
    at: float | None = None  # when the wait began, in seconds since the session started

    def text(self) -> str:
        """``planner waited 34.89s for rate_limit (iteration 1): <the CLI's message>``."""
        said = " ".join(self.message.split())
        if len(said) > WAIT_MESSAGE_CHARS:
            said = said[: WAIT_MESSAGE_CHARS - 1] + "…"
        return (
            f"{self.hat} waited {self.seconds:.2f}s for {self.limit} (iteration "
            f"{self.iteration})" + (f": {said}" if said else "")
        )


class IterationView(_View):
    """One committed iteration: what the hat was asked, what it answered, what it cost."""

    iteration: int
    hat: str
    activation: int = 0
    backend: str = ""
    backend_ok: bool = True
    status: Literal["ok", "failed"]
    reason: str | None = None
    exit_code: int | None = None
    prompt: str = ""
    output: str = ""
    triggers: tuple[EventView, ...] = ()
    # the numbers the loop gave its triggers as it routed them, in their order (from the
    # iteration's start record; else what it consumed, which is all of them); () unknown
    trigger_seqs: tuple[int, ...] = ()
    events: tuple[EventView, ...] = ()
    emitted: tuple[EventView, ...] = ()
    published: tuple[EventView, ...] = ()
    consumed: tuple[int, ...] = ()  # the numbers of the triggers it consumed
    completed: bool = False
    notes: tuple[str, ...] = ()
    duration: float = 0.0
    elapsed: float = 0.0
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = {}
    tool_calls: tuple[ToolCallView, ...] = ()
    lost_calls: tuple[LostCallsView, ...] = ()
    ts: float | None = None
    ran_with: tuple[int, ...] = ()  # parallel hats: the iterations in flight with it
    # when its start was journaled (before any wait), in seconds since the session
    # started: a journal's, None where the file does not say
    began: float | None = None
    waits: tuple[WaitView, ...] = ()  # the limits its calls hit, waited out (a journal's)

    @property
    def waited(self) -> float:
        """The seconds of its waits, in all."""
        return sum(w.seconds for w in self.waits)

    @property
    def agent_tools(self) -> tuple[str, ...]:
        """Every tool the agent used (its own and hatloop's), in order, as its backend
        reported them (Claude Code, Gemini CLI, Codex)."""
        uses = self.meta.get("tool_uses")
        return tuple(str(u) for u in uses) if isinstance(uses, list) else ()

    @property
    def started(self) -> float:
        """When its hat's last call started, in seconds since the session started (after
        any wait: see :attr:`began`)."""
        return max(0.0, self.elapsed - self.duration)


class InFlightView(_View):
    """An iteration started and not ended (a journal's): running, left by a run that
    stopped without an end, or cut short by the session's end."""

    iteration: int
    hat: str
    began: float | None = None  # when it started, in seconds since the session started
    triggers: tuple[EventView, ...] = ()  # the events it runs on, as the loop routed them
    trigger_seqs: tuple[int, ...] = ()  # their numbers, in the same order


class LoopEvent(_View):
    """An event the loop itself published: the starting event, a hat-exhausted notice."""

    after: int  # the iterations done when it was published
    event: EventView


# What a marker of the timeline says happened (docs/inspect.md lists each): resumed,
# override (a resume's changed limits), ended (before a resume), hat_exhausted,
# published (events published outside any iteration), wait and in_flight (journal), and
# a recording's own: cap_reached, write_failed.
MarkerKind = Literal[
    "ended",
    "resumed",
    "override",
    "hat_exhausted",
    "published",
    "wait",
    "in_flight",
    "cap_reached",
    "write_failed",
]


class MarkerView(_View):
    """Something that happened between iterations, or to the file itself."""

    kind: MarkerKind
    after: int  # the iterations done at the time
    message: str


class EndView(_View):
    """How the session ended."""

    reason: str
    iterations: int
    elapsed: float
    exit_code: int


class SessionView(_View):
    """A whole session: its configuration, its iterations, its markers and its end."""

    source: Literal["journal", "recording"]
    path: str
    session_id: str
    started_at: str
    hatloop_version: str
    python_version: str | None = None
    schema_version: int | None = None  # the format version of the journal or recording
    config_digest: str
    starting_event: str
    completion_event: str
    hats: dict[str, HatTopology]  # as the session recorded them (the record's own type)
    iterations: tuple[IterationView, ...]
    loop_events: tuple[LoopEvent, ...] = ()
    markers: tuple[MarkerView, ...] = ()
    waits: tuple[WaitView, ...] = ()  # every limit waited out, in order (journal only)
    end: EndView | None = None
    in_flight: int | None = None  # the oldest iteration started and not ended (journal only)
    # every iteration started and not ended, oldest first: parallel hats run several at
    # once (``in_flight`` keeps its one number, the first of these, for older readers)
    in_flight_all: tuple[int, ...] = ()
    in_flight_runs: tuple[InFlightView, ...] = ()  # the same iterations: hat, start, events
    # a journal's: a live process holds the session's lock (a run without an end goes on)
    running: bool = False
    # the session's runtime, as status says it: as of its end, now (running: so far), or
    # its last commit (a run stopped without an end; a recording without its footer)
    elapsed: float = 0.0
    elapsed_as_of: ElapsedAsOf = "end"
    records: int  # the records in the file (a recording's run summary counts the same)
    last_run_records: int | None = None  # a resumed recording: what its last run wrote
    write_failures: int = 0
    cap_reached: bool = False
    redacted: bool | None = None
    warnings: tuple[str, ...] = ()

    def iteration(self, number: int) -> IterationView | None:
        """Iteration ``number``, or None."""
        index = number - 1
        its = self.iterations
        if 0 <= index < len(its) and its[index].iteration == number:  # the usual layout
            return its[index]
        return next((it for it in its if it.iteration == number), None)


# -- derived figures ----------------------------------------------------------------------


Outcome = Literal["completed", "limit", "failed", "interrupted", "unfinished"]


def outcome(view: SessionView) -> Outcome:
    """How the session ended, in one word: its exit code's meaning, or ``unfinished``."""
    end = view.end
    if end is None:
        return "unfinished"
    if end.exit_code == EXIT_OK:
        return "completed"
    if end.exit_code == EXIT_LIMIT:
        return "limit"
    return "interrupted" if end.exit_code == EXIT_INTERRUPTED else "failed"


class HatStats(_View):
    """One hat's iterations, time, cost and tokens (None: its backend never said)."""

    hat: str
    iterations: int = 0
    failed: int = 0
    duration: float = 0.0
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    events: int = 0  # events the hat itself published


def _add(total: Any, value: Any) -> Any:
    return total if value is None else (value if total is None else total + value)


def hat_stats(view: SessionView) -> list[HatStats]:
    """A row per hat: the configured hats in order, then any other hat that ran."""
    rows: dict[str, dict[str, Any]] = {name: {"hat": name} for name in view.hats}
    for it in view.iterations:
        row = rows.setdefault(it.hat, {"hat": it.hat})
        row["iterations"] = row.get("iterations", 0) + 1
        row["failed"] = row.get("failed", 0) + (it.status == "failed")
        row["duration"] = row.get("duration", 0.0) + it.duration
        for key in ("cost_usd", "input_tokens", "output_tokens"):
            row[key] = _add(row.get(key), getattr(it, key))
        row["events"] = row.get("events", 0) + sum(1 for e in it.published if e.source == it.hat)
    return [HatStats.model_validate(row) for row in rows.values()]


class Flow(_View):
    """Events of one topic that went from ``source`` (a hat, or ``loop``) to ``target``."""

    source: str
    target: str  # a hat, or END for the completion event
    topic: str
    count: int


def flows(view: SessionView) -> list[Flow]:
    """The events that actually flowed: each iteration's triggers (an iteration in
    flight's too), into its hat, and each completion event, into :data:`END`. An event
    tried again after a failed iteration counts once per iteration that ran on it."""
    counts: dict[tuple[str, str, str], int] = {}
    runs: list[IterationView | InFlightView] = [*view.iterations, *view.in_flight_runs]
    for run in runs:
        for event in run.triggers:
            key = (event.source, run.hat, event.topic)
            counts[key] = counts.get(key, 0) + 1
    for it in view.iterations:
        if it.completed:
            key = (it.hat, END, view.completion_event)
            counts[key] = counts.get(key, 0) + 1
    return [Flow(source=s, target=t, topic=p, count=n) for (s, t, p), n in counts.items()]


class EventRow(_View):
    """One published event, where it came from and which iteration ran on it."""

    iteration: int  # the iteration that published it (0: before the first)
    hat: str | None  # that iteration's hat (None: the loop published it)
    event: EventView
    to: int | None = None  # the iteration that consumed it (or, if none did, ran on it)
    taken_by: int | None = None  # the iteration in flight that runs on it (not ended)


def event_rows(
    view: SessionView,
    *,
    topic: str | None = None,
    hat: str | None = None,
    iteration: int | None = None,
) -> Iterator[EventRow]:
    """Every event published in the session, in order, filtered.

    ``topic``: a topic pattern (``*`` matches one segment); ``hat``: events published
    during that hat's iterations; ``iteration``: events published by that iteration.
    """
    recipients, taken = _recipients(view)
    seen: dict[_Key, int] = {}  # the events of each key published so far

    def row(number: int, by: str | None, event: EventView) -> EventRow | None:
        key = _key(event)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if topic is not None and not topic_matches(topic, event.topic):
            return None
        if (hat is not None and by != hat) or (iteration is not None and number != iteration):
            return None
        return EventRow(
            iteration=number,
            hat=by,
            event=event,
            to=recipients.get((key, occurrence)),
            taken_by=taken.get((key, occurrence)),
        )

    loop_events = iter(view.loop_events)
    pending = next(loop_events, None)
    for it in view.iterations:
        while pending is not None and pending.after < it.iteration:
            if (found := row(pending.after, None, pending.event)) is not None:
                yield found
            pending = next(loop_events, None)
        for event in it.published:
            if (found := row(it.iteration, it.hat, event)) is not None:
                yield found
    while pending is not None:
        if (found := row(pending.after, None, pending.event)) is not None:
            yield found
        pending = next(loop_events, None)


# An event as a whole (payload included): what tells published events apart when the
# files do not number them. A fan-out's events share their topic, source and time.
_Key = tuple[str, str, str | None, float | None, bool, str]


def _key(event: EventView) -> _Key:
    payload = event.payload
    return (
        event.topic,
        event.source,
        event.target,
        event.ts,
        isinstance(payload, str),
        event.payload_text(),
    )


_Recipients = dict[tuple[_Key, int], int]


def _recipients(view: SessionView) -> tuple[_Recipients, _Recipients]:
    """The iteration that ran on each event that some iteration ran on: the one that
    consumed it or, if none did, the first that tried; and the iteration in flight
    (started, not ended) that runs on each event one does. An event is its key and its
    occurrence among the published events of that key (0 for the first).

    The loop numbers the events it routes, in the order they were published, and an
    iteration's record says the numbers of its triggers (:attr:`IterationView.trigger_seqs`),
    so the k-th occurrence of a key is the k-th smallest number any iteration ran on
    with that key: exact for events that differ in anything, in order for identical
    ones. An iteration whose numbers the file does not give (a failed one in a
    recording without start lines) ran on the first occurrences of each key that no
    iteration before it consumed.
    """
    numbers: dict[_Key, set[int]] = {}
    runs: list[IterationView | InFlightView] = [*view.iterations, *view.in_flight_runs]
    for run in runs:
        if run.trigger_seqs and len(run.trigger_seqs) == len(run.triggers):
            for event, seq in zip(run.triggers, run.trigger_seqs, strict=True):
                numbers.setdefault(_key(event), set()).add(seq)
    rank = {key: {seq: n for n, seq in enumerate(sorted(seqs))} for key, seqs in numbers.items()}
    taken: _Recipients = {}
    for flight in view.in_flight_runs:  # numbered: their start records say which events
        if len(flight.trigger_seqs) == len(flight.triggers):
            for event, seq in zip(flight.triggers, flight.trigger_seqs, strict=True):
                key = _key(event)
                taken.setdefault((key, rank[key][seq]), flight.iteration)
    tried: dict[tuple[_Key, int], int] = {}
    consumed: dict[tuple[_Key, int], int] = {}
    done: dict[_Key, set[int]] = {}  # by key, the occurrences consumed so far
    for it in view.iterations:
        numbered = bool(it.trigger_seqs) and len(it.trigger_seqs) == len(it.triggers)
        copies: dict[_Key, int] = {}  # unnumbered: this iteration's triggers of each key
        ran: list[tuple[_Key, int]] = []
        for index, event in enumerate(it.triggers):
            key = _key(event)
            if numbered:
                occurrence = rank[key][it.trigger_seqs[index]]
            else:
                occurrence = _nth_free(done.get(key, set()), copies.get(key, 0))
                copies[key] = copies.get(key, 0) + 1
            ran.append((key, occurrence))
            tried.setdefault((key, occurrence), it.iteration)
        if it.consumed if numbered else it.status == "ok":
            for key, occurrence in ran:
                consumed.setdefault((key, occurrence), it.iteration)
                done.setdefault(key, set()).add(occurrence)
    return tried | consumed, taken


def _nth_free(taken: set[int], n: int) -> int:
    """The ``n``-th number (from 0) of 0, 1, 2... that is not in ``taken``."""
    candidate = 0
    while True:
        if candidate not in taken:
            if n == 0:
                return candidate
            n -= 1
        candidate += 1
