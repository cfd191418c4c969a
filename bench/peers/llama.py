"""llama-index-workflows: two steps exchanging events; snapshot = ``ctx.to_dict()`` per step."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from workflows import Workflow, step
from workflows.events import Event, StartEvent, StepState, StepStateChanged, StopEvent

from bench.stats import Stamps


class PingEv(Event):
    """The ping hat's event."""

    n: int


class PongEv(Event):
    """The pong hat's event."""

    n: int


class PingPong(Workflow):
    """Ping on start and on pong; pong on ping; stop after ``limit`` transitions."""

    def __init__(self, limit: int, stamps: Stamps) -> None:
        super().__init__(timeout=None)
        self.limit = limit
        self.stamps = stamps

    @step
    async def ping(self, ev: StartEvent | PongEv) -> PingEv | StopEvent:
        """One ping transition."""
        self.stamps.hit()
        k = (0 if isinstance(ev, StartEvent) else ev.n) + 1
        return StopEvent(result=k) if k >= self.limit else PingEv(n=k)

    @step
    async def pong(self, ev: PingEv) -> PongEv | StopEvent:
        """One pong transition."""
        self.stamps.hit()
        k = ev.n + 1
        return StopEvent(result=k) if k >= self.limit else PongEv(n=k)


async def _main(n: int, snapshot: bool, out: Path) -> tuple[Stamps, int]:
    stamps = Stamps()
    handler = PingPong(n, stamps).run()
    lines = 0
    if snapshot:
        with out.open("w", encoding="utf-8") as fh:
            async for ev in handler.stream_events(expose_internal=True):
                # One context snapshot each time a step finishes.
                if isinstance(ev, StepStateChanged) and ev.step_state == StepState.NOT_RUNNING:
                    fh.write(json.dumps(handler.ctx.to_dict()) + "\n")  # type: ignore[union-attr]
                    lines += 1
    await handler
    return stamps, lines


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Run the ping-pong bare or with a context snapshot per step written as JSONL."""
    with tempfile.TemporaryDirectory(prefix="bench-llama-") as tmp:
        stamps, lines = asyncio.run(
            _main(int(params["n"]), params["mode"] == "snapshot", Path(tmp) / "snapshots.jsonl")
        )
    out = stamps.result()
    out["snapshots"] = lines
    return out
