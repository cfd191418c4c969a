"""Waiting out rate and usage limits: plan (pure, :func:`~loop.engine.decide.plan_wait`),
journal, tell the bus, sleep until the deadline on the wall clock.

A backend classifies a refused call (:class:`~loop.backends.base.RateLimit`); the
engine journals a :class:`~loop.records.Wait` with the deadline, publishes
``loop.waiting`` with it (the progress display shows it), sleeps until then and runs
the iteration again. The deadline is wall-clock time, so a session killed during the
wait and resumed goes on waiting until the same moment instead of retrying at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from loop._faults import crash_point
from loop.backends.base import BackendRequest, BackendResult, RateLimit
from loop.bus import EventBus
from loop.engine.decide import Limits, WaitPlan, jitter_fraction, plan_wait
from loop.engine.lifecycle import waiting_event
from loop.engine.state import LoopState
from loop.records import Wait

__all__ = ["MAX_SLEEP", "Called", "LimitWaits"]

log = structlog.get_logger("loop.engine")

# The longest single sleep: the wall clock is read again after it, so a clock that jumps
# (a suspended laptop) ends a wait when its deadline has passed, not a whole wait later.
MAX_SLEEP = 60.0

Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class Called:
    """A backend call that was not refused by a limit, or the last one that was
    (``refused``: the wait the loop does not make; it ends, ``rate_limited``). A value
    (one per iteration: not ``frozen``, which would triple its cost to build)."""

    request: BackendRequest
    result: BackendResult
    started: float
    refused: WaitPlan | None = None
    reran: bool = False  # the attempt's backend was called again after a wait

    @property
    def stop(self) -> str | None:
        """Why the loop does not wait (the summary's note), or None."""
        return self.refused.stop if self.refused is not None else None


Attempt = Callable[[bool], Awaitable[tuple[BackendRequest, BackendResult, float]]]


class LimitWaits:
    """The engine's waits for one session.

    Args:
        session_id: part of the jitter's key.
        bus: where ``loop.waiting`` goes.
        wall_clock: seconds since the epoch (the deadlines).
        sleep: sleeps the given seconds (``anyio.sleep``; a test passes a fake).
        flush: writes out what the extensions buffer, before a wait.
    """

    def __init__(
        self,
        *,
        session_id: str,
        bus: EventBus,
        wall_clock: Callable[[], float],
        sleep: Sleep,
        flush: Callable[[], None],
    ) -> None:
        self.session_id = session_id
        self.bus = bus
        self.wall_clock = wall_clock
        self.sleep = sleep
        self.flush = flush

    async def call(
        self,
        attempt: Attempt,
        *,
        state: LoopState,
        limits: Limits,
        iteration: int,
        hat: str,
        elapsed: Callable[[], float],
        record: Callable[[Wait], None],
    ) -> Called:
        """Call ``attempt`` (``True``: a re-run) until no limit refuses it, waiting between.

        A wait journaled before a kill (``state.waits`` of this iteration) is waited
        out first, until its own deadline. ``record`` journals a wait (and folds it into
        ``state``).
        """
        pending = state.waits.get(iteration)
        rerun = False
        while True:
            if pending is not None:
                await self.wait(pending)
                pending, rerun = None, True
            request, result, started = await attempt(rerun)
            limit = result.limited
            if result.ok or limit is None:
                return Called(request, result, started, reran=rerun)
            plan, number = self.plan(state, limits, limit, iteration, elapsed())
            if plan.stop is not None:
                log.warning("rate limited: not waiting", hat=hat, why=plan.stop)
                return Called(request, result, started, plan, reran=rerun)
            pending = self.record(plan, number, limit, iteration, hat)
            record(pending)
            crash_point("wait")

    def plan(
        self, state: LoopState, limits: Limits, limit: RateLimit, iteration: int, elapsed: float
    ) -> tuple[WaitPlan, int]:
        """The wait for ``iteration`` that hit ``limit``, and its attempt number."""
        last = state.waits.get(iteration)
        attempt = (last.attempt if last is not None else 0) + 1
        plan = plan_wait(
            limit,
            attempt=attempt,
            waited=state.waited.get(iteration, 0.0),
            now=self.wall_clock(),
            max_wait=limits.max_wait_seconds,
            runtime_left=limits.max_runtime_seconds - elapsed,
            jitter=jitter_fraction(self.session_id, iteration, attempt),
        )
        return plan, attempt

    def record(
        self, plan: WaitPlan, attempt: int, limit: RateLimit, iteration: int, hat: str
    ) -> Wait:
        """The journal record of a planned wait."""
        return Wait(
            iteration=iteration,
            hat=hat,
            limit=limit.kind,
            message=limit.message,
            attempt=attempt,
            seconds=plan.seconds,
            until=round(plan.until, 3),
            reset_at=limit.reset_at,
            ts=self.wall_clock(),
        )

    async def wait(self, record: Wait) -> None:
        """Tell the bus, then sleep until ``record.until`` (nothing when it has passed)."""
        if record.until <= self.wall_clock():
            return
        await self.bus.publish(
            waiting_event(
                record.limit.replace("_", " "), record.until, ts=self.wall_clock(), wait=record
            )
        )
        self.flush()
        while (left := record.until - self.wall_clock()) > 0:
            await self.sleep(min(left, MAX_SLEEP))
