"""The calls' timeouts: one watchdog for every call in flight (loop.engine.timeouts)."""

from __future__ import annotations

import time
from collections.abc import Awaitable

import anyio
import anyio.lowlevel
import pytest

from loop.engine.timeouts import Watchdog

pytestmark = pytest.mark.anyio


async def _call(watchdog: Watchdog, limit: float, takes: float) -> tuple[bool, float]:
    """Run a call of ``takes`` seconds under ``limit``: (timed out, seconds it ran)."""
    t0 = time.monotonic()
    with watchdog.limit(limit) as scope:
        await anyio.sleep(takes)
    return scope.cancelled_caught, time.monotonic() - t0


async def _with_watchdog(watchdog: Watchdog, body: Awaitable[None]) -> None:
    """Run ``body`` with ``watchdog`` running beside it."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.run)
        await anyio.lowlevel.checkpoint()  # let it start
        assert watchdog.running
        await body
        tg.cancel_scope.cancel()


async def test_a_call_past_its_deadline_is_cancelled() -> None:
    watchdog = Watchdog()
    results: list[tuple[bool, float]] = []

    async def body() -> None:
        results.append(await _call(watchdog, 0.2, 30))
        results.append(await _call(watchdog, 30, 0.01))

    await _with_watchdog(watchdog, body())
    (late, late_s), (quick, _) = results
    assert late and late_s < 10
    assert not quick
    assert not watchdog.calls  # nothing is left watched


async def test_a_sooner_deadline_wakes_a_watchdog_asleep_until_a_later_one() -> None:
    watchdog = Watchdog()
    results: list[tuple[bool, float]] = []

    async def long_call() -> None:
        results.append(await _call(watchdog, 60, 20))

    async def body() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)  # the watchdog now sleeps until 60 s from now
            await anyio.sleep(0.05)
            results.append(await _call(watchdog, 0.2, 30))
            tg.cancel_scope.cancel()

    await _with_watchdog(watchdog, body())
    timed_out, seconds = results[-1]
    assert timed_out and seconds < 10


async def test_an_idle_watchdog_still_keeps_a_sooner_deadline() -> None:
    """With nothing in flight it sleeps until the latest deadline it was given; a call
    whose deadline comes before that wakes it."""
    watchdog = Watchdog()
    results: list[tuple[bool, float]] = []

    async def body() -> None:
        results.append(await _call(watchdog, 60, 0))  # ends at once: latest deadline in 60 s
        await anyio.sleep(0.05)  # the watchdog looks: nothing in flight
        results.append(await _call(watchdog, 0.2, 30))

    await _with_watchdog(watchdog, body())
    timed_out, seconds = results[-1]
    assert timed_out and seconds < 10


async def test_without_a_running_watchdog_a_call_keeps_its_own_deadline() -> None:
    watchdog = Watchdog()
    timed_out, seconds = await _call(watchdog, 0.2, 30)
    assert timed_out and seconds < 10
    assert not watchdog.calls


async def test_an_error_in_the_call_is_not_swallowed() -> None:
    watchdog = Watchdog()

    async def body() -> None:
        with pytest.raises(ZeroDivisionError), watchdog.limit(5):
            await anyio.lowlevel.checkpoint()
            _ = 1 / 0

    await _with_watchdog(watchdog, body())
    assert not watchdog.calls
