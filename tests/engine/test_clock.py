"""The engine's clocks are its own: a FakeClock drives runtime, timings and timestamps."""

from __future__ import annotations

from pathlib import Path

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.engine.journal import read_journal
from loop.records import IterationEnd, IterationStart, SessionEnd, SessionStart
from loop.testing import FakeClock, make_config, run_hats, tag


class Slow(Backend):
    """Answers at once, but moves the fake clock as if each run took ``seconds``."""

    kind = "slow"
    uses_files = False
    instant = True

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds

    async def run(self, request: BackendRequest) -> BackendResult:
        """Advance the clock; publish the next step."""
        self.clock.advance(self.seconds)
        return BackendResult(output=tag("step.done", str(request.iteration)))


async def test_runtime_timings_and_timestamps_come_from_the_given_clocks(tmp_path: Path) -> None:
    """Each run takes 10 fake seconds: max_runtime 25 stops the loop after the third
    iteration; durations and elapsed are the fake seconds; every record's ts is the
    fake time of day, never the machine's."""
    cfg = make_config(
        {"stepper": {"triggers": ["task.start", "step.done"], "publishes": ["step.done"]}},
        folder=tmp_path,
        max_runtime_seconds=25,
        stale_threshold=100,
    )
    clock, wall = FakeClock(now=500.0), FakeClock(now=1_000_000.0)
    summary, capture = await run_hats(
        cfg,
        {"stepper": Slow(clock, 10.0)},
        workdir=tmp_path,
        session_id="fake",
        clock=clock,
        wall_clock=wall,
    )
    assert (summary.reason, summary.iterations, summary.elapsed) == ("max_runtime", 3, 30.0)
    records = read_journal(tmp_path / ".loop/sessions/fake/journal.jsonl").records
    ends = [r for r in records if isinstance(r, IterationEnd)]
    assert [(r.duration, r.elapsed) for r in ends] == [(10.0, 10.0), (10.0, 20.0), (10.0, 30.0)]
    stamped = [r for r in records if isinstance(r, SessionStart | IterationStart | SessionEnd)]
    assert {r.ts for r in stamped} | {r.ts for r in ends} == {1_000_000.0}
    assert records[0].started_at == "1970-01-12T13:46:40Z"  # type: ignore[union-attr]
    assert {e.ts for r in ends for e in r.events} == {1_000_000.0}  # tag events: the wall clock
    assert all(e.ts == 1_000_000.0 for e in capture.events if e.source == "loop")
