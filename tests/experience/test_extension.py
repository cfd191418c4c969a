"""Hats call the experience tools through ``experience.*`` events (loop.tools.bus)."""

from __future__ import annotations

import json

from loop.bus import EventBus
from loop.events import Event
from loop.experience.tools import BUS
from loop.tools.base import ToolContext
from loop.tools.bus import ToolsOnBus
from tests.experience.helpers import SUMMARY, conversations


def _wire(ctx: ToolContext) -> tuple[EventBus, list[Event]]:
    bus = EventBus()
    ToolsOnBus(ctx, BUS).attach(bus)
    seen: list[Event] = []
    bus.subscribe("experience.*", seen.append, name="capture")
    return bus, seen


def _results(seen: list[Event]) -> list[Event]:
    return [e for e in seen if e.source == "experience"]


async def test_export_through_events(ctx: ToolContext) -> None:
    """init, conversations, thoughts and finalize requests answer status then exported."""
    bus, seen = _wire(ctx)
    await bus.publish(
        Event("experience.init", {"session_id": "ev1", "summary": SUMMARY}, source="planner")
    )
    await bus.publish(
        Event(
            "experience.conversations",
            json.dumps(
                {"session_id": "ev1", "batch_number": 1, "conversations_batch": conversations(2)}
            ),
            source="planner",
        )
    )
    await bus.publish(
        Event("experience.thoughts", {"session_id": "ev1", "thoughts": {"a": 1}}, source="planner")
    )
    await bus.publish(Event("experience.finalize", "ev1", source="planner"))
    results = _results(seen)
    assert [e.topic for e in results] == ["experience.status"] * 3 + ["experience.exported"]
    assert all(e.target == "planner" for e in results)
    assert results[0].payload["session_id"] == "ev1"  # the tool's output, as over MCP
    assert results[1].payload["processed_count"] == 2
    final = results[3].payload
    assert final["total_conversations"] == 2
    assert final["file_list"] == ["conversations_001.json", "manifest.json", "thoughts.json"]


async def test_status_list_and_validate_requests(ctx: ToolContext) -> None:
    """get_status, list and validate answer on experience.status."""
    bus, seen = _wire(ctx)
    await bus.publish(Event("experience.get_status", "nothing", source="builder"))
    await bus.publish(Event("experience.list", "", source="builder"))
    results = _results(seen)
    assert results[0].topic == "experience.status"
    assert results[0].payload["status"] == "not_found"
    assert results[1].payload["experience_directories"] == []


async def test_errors_are_published_not_raised(ctx: ToolContext) -> None:
    """A refused call, a bad payload and an unknown action publish experience.error."""
    bus, seen = _wire(ctx)
    await bus.publish(
        Event(
            "experience.conversations",
            {"session_id": "none", "batch_number": 1, "conversations_batch": []},
            source="hat",
        )
    )
    await bus.publish(Event("experience.thoughts", "{not json", source="hat"))
    await bus.publish(Event("experience.dance", {}, source="hat"))
    errors = _results(seen)
    assert [e.topic for e in errors] == ["experience.error"] * 3
    assert [e.payload["error"]["code"] for e in errors] == [
        "invalid_input",
        "invalid_payload",
        "unknown_request",
    ]
    assert errors[0].payload["request"] == "experience.conversations"
    assert errors[0].payload["tool"] == "export_experience_conversations"


async def test_thoughts_and_results_are_not_requests(ctx: ToolContext) -> None:
    """experience.thought and the extension's own result topics get no answer."""
    bus, seen = _wire(ctx)
    await bus.publish(Event("experience.thought", "an insight", source="hat"))
    await bus.publish(Event("experience.status", {"x": 1}, source="hat"))
    await bus.publish(Event("experience.error", {"x": 1}, source="hat"))
    await bus.publish(Event("experience.exported", {"x": 1}, source="hat"))
    assert _results(seen) == []
    assert bus.stats.failures == 0


async def test_the_loops_own_events_are_not_requests(ctx: ToolContext) -> None:
    """An experience.* event from the loop (its starting event) gets no answer; the
    tool's own name is a request's action too."""
    bus, seen = _wire(ctx)
    await bus.publish(Event("experience.get_export_status", {"session_id": "a"}, source="loop"))
    assert _results(seen) == []
    await bus.publish(Event("experience.get_export_status", {"session_id": "a"}, source="hat"))
    [answer] = _results(seen)
    assert (answer.topic, answer.target) == ("experience.status", "hat")
