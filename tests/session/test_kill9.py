"""Resume after `kill -9` at many points of a run: nothing lost, nothing run twice.

Each case runs a real `python -m loop run` that is killed with SIGKILL at one point
(chosen with a fixed seed from every kind of point: after `iteration.start` is
journaled, during the backend call, between published events, just before and in
the middle of the journal write, after the commit, after the recording), then
`run --resume` finishes the session. The union of iterations must be exactly 1..N,
each committed once with exactly the events of the attempt that committed it, the
recording must hold each iteration once and replay, and the task and theme files
must parse. The builder is a real subprocess agent that creates a task through the CLI
in every iteration; in the orphan cases it kills the loop and keeps running (itself, a
child in a session of its own, or both), still emitting events and creating tasks:
the resume stops them before the iteration runs again, and none is left afterwards.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from loop.backends._procs import carrying, processes, read_stat

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


# The agent kills the loop in builder iteration K and keeps running, as itself, as a
# child in a session of its own, or both (see agents/crash_builder.py).
ORPHAN_CASES = [("agent", 2), ("setsid", 4), ("both", 6)]


def _journal(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / ".loop/sessions/s/journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def _wait_for(files: list[Path]) -> None:
    """Wait until the orphans have written their pid files (they are running then)."""
    deadline = time.monotonic() + 60
    while not all(f.exists() for f in files):
        assert time.monotonic() < deadline, "the orphans never started"
        time.sleep(0.02)


def _is_running(pid_file: Path) -> bool:
    pid, start = (int(x) for x in pid_file.read_text().split())
    st = read_stat(pid)
    return st is not None and st.state != "Z" and st.start_ticks == start


def _session_processes(tmp: Path) -> list[int]:
    """Live processes that carry this session's folder: its agents and what they started."""
    entry = f"LOOP_SESSION_DIR={tmp / '.loop/sessions/s'}".encode()
    return [st.pid for st in processes() if carrying(st, [entry])]


def _check_attempts(tmp: Path, journal: list[dict[str, Any]]) -> None:
    """Each committed iteration's emitted events are exactly its committing attempt's
    file (a stale writer's lines are only in the attempt it belonged to)."""
    attempt: dict[int, int] = {}
    for record in journal:
        if record["kind"] == "iteration.start":
            attempt[record["iteration"]] = record.get("attempt", 1)
        if record["kind"] != "iteration.end":
            continue
        k = record["iteration"]
        path = tmp / f".loop/sessions/s/iterations/{k:06d}/attempt-{attempt[k]}/events.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        lines_read = [json.loads(x) for x in lines]
        written = [(e["topic"], e["payload"]) for e in lines_read if e.get("kind") != "tool.call"]
        assert [(e["topic"], e["payload"]) for e in record["emitted"]] == written
        if record["hat"] == "builder":  # one event, never a stale writer's second one
            assert [t for t, _ in written] == ["build.step" if k < 6 else "build.done"]


def _kill_and_resume(tmp: Path, env: dict[str, str], orphans: Sequence[Path] = ()) -> None:
    (tmp / "loop.toml").write_text(CONFIG)
    crashed = _loop(tmp, "run", "-q", "--session-id", "s", "--record-session", "rec.jsonl", env=env)
    assert crashed.returncode == -9, (crashed.stdout, crashed.stderr)
    _wait_for(list(orphans))
    status = json.loads(_loop(tmp, "status", "s", "--json", env=ENV).stdout)
    assert status["status"] == "interrupted" and status["resume_command"]
    resumed = _loop(tmp, "run", "-q", "--resume", "s", "--record-session", "rec.jsonl", env=ENV)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert "completed" in resumed.stdout


def _check_session(tmp: Path, journal: list[dict[str, Any]]) -> None:
    done = [r["iteration"] for r in journal if r["kind"] == "iteration.end"]
    assert done == list(range(1, N + 1))
    hats = [r["hat"] for r in journal if r["kind"] == "iteration.end"]
    assert hats == ["planner"] + ["builder"] * 5 + ["reviewer"]
    _check_attempts(tmp, journal)
    assert _session_processes(tmp) == [], "a process of the session outlived it"
    records = [json.loads(x) for x in (tmp / "rec.jsonl").read_text().splitlines()]
    recorded = [r["iteration"] for r in records if r.get("kind") == "iteration"]
    assert recorded == list(range(1, N + 1))
    heartbeat = (tmp / ".loop/works/stats/current_heartbeat_id.txt").read_text().strip()
    assert len(heartbeat) == 14 and heartbeat.isdigit()
    replay = _loop(tmp, "replay", "rec.jsonl", env=ENV)
    assert replay.returncode == 0, (replay.stdout, replay.stderr)


def _check_builds(tasks: Counter[str], journal: list[dict[str, Any]]) -> None:
    """Each builder iteration's task was created once: the one in flight at the crash ran
    its call again, with the same id (derived from the session, the iteration and the
    call's place in its attempt), so the repeat found its own task."""
    for k in range(2, 7):
        assert tasks[f"build {k}"] == 1, k


@pytest.mark.parametrize(("point", "count"), CASES, ids=[f"{p}-{c}" for p, c in CASES])
def test_resume_after_kill_9_finishes_without_loss_or_repeat(
    tmp_path: Path, point: str, count: int
) -> None:
    """Killed at one point, resumed: iterations 1..N exactly once, replayable, files intact."""
    env = dict(ENV)
    if point == "backend":
        env["CRASH_IN_BACKEND"] = str(count)
    else:
        env["HATLOOP_CRASH_AT"] = f"{point}:{count}"
    _kill_and_resume(tmp_path, env)
    journal = _journal(tmp_path)
    _check_session(tmp_path, journal)
    tasks = Counter(t["name"] for t in json.loads((tmp_path / ".loop/tasks.json").read_text()))
    # Iteration 1 publishes task.create then plan.ready. Killed after task.create was
    # applied but before iteration 1 committed, the in-flight iteration runs again and
    # so does its request (at-least-once for in-flight work); the task's id is derived
    # from the session, the iteration and the call, so the repeat finds its own task.
    assert tasks["survive kill -9"] == 1
    _check_builds(tasks, journal)
    assert set(tasks) == {"survive kill -9"} | {f"build {k}" for k in range(2, 7)}


@pytest.mark.parametrize(("orphan", "count"), ORPHAN_CASES, ids=[o for o, _ in ORPHAN_CASES])
def test_resume_stops_what_the_killed_run_left_running(
    tmp_path: Path, orphan: str, count: int
) -> None:
    """The agent kills the loop and goes on writing (emit, task create), itself or
    through a child that left its group: the resume stops exactly those processes
    (journaled in its record), the iteration commits once with only its new attempt's
    events, the stale lines stay in the killed attempt's file, and nothing is left."""
    env = {**ENV, "CRASH_IN_BACKEND": str(count), "CRASH_ORPHAN": orphan}
    names = {"agent": ["agent"], "setsid": ["child"], "both": ["agent", "child"]}[orphan]
    pid_files = [tmp_path / "orphans" / name for name in names]
    try:
        _kill_and_resume(tmp_path, env, pid_files)
        journal = _journal(tmp_path)
        _check_session(tmp_path, journal)
        assert not any(_is_running(f) for f in pid_files)
        (resume,) = [r for r in journal if r["kind"] == "resume"]
        assert resume["in_flight"] == count
        orphans = {int(f.read_text().split()[0]) for f in pid_files}
        assert orphans <= set(resume["stopped"])
        killed = tmp_path / f".loop/sessions/s/iterations/{count:06d}/attempt-1/events.jsonl"
        assert "stale.tick" in killed.read_text()  # the orphans wrote there, and only there
        tasks = Counter(t["name"] for t in json.loads((tmp_path / ".loop/tasks.json").read_text()))
        _check_builds(tasks, journal)
    finally:
        for f in pid_files:  # never leave a process behind, even when the test fails
            if f.exists() and _is_running(f):
                os.kill(int(f.read_text().split()[0]), 9)
