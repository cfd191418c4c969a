"""The event bus: pattern subscriptions, ordered delivery, error isolation.

Every subscriber sees the events it matches in global publish order, even when a
handler publishes while it is being delivered to (those events are queued behind
the current one rather than delivered re-entrantly). A handler that raises is
logged and counted; the other subscribers and the publisher go on. Buffering is
bounded: a publish cascade that queues more than ``max_pending`` events raises
``BusOverflow`` instead of growing without limit.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from loop.errors import BusOverflow
from loop.events import Event, is_valid_pattern, topic_matches

__all__ = ["BusOverflow", "EventBus", "Handler", "Subscription"]

log = structlog.get_logger("loop.bus")

Handler = Callable[[Event], Awaitable[None] | None]


@dataclass(slots=True)
class Subscription:
    """One subscriber: a name, a pattern and a handler, with its counters."""

    name: str
    pattern: str
    handler: Handler
    delivered: int = 0
    failures: int = 0
    last_error: str | None = None


@dataclass(slots=True)
class _Stats:
    published: int = 0
    failures: int = 0


@dataclass
class EventBus:
    """Publish events to pattern subscribers in order."""

    max_pending: int = 10_000
    _subs: list[Subscription] = field(default_factory=list)
    _queue: deque[Event] = field(default_factory=deque)
    _draining: bool = False
    stats: _Stats = field(default_factory=_Stats)
    # topic -> matching subscriptions, in order; cleared whenever subscriptions change
    _matches: dict[str, tuple[Subscription, ...]] = field(default_factory=dict)

    def subscribe(self, pattern: str, handler: Handler, *, name: str | None = None) -> Subscription:
        """Call ``handler`` for every event whose topic matches ``pattern``."""
        if not is_valid_pattern(pattern):
            raise ValueError(f"invalid subscription pattern {pattern!r}")
        sub = Subscription(
            name=name or str(getattr(handler, "__qualname__", "handler")),
            pattern=pattern,
            handler=handler,
        )
        self._subs.append(sub)
        self._matches.clear()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop delivering to ``sub`` (a no-op if it is already gone)."""
        if sub in self._subs:
            self._subs.remove(sub)
            self._matches.clear()

    @property
    def subscriptions(self) -> tuple[Subscription, ...]:
        """The current subscriptions, in delivery order."""
        return tuple(self._subs)

    async def publish(self, event: Event) -> None:
        """Deliver ``event`` now, unless a delivery is under way: then queue it.

        A handler publishing during delivery returns at once; its event is delivered
        after the current one to every subscriber, by the outer ``publish``.
        """
        if self._draining:
            if len(self._queue) >= self.max_pending:
                raise BusOverflow(
                    f"more than {self.max_pending} events queued in one publish cascade "
                    f"(last topic {event.topic!r}): a subscriber is publishing in a loop"
                )
            self._queue.append(event)
            self.stats.published += 1
            return
        self.stats.published += 1
        self._draining = True
        try:
            current = event
            while True:
                subs = self._matches.get(current.topic)
                if subs is None:
                    subs = tuple(s for s in self._subs if topic_matches(s.pattern, current.topic))
                    self._matches[current.topic] = subs
                for sub in subs:  # a snapshot: changes apply from the next event on
                    try:
                        result = sub.handler(current)
                        if result is not None and inspect.isawaitable(result):  # sync: None
                            await result
                        sub.delivered += 1
                    except BusOverflow:
                        raise  # a runaway cascade is the publisher's problem
                    except Exception as exc:
                        self._failed(sub, current, exc)
                if not self._queue:
                    break
                current = self._queue.popleft()
        finally:
            self._draining = False
            self._queue.clear()

    def _failed(self, sub: Subscription, event: Event, exc: Exception) -> None:
        sub.failures += 1
        sub.last_error = f"{type(exc).__name__}: {exc}"
        self.stats.failures += 1
        log.warning(
            "subscriber failed", subscriber=sub.name, topic=event.topic, error=sub.last_error
        )
