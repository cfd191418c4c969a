"""The event bus: ordered delivery, error isolation, bounded buffering."""

from __future__ import annotations

import pytest

from loop.bus import BusOverflow, EventBus
from loop.events import Event


async def test_each_subscriber_sees_events_in_publish_order_even_when_handlers_publish() -> None:
    """An event published from a handler is delivered after the current one, to everyone."""
    bus = EventBus()
    seen_a: list[str] = []
    seen_b: list[str] = []

    async def a(ev: Event) -> None:
        seen_a.append(ev.topic)
        if ev.topic == "one.x":
            await bus.publish(Event(topic="two.x"))

    bus.subscribe("*", a, name="a")
    bus.subscribe("*", lambda ev: seen_b.append(ev.topic), name="b")
    await bus.publish(Event(topic="one.x"))
    assert seen_a == ["one.x", "two.x"]
    assert seen_b == ["one.x", "two.x"]


async def test_patterns_filter_delivery() -> None:
    """Only matching subscribers are called."""
    bus = EventBus()
    got: list[str] = []
    bus.subscribe("task.*", lambda ev: got.append(ev.topic))
    for t in ["task.start", "plan.ready", "task.done"]:
        await bus.publish(Event(topic=t))
    assert got == ["task.start", "task.done"]


async def test_a_failing_subscriber_is_counted_and_does_not_stop_others() -> None:
    """A raising handler is logged and counted; the next subscriber still gets the event."""
    bus = EventBus()
    got: list[str] = []

    def boom(ev: Event) -> None:
        raise RuntimeError("broken subscriber")

    sub = bus.subscribe("*", boom, name="boom")
    bus.subscribe("*", lambda ev: got.append(ev.topic))
    await bus.publish(Event(topic="a.b"))
    await bus.publish(Event(topic="c.d"))
    assert got == ["a.b", "c.d"]
    assert sub.failures == 2 and bus.stats.failures == 2
    assert sub.last_error == "RuntimeError: broken subscriber"


async def test_a_publishing_loop_overflows_instead_of_growing_forever() -> None:
    """A handler that republishes forever hits the bound and raises BusOverflow."""
    bus = EventBus(max_pending=50)

    async def echo(ev: Event) -> None:
        await bus.publish(Event(topic="again.x"))
        await bus.publish(Event(topic="again.x"))

    bus.subscribe("*", echo)
    with pytest.raises(BusOverflow, match="publishing in a loop"):
        await bus.publish(Event(topic="start.x"))
    # the bus is usable again afterwards
    bus.unsubscribe(bus.subscriptions[0])
    got: list[str] = []
    bus.subscribe("*", lambda ev: got.append(ev.topic))
    await bus.publish(Event(topic="fine.x"))
    assert got == ["fine.x"]


async def test_subscribing_after_a_topic_was_seen_still_receives_it() -> None:
    """The topic→subscribers cache is refreshed when subscriptions change."""
    bus = EventBus()
    first: list[str] = []
    late: list[str] = []
    sub = bus.subscribe("a.*", lambda ev: first.append(ev.topic))
    await bus.publish(Event(topic="a.b"))
    bus.subscribe("*", lambda ev: late.append(ev.topic))
    bus.unsubscribe(sub)
    await bus.publish(Event(topic="a.b"))
    assert first == ["a.b"] and late == ["a.b"]
