"""The tool domains inside real loop runs: hats drive tasks and themes through events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from loop.backends.python_hat import HatContext, PythonBackend
from loop.config import load_config
from loop.runner import domain_extensions, tool_context
from loop.testing import make_config, run_hats, scripted, tag
from loop.tools.bus import TurnedOff


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


def _prompts(tmp_path: Path, session_id: str) -> list[str]:
    journal = tmp_path / f".loop/sessions/{session_id}/journal.jsonl"
    lines = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    return [r["prompt"] for r in lines if r["kind"] == "iteration.end"]


async def test_a_domain_neither_configured_nor_used_adds_nothing(tmp_path: Path) -> None:
    """No [themes] section and no theme used: no Themes section in any prompt, and no
    .loop/works; a [themes] section turns it on from the first iteration."""
    hats = {"a": {"triggers": ["task.start"], "publishes": ["LOOP_COMPLETE"]}}
    bare = make_config(hats, folder=tmp_path / "bare", extensions=True)
    assert bare.themes.enabled is None and bare.tasks.enabled is None
    summary, _ = await run_hats(
        bare, {"a": scripted(tag("LOOP_COMPLETE"))}, workdir=tmp_path / "bare", session_id="s"
    )
    assert summary.reason == "completed"
    assert not (tmp_path / "bare/.loop/works").exists()
    assert not (tmp_path / "bare/.loop/tasks.json").exists()
    assert all("## Themes" not in p for p in _prompts(tmp_path / "bare", "s"))

    folder = tmp_path / "configured"
    folder.mkdir()
    (folder / "loop.toml").write_text(
        '[loop]\nprompt = "p"\n[themes]\nworkspace = ".loop/works"\n'
        '[hats.a]\ntriggers = ["task.start"]\npublishes = ["LOOP_COMPLETE"]\n',
        encoding="utf-8",
    )
    configured = load_config(folder / "loop.toml", root=folder)
    assert configured.themes.enabled is True and configured.tasks.enabled is None
    await run_hats(
        configured, {"a": scripted(tag("LOOP_COMPLETE"))}, workdir=folder, session_id="s"
    )
    assert (folder / ".loop/works/stats").is_dir()
    assert "## Themes" in _prompts(folder, "s")[0]


async def test_a_domain_is_on_once_used(tmp_path: Path) -> None:
    """Unconfigured themes wake up when a hat sends a theme request, or when the
    workspace already exists (a theme tool made it); `enabled = false` stays off."""
    hats = {
        "a": {
            "triggers": ["task.start", "theme.previewed"],
            "publishes": ["theme.preview", "LOOP_COMPLETE"],
        }
    }
    cfg = make_config(hats, folder=tmp_path / "request", extensions=True)
    agent = scripted(tag("theme.preview", {}), tag("LOOP_COMPLETE"))
    await run_hats(cfg, {"a": agent}, workdir=tmp_path / "request", session_id="s")
    prompts = _prompts(tmp_path / "request", "s")
    assert "## Themes" not in prompts[0] and "## Themes" in prompts[1]
    assert (tmp_path / "request/.loop/works/stats").is_dir()

    existing = tmp_path / "existing"
    (existing / ".loop/works").mkdir(parents=True)
    cfg = make_config(hats, folder=existing, extensions=True)
    await run_hats(cfg, {"a": scripted(tag("LOOP_COMPLETE"))}, workdir=existing, session_id="s")
    assert "## Themes" in _prompts(existing, "s")[0]

    off = make_config(hats, folder=tmp_path / "off")  # enabled = false for every domain
    assert off.themes.enabled is False
    again = scripted(tag("theme.preview", {}), tag("LOOP_COMPLETE"))
    await run_hats(off, {"a": again}, workdir=tmp_path / "off", session_id="s")
    assert not (tmp_path / "off/.loop/works").exists()


def test_themes_are_on_when_the_agents_are_handed_hatloops_tools(tmp_path: Path) -> None:
    """An agent with hatloop's tools may call a theme tool at any iteration (which needs
    the heartbeat): themes are on for it, decided at load time so a replay agrees."""
    hats = {"a": {"triggers": ["task.start"], "publishes": ["LOOP_COMPLETE"]}}
    for keys, enabled in (
        ({"backend": {"type": "claude"}}, True),
        ({"backend": {"type": "claude", "mcp": False}}, None),
        ({"backend": {"type": "command", "command": ["true"]}}, None),
    ):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        cfg = make_config({"a": {**hats["a"], **keys}}, folder=folder, extensions=True)
        assert cfg.themes.enabled is enabled, keys
        assert cfg.snapshot()["themes"]["enabled"] is enabled


async def test_a_run_that_a_limit_ends_after_a_refused_completion_says_why(tmp_path: Path) -> None:
    """The hat asks to complete while a task is open: the loop goes on until a limit, and
    the summary says why it did not complete (the log alone said so before)."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "loop.completion_rejected"]}},
        folder=tmp_path,
        extensions=True,
        max_iterations=2,
    )
    agent = scripted(
        tag("task.create", {"name": "left open"}) + tag("LOOP_COMPLETE"), tag("LOOP_COMPLETE")
    )
    summary, _ = await run_hats(cfg, {"a": agent}, workdir=tmp_path)
    assert summary.reason == "max_iterations", summary
    assert [n for n in summary.notes if n.startswith("LOOP_COMPLETE refused: ")] == [
        "LOOP_COMPLETE refused: 1 task(s) still open: 'left open' (todo). Complete them "
        "(task.complete) or delete them (task.delete) before completing the loop."
    ]


async def test_a_request_to_a_domain_turned_off_gets_an_error_answer(tmp_path: Path) -> None:
    """`[tasks] enabled = false`: a hat's task.create is answered with task.error, code
    domain_off, from `tasks` to every subscriber (as the tasks' answers go), and a
    warning; nothing is written. A theme request's error goes back to its hat, which runs
    on it; an experience.thought is data, not a request: no answer. Before, each request
    was dropped without a word."""
    hats = {
        "a": {
            "triggers": ["task.start", "theme.error"],
            "publishes": ["LOOP_COMPLETE"],
        }
    }
    cfg = make_config(hats, folder=tmp_path)  # every domain turned off
    assert cfg.tasks.enabled is False and cfg.themes.enabled is False
    agent = scripted(
        tag("task.create", {"name": "x"})
        + tag("experience.thought", {"t": 1})
        + tag("theme.preview", {}),
        tag("LOOP_COMPLETE"),
    )
    with capture_logs() as logs:
        summary, cap = await run_hats(cfg, {"a": agent}, workdir=tmp_path, session_id="s")
    assert summary.reason == "completed" and summary.iterations == 2  # the theme error ran a
    errors = [e for e in cap.events if e.topic.endswith(".error")]
    assert [(e.topic, e.source, e.target) for e in errors] == [
        ("task.error", "tasks", None),
        ("theme.error", "themes", "a"),
    ]
    assert errors[0].payload == {
        "request": "task.create",
        "tool": None,
        "error": {
            "code": "domain_off",
            "message": "task.create: the tasks domain is off ([tasks] enabled = false in "
            "loop.toml); nothing was done",
        },
    }
    refused = [e["request"] for e in logs if e["event"] == "bus request refused"]
    assert refused == ["task.create", "theme.preview"]
    assert not (tmp_path / ".loop/tasks.json").exists()
    assert not (tmp_path / ".loop/works").exists()


def test_a_domain_turned_off_answers_for_the_domain_it_names(tmp_path: Path) -> None:
    """Each domain turned off listens to its own prefix, and answers from the service it
    imports on the first request (the domain's own)."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    exts = domain_extensions(cfg, tool_context(cfg, tmp_path))
    off = [e for e in exts if isinstance(e, TurnedOff)]
    assert [e.prefix for e in off] == ["task", "theme", "experience"]
    assert all(e.service().prefix == e.prefix for e in off)
    assert [e.service().source for e in off] == ["tasks", "themes", "experience"]


def test_the_domains_turned_off_are_those_loop_toml_sets_enabled_false(tmp_path: Path) -> None:
    """Only ``enabled = false`` turns a domain off (not a section left out)."""
    from loop.config import load_config
    from loop.runner import domains_off

    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[experience]\nenabled = false\n'
        '[hats.a]\ntriggers = ["task.start"]\n'
    )
    assert domains_off(load_config(tmp_path / "loop.toml", root=tmp_path)) == [
        "tasks",
        "experience",
    ]
