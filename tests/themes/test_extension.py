"""ThemesExtension on a real EventBus: heartbeats, interrupts, requests and prompts."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from loop.bus import EventBus
from loop.errors import ToolError
from loop.events import Event
from loop.themes.extension import ThemesExtension
from loop.themes.ops import Operations
from loop.themes.service import ThemeService
from loop.themes.tools import BUS
from loop.tools.base import ToolContext
from loop.tools.bus import ToolsOnBus

from .conftest import FaultyOps, snapshot, start_input


def _setup(root: Path) -> tuple[ThemesExtension, EventBus, list[Event]]:
    ctx = ToolContext(root=root.parent, workspace=root)
    ext = ThemesExtension(ctx)
    bus = EventBus()
    ToolsOnBus(ctx, BUS).attach(bus)
    ext.attach(bus)
    seen: list[Event] = []
    bus.subscribe("*", seen.append, name="capture")
    return ext, bus, seen


class Hat:
    """A hat that previews, starts at once, and ends the theme on a later iteration."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self.started: dict[str, object] | None = None
        bus.subscribe("theme.previewed", self.on_preview, name="hat")
        bus.subscribe("theme.started", self.on_started, name="hat")

    async def on_preview(self, event: Event) -> None:
        assert event.target == "worker"
        await self.bus.publish(
            Event(
                "theme.start",
                {
                    "targetFilename": event.payload["filename"],
                    "themeName": "Study the bus",
                    "themeDirectoryPart": "study_bus",
                    "reason": "next in themebox",
                },
                source="worker",
            )
        )

    def on_started(self, event: Event) -> None:
        self.started = event.payload

    async def end(self) -> None:
        assert self.started is not None
        payload = json.dumps(
            {
                "themeStartId": self.started["themeStartId"],
                "themeDirectoryPart": "study_bus",
                "themeName": "Study the bus",
                "reason": "done",
                "achievements": ["notes"],
            }
        )
        await self.bus.publish(Event("theme.end", payload, source="worker"))


async def test_hat_previews_starts_and_ends_across_heartbeats(root: Path) -> None:
    """Iteration 1 previews and starts; ending there hits the cooldown; iteration 2 ends."""
    ext, bus, seen = _setup(root)
    hat = Hat(bus)

    assert await ext.on_iteration_start(1, "worker") == []
    first_id = (root / "stats" / "current_heartbeat_id.txt").read_text().strip()
    await bus.publish(Event("theme.preview", "", source="worker"))
    assert hat.started is not None
    assert hat.started["themeStartId"] == first_id
    section = ext.prompt_section("worker")
    assert section is not None and "Study the bus" in section
    assert "Unprocessed feedback items: 0" in section

    await hat.end()  # same heartbeat: refused
    errors = [e for e in seen if e.topic == "theme.error"]
    assert errors[-1].payload["error"]["code"] == "cooldown"
    assert errors[-1].source == "themes" and errors[-1].payload["request"] == "theme.end"

    await ext.on_iteration_start(2, "worker")
    assert (root / "stats" / "current_heartbeat_id.txt").read_text().strip() > first_id
    await hat.end()
    ended = [e for e in seen if e.topic == "theme.ended"]
    assert len(ended) == 1 and ended[0].payload["themeStartId"] == first_id
    assert "No active theme" in (ext.prompt_section("worker") or "")
    topics = [e.topic for e in seen if e.source == "themes"]
    assert topics == ["theme.previewed", "theme.started", "theme.error", "theme.ended"]


async def test_interrupt_items_fire_once(root: Path) -> None:
    """An interrupt.* feedback item becomes one theme.interrupt event, then is processed."""
    ext, _, _ = _setup(root)
    fb = root / "feedbackbox"
    (fb / "interrupt.stop_now.md").write_text("stop and reflect\n")
    (fb / "a_normal.md").write_text("later\n")
    events = await ext.on_iteration_start(1, "worker")
    assert [(e.topic, e.source) for e in events] == [("theme.interrupt", "themes")]
    assert events[0].payload["name"] == "stop_now"
    assert events[0].payload["content"] == "stop and reflect\n"
    assert (fb / "processed.interrupt.stop_now.md").is_file()
    assert (fb / "a_normal.md").is_file()
    assert await ext.on_iteration_start(2, "worker") == []
    assert "Unprocessed feedback items: 1" in (ext.prompt_section("worker") or "")


async def test_own_results_and_bad_payloads(root: Path) -> None:
    """Requests from the extension itself are ignored; a bad payload is a theme.error."""
    _ext, bus, seen = _setup(root)
    await bus.publish(Event("theme.start", {"themeName": "x"}, source="themes"))
    assert [e.topic for e in seen] == ["theme.start"]
    await bus.publish(Event("theme.start", "{not json", source="worker"))
    await bus.publish(Event("theme.end", "[1, 2]", source="worker"))
    await bus.publish(Event("theme.start", {"themeName": "x"}, source="worker"))
    codes = [e.payload["error"]["code"] for e in seen if e.topic == "theme.error"]
    assert codes == ["invalid_payload", "invalid_payload", "invalid_input"]
    assert bus.stats.failures == 0


async def test_heartbeat_repairs_an_interrupted_start(root: Path) -> None:
    """The iteration-start heartbeat also undoes a start left half-done."""
    ext, _, _ = _setup(root)
    before = snapshot(root)
    with pytest.raises(ToolError, match="could not be removed"):
        ThemeService(root, FaultyOps("remove_intent")).start(start_input())
    assert (root / "artifacts" / "20250801120000_study_bus").is_dir()
    await ext.on_iteration_start(1, "worker")
    after = snapshot(root)
    assert not (root / "stats" / "start_theme.intent.json").exists()
    assert (root / "themebox" / "001_theme.md").is_file()
    assert "artifacts/20250801120000_study_bus" not in after
    # apart from the new heartbeat ID, every byte is as before the failed start
    after.pop("stats/current_heartbeat_id.txt")
    before.pop("stats/current_heartbeat_id.txt")
    assert after == before


class _StuckOps(Operations):
    """The rename of ``interrupt.b_stuck.md`` fails (a file system error) every time."""

    def mark_processed(self, src: Path, dst: Path) -> None:
        if src.name == "interrupt.b_stuck.md":
            raise OSError(errno.EIO, "injected: cannot rename")
        super().mark_processed(src, dst)


async def test_a_feedback_item_that_cannot_be_processed_never_stops_the_loop(root: Path) -> None:
    """An interrupt item whose rename fails: the heartbeat returns the interrupts before it
    and a theme.error saying why, every time, instead of raising."""
    ext, _, _ = _setup(root)
    ext.ctx.state["themes"] = _StuckOps()  # the operations every theme call uses
    fb = root / "feedbackbox"
    (fb / "interrupt.a_first.md").write_text("first\n")
    (fb / "interrupt.b_stuck.md").write_text("stuck\n")
    events = await ext.on_iteration_start(1, "worker")
    assert [e.topic for e in events] == ["theme.interrupt", "theme.error"]
    assert events[0].payload["name"] == "a_first"
    assert events[1].payload["request"] == "heartbeat"
    assert events[1].payload["error"]["code"] == "mark_processed_failed"
    again = await ext.on_iteration_start(2, "worker")
    assert [e.topic for e in again] == ["theme.error"]
    assert (fb / "interrupt.b_stuck.md").read_text() == "stuck\n"  # nothing lost


async def test_an_interrupt_item_with_a_reused_name_is_taken_and_the_older_one_kept(
    root: Path,
) -> None:
    """``processed.interrupt.x.md`` from an earlier item of the same name does not block
    the new one (it failed at every heartbeat): it becomes ``processed.interrupt.x.2.md``."""
    ext, _, _ = _setup(root)
    fb = root / "feedbackbox"
    (fb / "interrupt.x.md").write_text("new\n")
    (fb / "processed.interrupt.x.md").write_text("old\n")
    events = await ext.on_iteration_start(1, "worker")
    assert [(e.topic, e.payload["content"]) for e in events] == [("theme.interrupt", "new\n")]
    assert (fb / "processed.interrupt.x.md").read_text() == "old\n"
    assert (fb / "processed.interrupt.x.2.md").read_text() == "new\n"
    assert await ext.on_iteration_start(2, "worker") == []


@pytest.mark.parametrize("held", ["garbage", "99991231235959"])
async def test_a_heartbeat_file_the_next_id_cannot_follow_is_replaced_at_the_next_iteration(
    root: Path, held: str
) -> None:
    """A corrupt current heartbeat file (or the last ID there is) does not fail every
    heartbeat: the next iteration writes a new ID in its place, with a warning, and the
    tools work again."""
    ext, _, _ = _setup(root)
    heartbeat_file = root / "stats" / "current_heartbeat_id.txt"
    heartbeat_file.write_text(held + "\n")
    with capture_logs() as logs:
        assert await ext.on_iteration_start(1, "worker") == []
    new_id = heartbeat_file.read_text().strip()
    assert len(new_id) == 14 and new_id.isdigit() and new_id != held
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["file"], e["found"]) for e in warned] == [(str(heartbeat_file), held)]
    assert ThemeService(root).status().heartbeatId == new_id
    assert await ext.on_iteration_start(2, "worker") == []
    assert heartbeat_file.read_text().strip() > new_id
