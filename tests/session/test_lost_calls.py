"""The tool calls of an attempt a kill cut short stay made, and the recording keeps them.

A real ``python -m loop run`` whose agent starts a task and then kills the loop; the
resumed run runs the iteration again as attempt 2, which finds the task in progress.
The iteration keeps attempt 1's calls (``lost_calls``): ``show`` lists them, and a
replay makes them again before the iteration's own, so it finds what the run found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from loop.backends.base import Backend, BackendRequest, BackendResult, RateLimit, child_env
from loop.engine.journal import read_journal
from loop.records import IterationEnd
from loop.replay import replay_recording
from loop.session.recorder import Recorder
from loop.testing import make_config, run_hats

AGENT = Path(__file__).parent / "agents" / "start_then_die.py"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
CONFIG = f"""
[loop]
prompt = "start a task, then die"
max_iterations = 3

[tasks]
block_completion = false

[hats.solo]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "command", command = ["{sys.executable}", "{AGENT}"] }}
"""


def _loop(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=tmp,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _iteration(path: Path) -> dict[str, object]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (iteration,) = [r for r in records if r.get("kind") in ("iteration", "iteration.end")]
    return iteration


def test_a_killed_attempts_calls_are_kept_and_replayed(tmp_path: Path) -> None:
    (tmp_path / "loop.toml").write_text(CONFIG)
    killed = _loop(tmp_path, "run", "-q", "--session-id", "s", "--record-session", "r.jsonl")
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    resumed = _loop(tmp_path, "run", "-q", "--resume", "s", "--record-session", "r.jsonl")
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)

    for path in (tmp_path / "r.jsonl", tmp_path / ".loop/sessions/s/journal.jsonl"):
        iteration = _iteration(path)
        (lost,) = iteration["lost_calls"]  # type: ignore[misc]
        assert lost["attempt"] == 1
        assert [c["tool"] for c in lost["tool_calls"]] == ["createTask", "startTask"]
        calls = iteration["tool_calls"]
        assert [c["tool"] for c in calls] == ["createTask", "startTask", "completeTask"]  # type: ignore[union-attr]
        # attempt 2 found attempt 1's task, in progress: the same id, not a second task
        assert calls[0]["result"]["task"]["status"] == "in_progress"  # type: ignore[index]
    (task,) = json.loads((tmp_path / ".loop/tasks.json").read_text())
    assert task["status"] == "done"

    shown = _loop(tmp_path, "show", "r.jsonl", "--iteration", "1")
    assert "  attempt 1   createTask via cli" in shown.stdout, shown.stdout

    replay = _loop(tmp_path, "replay", "r.jsonl")
    assert replay.returncode == 0, (replay.stdout, replay.stderr)


def test_a_lost_call_that_comes_out_otherwise_on_replay_is_a_divergence(tmp_path: Path) -> None:
    (tmp_path / "loop.toml").write_text(CONFIG)
    _loop(tmp_path, "run", "-q", "--session-id", "s", "--record-session", "r.jsonl")
    _loop(tmp_path, "run", "-q", "--resume", "s", "--record-session", "r.jsonl")
    lines = []
    for line in (tmp_path / "r.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "iteration":
            record["lost_calls"][0]["tool_calls"][1]["result"]["task"]["status"] = "done"
        lines.append(json.dumps(record))
    (tmp_path / "edited.jsonl").write_text("\n".join(lines) + "\n")
    replay = _loop(tmp_path, "replay", "edited.jsonl")
    assert replay.returncode == 4, (replay.stdout, replay.stderr)
    assert "attempt 1, which did not end: tool call 2 of 2 differs (startTask via cli)" in (
        replay.stdout
    )
    assert 'task.status: "done"' in replay.stdout


class _LimitedOnce(Backend):
    """Makes tool calls through the CLI (a child process, as an agent does), then is
    refused by a rate limit the first time; the next call completes the task it started,
    and the loop."""

    kind = "command"  # a hat with a child process: its own events file

    def __init__(self) -> None:
        self.calls = 0
        self.task = ""

    async def _loop(self, request: BackendRequest, *args: str) -> dict[str, Any]:
        done = await anyio.run_process(
            [sys.executable, "-m", "loop", *args, "--json"],
            env=child_env(request),
            cwd=request.workdir,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    async def run(self, request: BackendRequest) -> BackendResult:
        self.calls += 1
        if self.calls == 1:
            created = await self._loop(request, "task", "create", "--name", "A")
            self.task = created["task"]["id"]
            await self._loop(request, "task", "start", self.task)
            result = BackendResult.failed("429 slow down", exit_code=1)
            result.limited = RateLimit("rate_limit", "slow down", retry_after=0.1)
            return result
        await self._loop(request, "task", "complete", self.task, "done")
        return BackendResult(output='<event topic="LOOP_COMPLETE">done</event>')


async def test_the_calls_of_a_call_a_rate_limit_cut_short_are_kept_and_replayed(
    tmp_path: Path,
) -> None:
    """A rate-limited call's tool calls stay made: its events file is set aside (not
    emptied), the iteration keeps them as lost_calls (of the same attempt), and the
    recording replays."""
    cfg = make_config(
        {"solo": {"triggers": ["task.start"], "publishes": ["LOOP_COMPLETE"]}},
        folder=tmp_path,
        extensions=True,
        max_iterations=3,
    )
    recorder = Recorder(tmp_path / "r.jsonl", force=False, append=False)
    summary, _ = await run_hats(
        cfg, {"solo": _LimitedOnce()}, workdir=tmp_path, session_id="s", extra=[recorder]
    )
    assert summary.reason == "completed", summary
    folder = tmp_path / ".loop/sessions/s/iterations/000001/attempt-1"
    assert (folder / "events.cut-1.jsonl").exists()
    journal = read_journal(tmp_path / ".loop/sessions/s/journal.jsonl").records
    (end,) = [r for r in journal if isinstance(r, IterationEnd)]
    (lost,) = end.lost_calls
    assert lost.attempt == 1
    assert [c.tool for c in lost.tool_calls] == ["createTask", "startTask"]
    assert [c.tool for c in end.tool_calls] == ["completeTask"]
    result = await replay_recording(tmp_path / "r.jsonl")
    assert result.ok, result.divergence and result.divergence.render()
