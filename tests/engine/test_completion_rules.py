"""Completion rules in real runs: required events, cancellation, strict publishes,
guardrails, and a completion gate that judges the state after the iteration's events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from loop.backends.python_hat import HatContext, PythonBackend
from loop.engine.journal import read_journal
from loop.engine.state import RouteContext, fold
from loop.records import IterationEnd, SessionStart
from loop.testing import make_config, run_hats, scripted, tag


def ends(tmp_path: Path, session_id: str) -> list[IterationEnd]:
    records = read_journal(tmp_path / f".loop/sessions/{session_id}/journal.jsonl").records
    return [r for r in records if isinstance(r, IterationEnd)]


def debug_config(tmp_path: Path, **loop: Any) -> Any:
    """A debug-style topology: the investigator may complete, after the whole chain."""
    return make_config(
        {
            "investigator": {
                "triggers": ["debug.start", "hypothesis.confirmed", "fix.verified"],
                "publishes": ["hypothesis.test", "fix.propose", "DEBUG_COMPLETE"],
            },
            "tester": {"triggers": ["hypothesis.test"], "publishes": ["hypothesis.confirmed"]},
            "fixer": {"triggers": ["fix.propose"], "publishes": ["fix.applied"]},
            "verifier": {"triggers": ["fix.applied"], "publishes": ["fix.verified"]},
        },
        folder=tmp_path,
        starting_event="debug.start",
        completion_event="DEBUG_COMPLETE",
        required_events=["hypothesis.test", "hypothesis.confirmed", "fix.applied", "fix.verified"],
        **loop,
    )


def investigator(ctx: HatContext) -> str:
    """Claims success at once; then walks the chain and completes when told what is missing."""
    topics = [e.topic for e in ctx.triggers]
    if "debug.start" in topics:
        ctx.emit("DEBUG_COMPLETE", "it works on my machine")
    elif "loop.completion_rejected" in topics and ctx.activation == 1:
        ctx.emit("hypothesis.test", "the cache is stale")
    elif "hypothesis.confirmed" in topics:
        ctx.emit("fix.propose", "clear the cache")
    else:
        ctx.emit("DEBUG_COMPLETE", "fixed and verified")
    return "investigated"


async def test_required_events_refuse_an_early_completion_and_name_what_is_missing(
    tmp_path: Path,
) -> None:
    """DEBUG_COMPLETE at iteration 1 is refused, listing the required events; later accepted."""
    cfg = debug_config(tmp_path)
    cfg.hats["investigator"] = cfg.hats["investigator"].model_copy(
        update={"triggers": [*cfg.hats["investigator"].triggers, "loop.completion_rejected"]}
    )
    backends = {
        "investigator": PythonBackend(f"{__name__}:investigator"),
        "tester": scripted(tag("hypothesis.confirmed", "yes")),
        "fixer": scripted(tag("fix.applied", "done")),
        "verifier": scripted(tag("fix.verified", "green")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path, session_id="dbg")
    assert summary.reason == "completed", summary
    rejected = [e for e in cap.events if e.topic == "loop.completion_rejected"]
    assert len(rejected) == 1 and rejected[0].target == "investigator"
    assert rejected[0].payload == (
        "DEBUG_COMPLETE refused: required events not published yet: hypothesis.test, "
        "hypothesis.confirmed, fix.applied, fix.verified"
    )
    records = ends(tmp_path, "dbg")
    assert not records[0].completed and records[-1].completed
    assert [r.hat for r in records] == [
        "investigator",
        "investigator",
        "tester",
        "investigator",
        "fixer",
        "verifier",
        "investigator",
    ]
    assert "accepted only once each of these events" in records[0].prompt


async def test_a_task_completed_and_the_loop_completed_in_one_iteration_is_accepted(
    tmp_path: Path,
) -> None:
    """The open-tasks gate judges the state after the iteration's own task events."""
    cfg = make_config(
        {"worker": {"triggers": ["task.start", "task.created"], "publishes": ["LOOP_COMPLETE"]}},
        folder=tmp_path,
        extensions=True,
    )
    worker = PythonBackend(f"{__name__}:finisher")
    summary, cap = await run_hats(cfg, {"worker": worker}, workdir=tmp_path, session_id="t")
    assert summary.reason == "completed", summary
    assert summary.iterations == 2
    assert not [e for e in cap.events if e.topic == "loop.completion_rejected"]
    last = ends(tmp_path, "t")[-1]
    assert [e.topic for e in last.events] == ["task.start", "task.complete", "LOOP_COMPLETE"]
    assert last.completed


def finisher(ctx: HatContext) -> str:
    """Creates a task; then starts it, completes it and the loop in one iteration."""
    created = [e.payload for e in ctx.triggers if e.topic == "task.created"]
    if not created:
        ctx.emit("task.create", {"name": "the only task"})
        return "created"
    task_id = created[-1]["task"]["id"]
    ctx.emit("task.start", {"id": task_id})
    ctx.emit("task.complete", {"id": task_id, "resolution": "done"})
    ctx.emit("LOOP_COMPLETE", "all done")
    return "finished"


async def test_the_cancellation_event_ends_the_run_at_once(tmp_path: Path) -> None:
    """Reason cancelled, exit 0, the iteration journaled as cancelling; no resume."""
    cfg = make_config(
        {
            "a": {"triggers": ["task.start", "b.done"], "publishes": ["a.done", "loop.cancel"]},
            "b": {"triggers": ["a.done"], "publishes": ["b.done"]},
        },
        folder=tmp_path,
        cancellation_event="loop.cancel",
    )
    backends = {
        "a": scripted(tag("a.done"), tag("loop.cancel", "nothing left worth doing")),
        "b": scripted(tag("b.done")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path, session_id="c")
    assert (summary.reason, summary.exit_code, summary.iterations) == ("cancelled", 0, 3)
    assert "loop.cancel" in cap.topics(include_loop=True)
    assert ends(tmp_path, "c")[-1].cancelled


async def test_the_cancellation_event_is_not_an_unrouted_event(tmp_path: Path) -> None:
    """No hat is triggered by LOOP_CANCELLED (none may be): as the completion event, it
    is not reported as unrouted, in the log nor in the state folded from the journal."""
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "publishes": ["LOOP_CANCELLED"]}},
        folder=tmp_path,
        cancellation_event="LOOP_CANCELLED",
    )
    with capture_logs() as logs:
        summary, _ = await run_hats(
            cfg, {"a": scripted(tag("LOOP_CANCELLED", "stop"))}, workdir=tmp_path, session_id="u"
        )
    assert (summary.reason, summary.unrouted_topic) == ("cancelled", None)
    assert not [log for log in logs if "unrouted" in log["event"]], logs
    records = read_journal(tmp_path / ".loop/sessions/u/journal.jsonl").records
    start = records[0]
    assert isinstance(start, SessionStart)
    assert fold(records, RouteContext.from_start(start)).unrouted is None


async def test_strict_publishes_drops_and_journals_out_of_scope_events(tmp_path: Path) -> None:
    """A builder cannot skip the review: its review.passed is dropped, journaled as such."""
    cfg = make_config(
        {
            "builder": {"triggers": ["task.start"], "publishes": ["build.done"]},
            "reviewer": {
                "triggers": ["build.done", "review.passed"],
                "publishes": ["review.passed", "LOOP_COMPLETE"],
            },
        },
        folder=tmp_path,
        strict_publishes=True,
    )
    backends = {
        "builder": scripted(tag("build.done") + tag("review.passed", "trust me")),
        "reviewer": scripted(tag("LOOP_COMPLETE")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path, session_id="s")
    assert summary.reason == "completed" and summary.iterations == 2
    assert "review.passed" not in cap.topics()
    first = ends(tmp_path, "s")[0]
    assert [e.topic for e in first.dropped] == ["review.passed"]
    assert [e.topic for e in first.events] == ["build.done", "review.passed"]
    assert first.notes[0].startswith("review.passed dropped")


async def test_guardrails_reach_every_prompt(tmp_path: Path) -> None:
    """Each hat's prompt carries the guardrails as a list."""
    cfg = make_config(
        {
            "a": {"triggers": ["task.start"], "publishes": ["a.done"]},
            "b": {"triggers": ["a.done"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
        guardrails=["Never push to main", "Run the tests before build.done"],
    )
    backends = {"a": scripted(tag("a.done")), "b": scripted(tag("LOOP_COMPLETE"))}
    await run_hats(cfg, backends, workdir=tmp_path, session_id="g")
    for record in ends(tmp_path, "g"):
        assert "## Guardrails\n\n- Never push to main\n- Run the tests before build.done\n" in (
            record.prompt
        )
