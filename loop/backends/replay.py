"""The replay backend: serves each recorded iteration's output to the real engine.

For iteration *n* it returns what the backend returned when the session was recorded:
the output text (so ``<event>`` tags are parsed again by the engine), the events that
came through the emit file (written to ``request.events_file``, so the engine reads
that channel again too), the exit code, the cost, and a recorded failure as the same
failure. The tool calls the agent made (over the CLI or MCP) are made again while it
"runs", through ``apply_calls`` (:class:`~loop.session.calls.CallReplayer`), so the tool
state changes as it did and the engine reads the calls from the events file again; when
activations ran at once, each call waits for those the others made before it.
Nothing is decided here: routing, defaults, completion and limits are the engine's,
which is what makes a replay a regression check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.emit import append_event
from loop.records import IterationFields

__all__ = ["ApplyCalls", "RecordedIterations", "ReplayBackend"]

# makes a recorded iteration's agent tool calls again, for the request's iteration (in a
# session with parallel hats, each in its turn among the calls of the others in flight)
ApplyCalls = Callable[[BackendRequest, IterationFields], Awaitable[None]]


class RecordedIterations(Protocol):
    """Where the replay backend reads recorded iterations (on demand, by number)."""

    @property
    def last_iteration(self) -> int:
        """The highest iteration number in the recording (0 for none)."""
        ...

    def iteration(self, number: int) -> IterationFields | None:
        """Recorded iteration ``number``, or ``None`` when it is not recorded."""
        ...


class ReplayBackend(Backend):
    """Serves recorded iterations by iteration number, for every hat."""

    kind = "replay"
    uses_files = False  # it makes the events folder itself, only when it has events to write
    # reads the recording and returns; it waits only for the replayed calls of the
    # activations in flight with it that were made before its own
    instant = True
    # it serves each iteration's recorded cost and tokens, so a budget holds the replay
    # as it held the recorded run (which warned of a hat its budgets could not hold)
    reports_cost = True
    reports_tokens = True

    def __init__(
        self,
        source: RecordedIterations,
        apply_calls: ApplyCalls | None = None,
        *,
        writes_events: bool = True,
    ) -> None:
        self.source = source
        self.apply_calls = apply_calls
        # False: no recorded iteration emitted events through the file or made tool
        # calls, so this replay never writes the events file (and the engine reads none)
        self.writes_events = writes_events
        self.served = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        """The recorded result of ``request.iteration``, or a failure saying why not."""
        number = request.iteration
        record = self.source.iteration(number)
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
            events_file = request.events_file
            assert events_file is not None  # it writes events: the engine names the file
            for event in record.emitted:
                append_event(
                    events_file,
                    event.topic,
                    event.payload,
                    event.target,
                    root=request.root,
                    create_folders=True,
                )
        if (record.tool_calls or record.lost_calls) and self.apply_calls is not None:
            await self.apply_calls(request, record)
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
        )
