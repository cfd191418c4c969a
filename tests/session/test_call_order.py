"""The tool calls of activations that ran at once replay in the order they were made.

Reviewers of a wave run at once and create a task each on the shared task store: the
order they did it in decides each task's ``order``. A replay makes each activation's
calls again as the activation "runs"; it must make them, across the activations, in the
recorded order (by their times, within the recorded schedule), not in the order the
replay starts or commits the activations.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config import LoadedConfig
from loop.records import ToolCall
from loop.replay import replay_recording
from loop.runner import tool_context
from loop.session.call_order import Turn, call_order
from loop.session.recorder import Recorder
from loop.testing import make_config, run_hats, tag
from loop.tools.calls import Call, FileCalls
from loop.tools.registry import all_tools
from tests.test_replay import edit, its

AGENT = Path(__file__).parent / "agents" / "interleave_agent.py"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}


# -- the order (pure) ---------------------------------------------------------------------


def _calls(*times: float) -> list[ToolCall]:
    return [ToolCall(tool="createTask", channel="cli", input={}, ts=t) for t in times]


def _own(calls: list[ToolCall]) -> list[tuple[int, list[ToolCall]]]:
    """A record's calls as :func:`call_groups` gives them: the agent's own only."""
    return [(0, calls)]


def _order(schedule: list[str], calls: dict[int, list[ToolCall]]) -> list[tuple[int, int, int]]:
    return [
        (t.iteration, t.start, t.place)
        for t in call_order(schedule, lambda n: _own(calls.get(n, [])))
    ]


def test_the_calls_of_activations_in_flight_together_are_merged_by_their_times() -> None:
    schedule = ["start 1 coord", "end 1 coord", "start 2 rev", "start 3 rev", "start 4 rev"]
    schedule += ["end 3 rev", "end 2 rev", "end 4 rev"]
    calls = {2: _calls(5.0, 8.0), 3: _calls(4.0), 4: _calls(3.0, 9.0)}
    assert _order(schedule, calls) == [(4, 1, 0), (3, 1, 0), (2, 1, 0), (2, 1, 1), (4, 1, 1)]


def test_an_activations_own_order_its_start_and_its_commit_bound_what_the_clock_says() -> None:
    """A clock that went back keeps an activation's calls in its own order; a call is
    never before its activation's start nor after its commit (so the replay, which starts
    and commits as recorded, always reaches the next one)."""
    schedule = ["start 1 r", "start 2 r", "end 1 r", "start 3 r", "end 2 r", "end 3 r"]
    calls = {1: _calls(10.0, 2.0), 2: _calls(1.0, 11.0), 3: _calls(0.5)}
    # 1's second call says 2.0 but comes after its first; 3's says 0.5, the earliest, but
    # 3 started after 1 committed: after 1's calls, and before 2's second (11.0)
    assert _order(schedule, calls) == [(2, 1, 0), (1, 1, 0), (1, 1, 1), (3, 1, 0), (2, 1, 1)]


def test_an_activation_a_kill_lost_makes_its_calls_before_the_resume() -> None:
    """Iteration 2 was in flight when the recorded run was killed, after it made a call at
    1.0 and before 1's at 3.0: the lost activation (2's first start) makes that call, in
    its time, before the resume; number 2's second start, after the resume, makes its
    own (4.0). The record of number 2 holds both: attempt 1's as lost calls."""
    schedule = ["start 1 r", "start 2 r", "end 1 r", "resume", "start 2 r", "end 2 r"]
    asked: list[int] = []

    def calls(n: int) -> list[tuple[int, list[ToolCall]]]:
        asked.append(n)
        return {1: _own(_calls(3.0)), 2: [(1, _calls(1.0)), (0, _calls(4.0))]}[n]

    order = call_order(schedule, calls)
    assert next(order) == Turn(2, 1, 0)  # the lost call, made at 1.0, comes first
    assert asked == [1, 2]  # read lazily: as far as the starts before it
    assert list(order) == [Turn(1, 1, 0), Turn(2, 2, 1)]


def test_a_sequential_recording_has_no_order_to_keep() -> None:
    assert _order([], {1: _calls(1.0)}) == []


class _Out(BaseModel):
    ok: bool = True


def test_a_sessions_agent_calls_read_their_time_and_run_one_at_a_time(tmp_path: Path) -> None:
    """While a call runs, the session's calls lock is held: another activation's call
    waits, so the times the calls took are in the order they changed the tool state."""
    session = tmp_path / "s"
    session.mkdir()
    journal = FileCalls("s", 2, session / "events.jsonl", "cli", session_dir=session)
    held = []

    def invoke(call: Call) -> BaseModel:
        with (session / "calls.lock").open() as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(call.key)
            else:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return _Out()

    journal.record("createTask", {}, None, invoke)
    assert held == ["f1"]


# -- a replay: the interleaving driven by the test, in process ---------------------------

PLAN = [2, 1, 0, 2, 1, 0]  # the turns, by the rank of the reviewer's start


class _Interleaved(Backend):
    """Three reviewers in one process: once the three have started, they create tasks in
    :data:`PLAN`'s order (the last started first, two each), through the tool as the CLI
    makes them (journaled in the iteration's events file)."""

    kind = "command"  # its own events file

    def __init__(self, config: LoadedConfig, workdir: Path) -> None:
        self.ctx = tool_context(config, workdir)
        self.started: list[int] = []
        self.all_started = anyio.Event()
        self.turn = 0
        self.moved = anyio.Event()

    async def run(self, request: BackendRequest) -> BackendResult:
        if request.hat == "coord":
            return BackendResult(output="".join(tag("work", p) for p in "abc"))
        if request.hat == "syn":
            return BackendResult(output=tag("LOOP_COMPLETE", "ok"))
        assert request.events_file is not None
        self.started.append(request.iteration)
        if len(self.started) == 3:
            self.all_started.set()
        await self.all_started.wait()
        rank = sorted(self.started).index(request.iteration)
        journal = FileCalls(request.session_id, request.iteration, request.events_file, "cli")
        ctx = replace(self.ctx, events_file=request.events_file, calls=journal)
        for turn, owner in enumerate(PLAN):
            if owner != rank:
                continue
            while self.turn != turn:
                await self.moved.wait()
            all_tools()["createTask"].run(ctx, {"name": f"turn {turn}"})
            self.turn += 1
            self.moved.set()
            self.moved = anyio.Event()
        return BackendResult(output=tag("done", str(request.iteration)))


def wave_config(folder: Path, **hats: Any) -> LoadedConfig:
    config = make_config(
        {
            "coord": {"triggers": ["task.start"], "publishes": ["work"]},
            "rev": {"triggers": ["work"], "publishes": ["done"], "concurrency": 3, **hats},
            "syn": {
                "triggers": ["done"],
                "publishes": ["LOOP_COMPLETE"],
                "aggregate": {"mode": "wait_for_all", "timeout_seconds": 60},
            },
        },
        folder=folder,
        extensions=True,
        max_parallel=3,
    )
    return replace(config, tasks=config.tasks.model_copy(update={"block_completion": False}))


def _orders(path: Path) -> dict[int, list[int]]:
    """Each reviewer's tasks' ``order``, as recorded."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return {
        r["iteration"]: [c["result"]["task"]["order"] for c in r["tool_calls"]]
        for r in its(records)
        if r["hat"] == "rev"
    }


async def test_calls_of_activations_that_ran_at_once_replay_in_the_recorded_order(
    tmp_path: Path,
) -> None:
    config = wave_config(tmp_path)
    agent = _Interleaved(config, tmp_path)
    path = tmp_path / "r.jsonl"
    summary, _ = await run_hats(
        config,
        dict.fromkeys(config.hats, agent),
        workdir=tmp_path,
        session_id="s",
        extra=[Recorder(path)],
    )
    assert summary.reason == "completed", summary
    # the last started made the first call, the first started the last: 2, 3, 4 started
    assert _orders(path) == {2: [3, 6], 3: [2, 5], 4: [1, 4]}
    result = await replay_recording(path)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == 5

    def swap_the_times(records: list[dict[str, Any]]) -> None:
        """Iteration 4's first call "made" after iteration 3's first: replayed so, it
        comes out otherwise (the times are what the order is read from)."""
        by = {r["iteration"]: r for r in its(records)}
        first, second = by[4]["tool_calls"][0], by[3]["tool_calls"][0]
        first["ts"], second["ts"] = second["ts"], first["ts"]

    result = await replay_recording(edit(path, swap_the_times))
    assert result.divergence is not None
    assert "tool call 1 of 2 differs (createTask via cli)" in result.divergence.what


# -- end to end: command hats, the CLI, `run --record-session` and `replay` ---------------


def test_a_wave_of_reviewers_creating_tasks_over_the_cli_records_and_replays(
    tmp_path: Path,
) -> None:
    """The reviewers run at once as real processes and create their tasks, two each,
    interleaved, the last started first: the recording replays (exit 0)."""
    signals = tmp_path / "signals"
    signals.mkdir()
    command = [sys.executable, str(AGENT), str(signals)]
    (tmp_path / "loop.toml").write_text(
        f"""
[loop]
prompt = "p"
max_parallel = 3
[backend]
type = "command"
command = {json.dumps(command)}
[tasks]
enabled = true
block_completion = false
[hats.coord]
triggers = ["task.start"]
publishes = ["work"]
[hats.rev]
triggers = ["work"]
publishes = ["done"]
concurrency = 3
[hats.syn]
triggers = ["done"]
publishes = ["LOOP_COMPLETE"]
aggregate = {{ mode = "wait_for_all", timeout_seconds = 60 }}
"""
    )
    loop = [sys.executable, "-m", "loop"]
    run = subprocess.run(
        [*loop, "run", "-q", "--record-session", "r.jsonl"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert _orders(tmp_path / "r.jsonl") == {2: [3, 6], 3: [2, 5], 4: [1, 4]}
    replayed = subprocess.run(
        [*loop, "replay", "r.jsonl"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
