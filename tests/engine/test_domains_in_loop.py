"""The tool domains inside real loop runs: hats drive tasks and themes through events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop.backends.python_hat import HatContext, PythonBackend
from loop.testing import make_config, run_hats, scripted, tag


def _last(ctx: HatContext, topic: str) -> Any:
    return next(e.payload for e in reversed(ctx.triggers) if e.topic == topic)


def task_worker(ctx: HatContext) -> str:
    """Works through the task list one task at a time, using only task.* events."""
    topics = [e.topic for e in ctx.triggers]
    if "task.completed" in topics:
        done = _last(ctx, "task.completed")
        if done.get("next_task_id"):  # absent once no task is left
            ctx.emit("task.start", {"id": done["next_task_id"]})
        else:
            ctx.emit("LOOP_COMPLETE", "all tasks done")
    elif "task.started" in topics:
        started = _last(ctx, "task.started")
        work_on = started.get("subtask") or started["task"]
        ctx.emit("task.complete", {"id": work_on["id"], "resolution": f"did {work_on['name']}"})
    elif "task.listed" in topics:
        first = next(t for t in _last(ctx, "task.listed")["tasks"] if t["status"] == "todo")
        ctx.emit("task.start", {"id": first["id"]})
    else:
        ctx.emit("task.list", {})
        ctx.emit("LOOP_COMPLETE", "too early: tasks are open")  # refused by the blocker
    return "worked"


async def test_hats_create_start_and_complete_tasks_until_all_are_done(tmp_path: Path) -> None:
    """A loop in which hats create, start and complete tasks through events ends all done."""
    cfg = make_config(
        {
            "planner": {"triggers": ["task.start"], "publishes": ["plan.ready"]},
            "worker": {
                "triggers": [
                    "plan.ready",
                    "task.listed",
                    "task.started",
                    "task.completed",
                    "loop.completion_rejected",
                ],
                "publishes": ["LOOP_COMPLETE"],
            },
        },
        folder=tmp_path,
        extensions=True,
        max_iterations=30,
    )
    planner = scripted(
        tag("task.create", {"name": "write code"})
        + tag("task.create", {"name": "write tests"})
        + tag("plan.ready", "two tasks")
    )
    worker = PythonBackend(f"{__name__}:task_worker")
    summary, cap = await run_hats(cfg, {"planner": planner, "worker": worker}, workdir=tmp_path)
    assert summary.reason == "completed", summary
    tasks = json.loads((tmp_path / ".loop/tasks.json").read_text())
    assert sorted(t["name"] for t in tasks) == ["write code", "write tests"]
    assert all(t["status"] == "done" for t in tasks)
    assert [t["resolution"] for t in sorted(tasks, key=lambda t: t["order"])] == [
        "did write code",
        "did write tests",
    ]
    rejected = [e for e in cap.events if e.topic == "loop.completion_rejected"]
    assert rejected and "open" in rejected[0].payload
    progress = [e for e in cap.events if e.topic == "task.progress"]
    assert progress[-1].payload["completed_tasks"] == 2


def themer(ctx: HatContext) -> str:
    """Previews, starts, then (at a later heartbeat) ends a theme through theme.* events."""
    topics = [e.topic for e in ctx.triggers]
    if "theme.ended" in topics:
        ctx.emit("LOOP_COMPLETE", "theme done")
    elif "theme.started" in topics:
        started = _last(ctx, "theme.started")
        ctx.emit(
            "theme.end",
            {
                "themeStartId": started["themeStartId"],
                "themeDirectoryPart": started["themeDirectoryPart"],
                "themeName": "Bus study",
                "reason": "finished",
                "achievements": ["notes written"],
            },
        )
    elif "theme.previewed" in topics:
        preview = _last(ctx, "theme.previewed")
        ctx.emit(
            "theme.start",
            {
                "targetFilename": preview["filename"],
                "themeName": "Bus study",
                "themeDirectoryPart": "bus_study",
                "reason": "next in box",
                "activityContent": ["read the bus"],
            },
        )
    else:
        ctx.emit("theme.preview", {})
    return "ok"


async def test_a_hat_previews_starts_and_ends_a_theme_across_heartbeats(tmp_path: Path) -> None:
    """Each iteration is a heartbeat; the theme starts and ends at different heartbeats."""
    box = tmp_path / ".loop/works/themebox"
    box.mkdir(parents=True)
    (box / "bus_study.md").write_text("# Study the bus\n")
    cfg = make_config(
        {"themer": {"triggers": ["task.start", "theme.*"], "publishes": ["LOOP_COMPLETE"]}},
        folder=tmp_path,
        extensions=True,
    )
    summary, cap = await run_hats(
        cfg, {"themer": PythonBackend(f"{__name__}:themer")}, workdir=tmp_path
    )
    assert summary.reason == "completed" and summary.iterations == 4, cap.topics()
    assert [t for t in cap.topics() if t.startswith("theme.")] == [
        "theme.preview",
        "theme.previewed",
        "theme.start",
        "theme.started",
        "theme.end",
        "theme.ended",
    ]
    works = tmp_path / ".loop/works"
    assert (box / "processed.bus_study.md").exists() and not (box / "bus_study.md").exists()
    histories = sorted(p.name for p in (works / "artifacts/theme_histories").iterdir())
    assert len(histories) == 2 and histories[0] != histories[1]
    assert any("bus_study" in p.name for p in (works / "artifacts").iterdir())


async def test_an_interrupt_feedback_item_wakes_a_hat_at_the_next_iteration(tmp_path: Path) -> None:
    """feedbackbox/interrupt.*.md becomes a theme.interrupt event routed to its hat."""
    fb = tmp_path / ".loop/works/feedbackbox"
    fb.mkdir(parents=True)
    (fb / "interrupt.stop_now.md").write_text("please stop and summarise")
    cfg = make_config(
        {
            "main": {"triggers": ["task.start"]},
            "listener": {"triggers": ["theme.interrupt"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
        extensions=True,
    )
    backends = {
        "main": scripted('<event topic="experience.thought">busy</event>'),
        "listener": scripted(tag("LOOP_COMPLETE", "stopped")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path)
    assert summary.reason == "completed"
    interrupts = [e for e in cap.events if e.topic == "theme.interrupt"]
    assert len(interrupts) == 1
    assert interrupts[0].payload["content"] == "please stop and summarise"
