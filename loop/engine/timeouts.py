"""The backend calls' timeouts: one watchdog for every call in flight (:class:`Watchdog`).

Each call runs under a cancel scope of its own, and the watchdog, a task that lives as
long as the session's loop, cancels the scopes whose deadline has passed. One timer
serves every call: a scope with a deadline of its own arms and disarms an event-loop
timer per call, which costs an instant backend's iteration more than anything else the
call does. The deadlines of one call after another only grow, so the watchdog sleeps
through about one timeout at a time: with nothing in flight, it sleeps until the latest
deadline it was given, which a next call's deadline seldom comes before. A call whose
deadline comes before the one it sleeps to wakes it.
"""

from __future__ import annotations

import math
from types import TracebackType

import anyio

__all__ = ["CallLimit", "Watchdog"]


class Watchdog:
    """Cancels each call's scope at its deadline; :meth:`run` is its task.

    A call limited while the watchdog does not run (no task started it) gets a scope
    with a deadline of its own: a timeout is never lost.
    """

    def __init__(self) -> None:
        self.calls: dict[anyio.CancelScope, float] = {}  # each call's scope: its deadline
        self.running = False
        self._wake_at = math.inf  # when the watchdog looks next
        self._latest = -math.inf  # the latest deadline given
        self._moved: anyio.Event | None = None

    def limit(self, seconds: float) -> CallLimit:
        """A cancel scope (a context manager) cancelled ``seconds`` from now."""
        return CallLimit(self, seconds)

    def add(self, scope: anyio.CancelScope, deadline: float) -> None:
        """Watch ``scope`` (until it ends); it is cancelled at ``deadline``."""
        self.calls[scope] = deadline
        self._latest = max(self._latest, deadline)
        if deadline < self._wake_at and self._moved is not None:
            self._wake_at = deadline
            self._moved.set()  # it sleeps past this deadline: it looks again

    async def run(self) -> None:
        """Cancel each scope whose deadline passed; sleep until the next deadline, or
        until a call whose deadline comes sooner starts. Runs until cancelled."""
        self.running = True
        try:
            while True:
                now = anyio.current_time()
                wake = math.inf
                for scope, deadline in self.calls.items():
                    if deadline <= now:
                        scope.cancel()
                    elif deadline < wake:
                        wake = deadline
                if not self.calls and self._latest > now:
                    wake = self._latest  # the next call's deadline is likely later
                self._wake_at = wake
                moved = self._moved = anyio.Event()
                with anyio.move_on_after(wake - now):
                    await moved.wait()
        finally:
            self.running = False
            self._moved = None
            self._wake_at = math.inf


class CallLimit:
    """One call's time limit: a cancel scope the watchdog cancels at its deadline
    (see :meth:`Watchdog.limit`)."""

    __slots__ = ("_deadline", "_watchdog", "scope")

    def __init__(self, watchdog: Watchdog, seconds: float) -> None:
        self._watchdog = watchdog
        self._deadline = anyio.current_time() + seconds
        self.scope = (
            anyio.CancelScope() if watchdog.running else anyio.CancelScope(deadline=self._deadline)
        )

    def __enter__(self) -> anyio.CancelScope:
        scope = self.scope.__enter__()
        if self._watchdog.running:
            self._watchdog.add(scope, self._deadline)
        return scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._watchdog.calls.pop(self.scope, None)
        return bool(self.scope.__exit__(exc_type, exc, tb))
