"""The tasks on a real EventBus: requests in, results and progress out; prompt; blocker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loop.bus import EventBus
from loop.events import Event
from loop.tasks.extension import TasksExtension
from loop.tasks.tools import BUS
from loop.tools.base import ToolContext
from loop.tools.bus import ToolsOnBus


class Capture:
    """Collects the events the task subscriber publishes."""

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        bus.subscribe("task.*", self.events.append, name="capture")

    def results(self) -> list[tuple[str, Any]]:
        """(topic, payload) of every event published by the subscriber."""
        return [(e.topic, e.payload) for e in self.events if e.source == "tasks"]

    def last(self, topic: str) -> Any:
        """The payload of the last result with ``topic``."""
        return [p for t, p in self.results() if t == topic][-1]


@pytest.fixture(params=["memory", "file"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> ToolContext:
    """In-memory tasks or a tasks file."""
    file = tmp_path / "tasks.json" if request.param == "file" else None
    return ToolContext(root=tmp_path, tasks_file=file)


@pytest.fixture
def setup(ctx: ToolContext) -> tuple[EventBus, TasksExtension, Capture]:
    """A bus with the extension attached and a capturing subscriber."""
    bus = EventBus()
    ToolsOnBus(ctx, BUS).attach(bus)
    ext = TasksExtension(ctx)
    ext.attach(bus)
    return bus, ext, Capture(bus)


async def ask(bus: EventBus, action: str, payload: Any, source: str = "builder") -> None:
    """Publish a request as a hat would."""
    await bus.publish(Event(topic=f"task.{action}", payload=payload, source=source))


async def test_create_start_complete_through_events(
    setup: tuple[EventBus, TasksExtension, Capture],
) -> None:
    """Requests are applied; results and progress are published by source 'tasks'."""
    bus, _, cap = setup
    await ask(bus, "create", {"name": "Root"})
    rid = cap.last("task.created")["task"]["id"]
    await ask(bus, "create", {"name": "A", "parent_id": rid})
    aid = cap.last("task.created")["task"]["id"]
    assert [t for t, _ in cap.results()] == ["task.created", "task.progress"] * 2
    await ask(bus, "start", {"id": rid})
    assert cap.last("task.started")["subtask"]["id"] == aid
    await ask(bus, "complete", {"id": aid, "resolution": "done"})
    done = cap.last("task.completed")
    assert [t["id"] for t in done["auto_completed_parents"]] == [rid]
    progress = cap.last("task.progress")
    assert (progress["total_tasks"], progress["completed_tasks"]) == (2, 2)
    assert "next_task_id" not in progress  # absent, not null, once no task is left


async def test_json_string_payload_and_bare_id(
    setup: tuple[EventBus, TasksExtension, Capture],
) -> None:
    """A payload may be JSON text (from an <event> tag); get/start/delete take a bare id."""
    bus, _, cap = setup
    await ask(bus, "create", '{"name": "Root"}')
    rid = cap.last("task.created")["task"]["id"]
    await ask(bus, "get", f"  {rid} ")
    assert cap.last("task.found")["task"]["id"] == rid
    await ask(bus, "list", "")
    assert len(cap.last("task.listed")["tasks"]) == 1
    await ask(bus, "update", {"id": rid, "name": "R2"})
    assert cap.last("task.updated")["task"]["name"] == "R2"
    await ask(bus, "delete", rid)
    assert cap.last("task.deleted")["id"] == rid


async def test_errors_are_published_with_the_request_topic(
    setup: tuple[EventBus, TasksExtension, Capture],
) -> None:
    """A refused request publishes task.error: the structured error plus the request."""
    bus, _, cap = setup
    await ask(bus, "complete", {"id": "nope"})
    err = cap.last("task.error")
    assert err["error"]["code"] == "resolution_required"
    assert err["request"] == "task.complete"
    await ask(bus, "start", {"id": "nope"})
    assert cap.last("task.error")["error"]["code"] == "task_not_found"
    await ask(bus, "complete", "not json")
    assert cap.last("task.error")["error"]["code"] == "invalid_payload"
    await ask(bus, "create", "{broken")
    assert cap.last("task.error")["error"]["code"] == "invalid_payload"
    assert "task.progress" not in [t for t, _ in cap.results()]


async def test_own_results_and_loop_events_are_ignored(
    setup: tuple[EventBus, TasksExtension, Capture],
) -> None:
    """Result topics and the loop's own events (a task.start starting event) do nothing."""
    bus, _, cap = setup
    await ask(bus, "created", {"name": "x"})
    await ask(bus, "progress", {})
    await ask(bus, "start", "Build the thing", source="loop")
    await ask(bus, "create", {"name": "x"}, source="tasks")
    # Only the four events published here went by: nothing was answered.
    assert [e.topic for e in cap.events] == [
        "task.created",
        "task.progress",
        "task.start",
        "task.create",
    ]


async def test_prompt_section_is_compact(
    setup: tuple[EventBus, TasksExtension, Capture],
) -> None:
    """No tasks: no section. Then: counts, the active path and the next task only."""
    bus, ext, cap = setup
    assert ext.prompt_section("builder") is None
    await ask(bus, "create", {"name": "Root"})
    rid = cap.last("task.created")["task"]["id"]
    for name in ("A", "B"):
        await ask(bus, "create", {"name": name, "parent_id": rid})
    await ask(bus, "create", {"name": "Deep", "parent_id": cap.last("task.created")["task"]["id"]})
    await ask(bus, "start", {"id": rid})
    section = ext.prompt_section("builder")
    assert section is not None
    assert "0/4 done" in section
    assert "Active: Root (" in section
    assert "> A (" in section
    assert "Next: A (" in section  # the in-progress leaf is the next unfinished one
    assert "Deep" not in section  # not the whole tree
    assert "task.complete" in section


async def test_completion_blocker_lists_open_tasks(ctx: ToolContext) -> None:
    """Open tasks block completion with a reason naming them; none (or off): no block."""
    bus = EventBus()
    ToolsOnBus(ctx, BUS).attach(bus)
    ext = TasksExtension(ctx)
    ext.attach(bus)
    cap = Capture(bus)
    assert ext.completion_blocker() is None
    await ask(bus, "create", {"name": "Root"})
    rid = cap.last("task.created")["task"]["id"]
    reason = ext.completion_blocker()
    assert reason is not None
    assert "'Root' (todo)" in reason
    assert TasksExtension(ctx, block_completion=False).completion_blocker() is None
    await ask(bus, "complete", {"id": rid, "resolution": "ok"})
    assert ext.completion_blocker() is None


def test_bad_tasks_file_blocks_completion_and_is_shown(tmp_path: Path) -> None:
    """An unreadable tasks file blocks completion and the prompt says so."""
    path = tmp_path / "tasks.json"
    path.write_text("{", encoding="utf-8")
    ext = TasksExtension(ToolContext(root=tmp_path, tasks_file=path))
    reason = ext.completion_blocker()
    assert reason is not None
    assert str(path) in reason
    section = ext.prompt_section("x")
    assert section is not None
    assert "cannot be read" in section


def test_prompt_section_and_blocker_agree_on_open_tasks(tmp_path: Path) -> None:
    """A task no execution order reaches (a done parent with an open subtask, as a
    hand-edited file may hold) is still open in the prompt, as it is for the gate."""
    path = tmp_path / "tasks.json"
    stamp = "2026-01-01T00:00:00Z"
    common = {"description": "", "createdAt": stamp, "updatedAt": stamp}
    path.write_text(
        json.dumps(
            [
                {"id": "p", "name": "Parent", "status": "done", "order": 1, **common},
                {
                    "id": "c",
                    "name": "Child",
                    "status": "in_progress",
                    "order": 1,
                    "parent_id": "p",
                    **common,
                },
            ]
        ),
        encoding="utf-8",
    )
    ext = TasksExtension(ToolContext(root=tmp_path, tasks_file=path))
    section = ext.prompt_section("x")
    assert section is not None and "No open tasks" not in section
    assert "Open: 'Child' (in_progress)" in section
    blocker = ext.completion_blocker()
    assert blocker is not None and "'Child' (in_progress)" in blocker
