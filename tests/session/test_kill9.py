"""Resume after `kill -9` at many points of a run: nothing lost, nothing run twice.

Each case runs a real `python -m loop run` that is killed with SIGKILL at one point
(chosen with a fixed seed from every kind of point: after `iteration.start` is
journaled, during the backend call, between published events, just before and in
the middle of the journal write, after the commit, after the recording), then
`run --resume` finishes the session. The union of iterations must be exactly 1..N,
the recording must hold each iteration once and replay, and the task and theme files
must parse.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).parent / "agents" / "crash_builder.py"
N = 7
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}

CONFIG = f"""
[loop]
prompt = "crash test"
max_iterations = 20
stale_threshold = 3

[tasks]
block_completion = false

[themes]                  # configured: a heartbeat at every iteration, from the first
workspace = ".loop/works"

[hats.planner]
triggers = ["task.start"]
publishes = ["plan.ready"]
backend = {{ type = "scripted", outputs = [
  '<event topic="task.create">{{"name": "survive kill -9"}}</event>\
<event topic="plan.ready">p</event>'
] }}

[hats.builder]
triggers = ["plan.ready", "build.step"]
publishes = ["build.step", "build.done"]
backend = {{ type = "command", command = ["{sys.executable}", "{AGENT}"] }}

[hats.reviewer]
triggers = ["build.done"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">ok</event>'] }}
"""

# Every kind of point, with the passes at which it can be hit in this scenario.
POINTS: dict[str, list[int]] = {
    "iteration.start": list(range(1, N + 1)),
    "backend": list(range(2, 7)),  # builder iterations: the agent kills the loop
    "publish": list(range(1, 10)),
    "iteration.end": list(range(1, N + 1)),
    "journal.write": list(range(1, N + 1)),
    "iteration.committed": list(range(1, N + 1)),
    "iteration.recorded": list(range(1, N + 1)),
}


def _cases() -> list[tuple[str, int]]:
    rng = random.Random(20261121)
    cases = []
    for point, passes in POINTS.items():
        cases += [(point, p) for p in rng.sample(passes, 3 if len(passes) > 5 else 2)]
    cases += [(p, rng.choice(POINTS[p])) for p in rng.sample(sorted(POINTS), 2)]
    return sorted(set(cases))


CASES = _cases()


def test_there_are_at_least_twenty_distinct_kill_points() -> None:
    """The scenario list covers every kind of point, 20 or more cases in all."""
    assert len(CASES) >= 20
    assert {p for p, _ in CASES} == set(POINTS)


def _loop(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=tmp,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("point", "count"), CASES, ids=[f"{p}-{c}" for p, c in CASES])
def test_resume_after_kill_9_finishes_without_loss_or_repeat(
    tmp_path: Path, point: str, count: int
) -> None:
    """Killed at one point, resumed: iterations 1..N exactly once, replayable, files intact."""
    (tmp_path / "loop.toml").write_text(CONFIG)
    env = dict(ENV)
    if point == "backend":
        env["CRASH_IN_BACKEND"] = str(count)
    else:
        env["HATLOOP_CRASH_AT"] = f"{point}:{count}"
    crashed = _loop(
        tmp_path, "run", "-q", "--session-id", "s", "--record-session", "rec.jsonl", env=env
    )
    assert crashed.returncode == -9, (crashed.stdout, crashed.stderr)
    status = json.loads(_loop(tmp_path, "status", "s", "--json", env=ENV).stdout)
    assert status["status"] == "interrupted" and status["resume_command"]

    resumed = _loop(
        tmp_path, "run", "-q", "--resume", "s", "--record-session", "rec.jsonl", env=ENV
    )
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "completed" in resumed.stdout

    journal = [
        json.loads(x)
        for x in (tmp_path / ".loop/sessions/s/journal.jsonl").read_text().splitlines()
    ]
    done = [r["iteration"] for r in journal if r["kind"] == "iteration.end"]
    assert done == list(range(1, N + 1))
    hats = [r["hat"] for r in journal if r["kind"] == "iteration.end"]
    assert hats == ["planner"] + ["builder"] * 5 + ["reviewer"]

    records = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    recorded = [r["iteration"] for r in records if r.get("kind") == "iteration"]
    assert recorded == list(range(1, N + 1))

    tasks = json.loads((tmp_path / ".loop/tasks.json").read_text())
    # Iteration 1 publishes task.create then plan.ready. Killed after task.create was
    # applied but before iteration 1 committed, the in-flight iteration runs again and
    # so does its request (at-least-once for in-flight work); the task's id is derived
    # from the session, the iteration and the call, so the repeat finds its own task.
    assert [t["name"] for t in tasks] == ["survive kill -9"]
    heartbeat = (tmp_path / ".loop/works/stats/current_heartbeat_id.txt").read_text().strip()
    assert len(heartbeat) == 14 and heartbeat.isdigit()

    replay = _loop(tmp_path, "replay", "rec.jsonl", env=ENV)
    assert replay.returncode == 0, (replay.stdout, replay.stderr)
