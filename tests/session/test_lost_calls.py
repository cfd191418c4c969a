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
