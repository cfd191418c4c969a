"""Tool calls in a session's context: journaled where the engine reads them, ids derived."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from loop.engine.session_dir import SessionLock
from loop.errors import ToolError
from loop.tasks.tools import TOOLS as TASK_TOOLS
from loop.tools.base import ToolContext
from loop.tools.calls import (
    Call,
    FileCalls,
    IterationCalls,
    collecting,
    in_process,
    merge_calls,
)
from loop.tools.registry import get_tool

TASKS = {t.name: t for t in TASK_TOOLS}


def lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of an events file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def context(tmp_path: Path, *, session: str = "s1", iteration: int = 3) -> ToolContext:
    """A tool context whose calls are journaled in iteration ``iteration``'s events file."""
    events = tmp_path / "it" / "events.jsonl"
    events.parent.mkdir(parents=True, exist_ok=True)
    return ToolContext(
        root=tmp_path,
        tasks_file=tmp_path / "tasks.json",
        events_file=events,
        calls=FileCalls(session, iteration, events, "cli"),
    )


def test_a_call_in_an_iteration_is_journaled_in_its_events_file(tmp_path: Path) -> None:
    """Input, result, channel and clock go to the events file as a ``tool.call`` line."""
    ctx = context(tmp_path)
    out = TASKS["createTask"].run(ctx, {"name": "write docs"})
    [line] = lines(ctx.events_file)  # type: ignore[arg-type]
    assert line["kind"] == "tool.call"
    call = line["call"]
    assert (call["tool"], call["channel"], call["input"]) == (
        "createTask",
        "cli",
        {"name": "write docs"},
    )
    assert call["result"] == out.model_dump(mode="json", by_alias=True)
    assert call["error"] is None
    assert isinstance(call["ts"], float) and isinstance(call["utc_offset"], int)


def test_a_failed_call_is_journaled_with_its_structured_error(tmp_path: Path) -> None:
    """The caller still gets the error; the journal has it too (code, message, details)."""
    ctx = context(tmp_path)
    with pytest.raises(ToolError) as caught:
        TASKS["startTask"].run(ctx, {"id": "nope"})
    [line] = lines(ctx.events_file)  # type: ignore[arg-type]
    assert line["call"]["result"] is None
    assert line["call"]["error"]["code"] == caught.value.code == "task_not_found"
    with pytest.raises(ToolError):
        TASKS["createTask"].run(ctx, {"name": 5})  # bad input is a call that was made too
    assert lines(ctx.events_file)[1]["call"]["error"]["code"] == "invalid_input"  # type: ignore[arg-type]


def test_ids_are_derived_from_the_session_iteration_and_call(tmp_path: Path) -> None:
    """The same call of the same iteration mints the same id in another folder (a replay);
    another call, iteration or session mints another; each is a UUID (the seed's form)."""

    def created(folder: Path, session: str, iteration: int, names: list[str]) -> list[str]:
        ctx = context(folder, session=session, iteration=iteration)
        return [TASKS["createTask"].run(ctx, {"name": n}).model_dump()["task"]["id"] for n in names]

    first = created(tmp_path / "a", "s1", 3, ["x", "y"])
    assert created(tmp_path / "b", "s1", 3, ["x", "y"]) == first
    assert created(tmp_path / "c", "s1", 4, ["x", "y"])[0] not in first
    assert created(tmp_path / "d", "s2", 3, ["x", "y"])[0] not in first
    assert first[0] != first[1]
    assert all(uuid.UUID(i).version == 5 for i in first)


def test_outside_a_session_ids_are_random_and_nothing_is_journaled(tmp_path: Path) -> None:
    """No iteration context: a uuid4, and no events file is written."""
    ctx = ToolContext(root=tmp_path, tasks_file=tmp_path / "tasks.json")
    task = TASKS["createTask"].run(ctx, {"name": "x"}).model_dump()["task"]
    assert uuid.UUID(task["id"]).version == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.json", "tasks.json.lock"]


def test_a_repeated_create_in_a_rerun_finds_its_own_task(tmp_path: Path) -> None:
    """The re-run of an interrupted iteration (a fresh events file, the same calls) mints
    the same id; the same create answers with the task it made, made again at the
    re-run's time (as a replay makes it); a different create at that place gets the next
    candidate id."""
    events = tmp_path / "it" / "events.jsonl"
    events.parent.mkdir()

    def at(ts: float) -> ToolContext:
        calls = FileCalls("s1", 3, events, "cli", clock=lambda: (ts, 0))
        return ToolContext(root=tmp_path, tasks_file=tmp_path / "tasks.json", calls=calls)

    first = TASKS["createTask"].run(at(1_800_000_000), {"name": "x", "description": "d"})
    events.unlink()  # the re-run's own events file
    again = TASKS["createTask"].run(at(1_800_000_060), {"name": "x", "description": "d"})
    want = first.model_dump(mode="json", by_alias=True)
    want["task"]["createdAt"] = want["task"]["updatedAt"] = "2027-01-15T08:01:00Z"
    assert again.model_dump(mode="json", by_alias=True) == want
    events.unlink()
    other = TASKS["createTask"].run(at(1_800_000_060), {"name": "other"}).model_dump()
    assert other["task"]["id"] != want["task"]["id"]
    stored = json.loads((tmp_path / "tasks.json").read_text())
    assert [(t["name"], t["createdAt"]) for t in stored] == [
        ("x", "2027-01-15T08:01:00Z"),
        ("other", "2027-01-15T08:01:00Z"),
    ]


def test_a_repeated_create_keeps_a_task_the_interrupted_attempt_changed(tmp_path: Path) -> None:
    """The interrupted attempt created the task and went on to start it: the re-run's
    create answers with that task as it is (its side effects stay: at-least-once)."""
    ctx = context(tmp_path)
    created = TASKS["createTask"].run(ctx, {"name": "x"}).model_dump(mode="json", by_alias=True)
    TASKS["startTask"].run(ctx, {"id": created["task"]["id"]})
    ctx.events_file.unlink()  # type: ignore[union-attr]
    again = TASKS["createTask"].run(ctx, {"name": "x"}).model_dump(mode="json", by_alias=True)
    assert again["task"]["id"] == created["task"]["id"]
    assert again["task"]["status"] == "in_progress"


def test_the_call_clock_is_the_tools_now(tmp_path: Path) -> None:
    """A journal given a clock (as a replay gives the recorded time) is the task's time,
    in UTC, whatever the caller's offset."""
    events = tmp_path / "events.jsonl"
    ctx = ToolContext(
        root=tmp_path,
        tasks_file=tmp_path / "tasks.json",
        calls=FileCalls("s", 1, events, "mcp", clock=lambda: (1_800_000_000.25, 3600)),
    )
    task = TASKS["createTask"].run(ctx, {"name": "x"}).model_dump(mode="json", by_alias=True)
    assert task["task"]["createdAt"] == "2027-01-15T08:00:00.250000Z"
    assert lines(events)[0]["call"]["utc_offset"] == 3600


def test_a_call_that_cannot_be_journaled_is_refused(tmp_path: Path) -> None:
    """The iteration's folder is gone (an agent outliving its iteration): the call is not
    made, and says why."""
    events = tmp_path / "gone" / "events.jsonl"
    ctx = ToolContext(
        root=tmp_path,
        tasks_file=tmp_path / "tasks.json",
        calls=FileCalls("s", 1, events, "cli"),
    )
    with pytest.raises(ToolError) as caught:
        TASKS["createTask"].run(ctx, {"name": "x"})
    assert caught.value.code == "not_journaled"
    assert "was not run" in caught.value.message
    assert not (tmp_path / "tasks.json").exists()


def test_a_call_is_made_only_while_the_run_that_started_the_agent_holds_the_session(
    tmp_path: Path,
) -> None:
    """An agent that outlived its loop (``kill -9``) changes nothing: while its run holds
    the session's lock its calls are made; another run holding it, or none, refuses them."""
    session = tmp_path / "session"
    session.mkdir()
    events = tmp_path / "it" / "events.jsonl"
    events.parent.mkdir()

    def call(run: str) -> Any:
        ctx = ToolContext(
            root=tmp_path,
            tasks_file=tmp_path / "tasks.json",
            calls=FileCalls("s", 1, events, "cli", run=(session, run)),
        )
        return TASKS["createTask"].run(ctx, {"name": run})

    lock = SessionLock(session / "lock", run_id="run-a")
    lock.acquire()
    try:
        assert call("run-a").task.name == "run-a"
        with pytest.raises(ToolError) as other:
            call("run-b")  # a resumed run holds the session now, not this agent's
        assert other.value.code == "run_stopped"
    finally:
        lock.release()
    with pytest.raises(ToolError) as gone:
        call("run-a")  # the run is gone: nobody holds the session
    assert gone.value.code == "run_stopped"
    assert [t["name"] for t in json.loads((tmp_path / "tasks.json").read_text())] == ["run-a"]
    assert len(lines(events)) == 1


def test_the_sessions_own_tools_are_not_journaled(tmp_path: Path) -> None:
    """emit_event's event is the iteration's (one events line, no tool.call line)."""
    ctx = context(tmp_path)
    get_tool("emit_event").run(ctx, {"topic": "work.done"})
    assert [line.get("kind") for line in lines(ctx.events_file)] == [None]  # type: ignore[arg-type]


def test_the_environment_names_the_iteration() -> None:
    """LOOP_SESSION_ID, LOOP_ITERATION and LOOP_EVENTS_FILE together; any missing: none."""
    env = {"LOOP_SESSION_ID": "s", "LOOP_ITERATION": "7", "LOOP_EVENTS_FILE": "/x/events.jsonl"}
    calls = FileCalls.from_env(env, "mcp")
    assert calls == FileCalls("s", 7, Path("/x/events.jsonl"), "mcp")
    for key in env:
        assert FileCalls.from_env({k: v for k, v in env.items() if k != key}, "cli") is None
    assert FileCalls.from_env({**env, "LOOP_ITERATION": "x"}, "cli") is None
    run = {"LOOP_SESSION_DIR": "/s", "LOOP_RUN_ID": "r1"}
    assert FileCalls.from_env({**env, **run}, "cli") == FileCalls(
        "s", 7, Path("/x/events.jsonl"), "cli", run=(Path("/s"), "r1"), session_dir=Path("/s")
    )


def test_concurrent_processes_are_numbered_in_the_order_they_ran(tmp_path: Path) -> None:
    """Real CLI processes of one iteration, at once: every call journaled once, and each
    minted a distinct id (the events file's lock numbers them)."""
    events = tmp_path / "events.jsonl"
    env = {
        "LOOP_SESSION_ID": "s",
        "LOOP_ITERATION": "1",
        "LOOP_EVENTS_FILE": str(events),
        "FILE_PATH": str(tmp_path / "tasks.json"),
        "PATH": str(Path(sys.executable).parent),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "loop", "task", "create", "--name", f"t{i}", "--json"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
        )
        for i in range(4)
    ]
    ids = {json.loads(p.communicate()[0])["task"]["id"] for p in procs}
    journaled = [line["call"] for line in lines(events)]
    assert len(ids) == 4
    assert {c["result"]["task"]["id"] for c in journaled} == ids
    assert all(c["channel"] == "cli" for c in journaled)


async def test_the_engines_calls_are_kept_in_memory_across_worker_threads() -> None:
    """Inside ``collecting``, a call this task makes, or a worker thread it starts, is the
    iteration's (the bus adapters run tools in threads); outside, none is."""
    calls = IterationCalls("s", 2, lambda _iteration, n: (100.0 + n, 0))
    ctx = ToolContext(root=Path.cwd(), tasks_file=None)
    with collecting(calls):
        assert in_process() is calls
        await anyio.to_thread.run_sync(TASKS["createTask"].run, ctx, {"name": "in memory"})
        with pytest.raises(ToolError):
            TASKS["getTask"].run(ctx, {"id": "nope"})
    assert in_process() is None
    made = calls.records()
    assert [(n, r.tool, r.channel, r.ts) for n, r in made] == [
        (1, "createTask", "bus", 101.0),
        (2, "getTask", "bus", 102.0),
    ]
    assert made[1][1].error is not None and made[1][1].error.code == "task_not_found"


def test_an_iterations_calls_are_ordered_around_its_agents() -> None:
    """The engine's calls before the backend ran, the agent's, then the engine's others."""
    from loop.records import ToolCall

    def rec(tool: str) -> ToolCall:
        return ToolCall(tool=tool, channel="bus", input={}, ts=0.0)

    mine = [(1, rec("heartbeat")), (2, rec("after-1")), (3, rec("after-2"))]
    agent = [rec("agent")]
    assert [c.tool for c in merge_calls(mine, agent, before=1)] == [
        "heartbeat",
        "agent",
        "after-1",
        "after-2",
    ]
    assert [c.tool for c in merge_calls([], agent, before=0)] == ["agent"]


def test_a_call_knows_its_time_in_the_callers_zone() -> None:
    """``Call.now`` is aware, with the recorded offset (what a heartbeat ID is made of)."""
    call = Call("s", 1, "m1", 0.0, 9 * 3600)
    assert call.now().strftime("%Y%m%d%H%M%S") == "19700101090000"
