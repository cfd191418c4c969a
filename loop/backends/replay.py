"""The replay backend: serves each recorded iteration's output to the real engine.

For iteration *n* it returns what the backend returned when the session was recorded:
the output text (so ``<event>`` tags are parsed again by the engine), the events that
came through the emit file (written to ``request.events_file``, so the engine reads
that channel again too), the exit code, the cost, and a recorded failure as the same
failure. Nothing is decided here: routing, defaults, completion and limits are the
engine's, which is what makes a replay a regression check.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Protocol

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from loop.backends.base import BackendRequest, BackendResult
from loop.emit import append_event

__all__ = ["RecordedIterations", "ReplayBackend", "ReplayEvent", "ReplayIteration"]


class ReplayEvent(TypedDict):
    """An event as replay reads it: plain data, validated (what replay compares and serves)."""

    topic: str
    payload: NotRequired[Any]
    source: NotRequired[str]
    target: NotRequired[str | None]
    ts: NotRequired[float | None]


class ReplayIteration(BaseModel):
    """The part of an iteration line that replay serves and compares, validated.

    Half the cost of a full :class:`IterationRecord` per replayed iteration: events stay
    plain dicts and the fields replay never reads (prompt, timings) are not parsed into
    the model. ``python -m loop show`` and :meth:`RecordingReader.iteration` give the
    whole record.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    iteration: int = Field(ge=1)
    hat: str
    output: str
    status: Literal["ok", "failed"]
    reason: str | None = None
    backend_ok: bool
    exit_code: int | None = None
    events: list[ReplayEvent]
    emitted: list[ReplayEvent] = Field(default_factory=list)
    published: list[ReplayEvent] = Field(default_factory=list)
    triggers: list[ReplayEvent] = Field(default_factory=list)
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class RecordedIterations(Protocol):
    """Where the replay backend reads recorded iterations (on demand, by number)."""

    @property
    def last_iteration(self) -> int:
        """The highest iteration number in the recording (0 for none)."""
        ...

    def replay_iteration(self, number: int) -> ReplayIteration | None:
        """What replay needs of iteration ``number``, or ``None`` when it is not recorded."""
        ...


class ReplayBackend:
    """Serves recorded iterations by iteration number, for every hat."""

    kind = "replay"
    uses_files = False  # it makes the events folder itself, only when it has events to write
    instant = True  # reads the recording and returns: it never waits on anything

    def __init__(self, source: RecordedIterations) -> None:
        self.source = source
        self.served = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        """The recorded result of ``request.iteration``, or a failure saying why not."""
        number = request.iteration
        record = self.source.replay_iteration(number)
        if record is None:
            last = self.source.last_iteration
            if number > last:
                return BackendResult.failed(
                    f"recording exhausted: it holds {last} iteration(s), the engine asked "
                    f"for iteration {number}"
                )
            return BackendResult.failed(f"recording has no iteration {number}")
        if record.hat != request.hat:
            return BackendResult.failed(
                f"replay: iteration {number} was recorded for hat {record.hat!r}, "
                f"the engine chose {request.hat!r}"
            )
        if record.emitted:
            request.events_file.parent.mkdir(parents=True, exist_ok=True)
        for event in record.emitted:
            append_event(
                request.events_file, event["topic"], event.get("payload", ""), event.get("target")
            )
        self.served += 1
        return BackendResult(
            output=record.output,
            ok=record.backend_ok,
            exit_code=record.exit_code,
            reason=None if record.backend_ok else record.reason,
            cost_usd=record.cost_usd,
            input_tokens=record.input_tokens,
            output_tokens=record.output_tokens,
            turns=record.turns,
            meta=dict(record.meta),
            wrote_events_file=bool(record.emitted),
        )
