"""Extensions add to each iteration's child environment, and are told when the call ends."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.backends.command import CommandBackend
from loop.extensions import Extension, RunningIteration
from loop.records import IterationEnd
from loop.testing import make_config, run_hats, scripted, tag

# Prints the variables it was given as one event's payload.
SHOW_ENV = (
    "import json, os; "
    "keys = ('GRANT', 'LOOP_HAT', 'LOOP_ITERATION'); "
    "print('<event topic=\"%s.done\">%s</event>' % (os.environ['LOOP_HAT'], "
    "json.dumps({k: os.environ.get(k) for k in keys})))"
)


@dataclass
class Grants(Extension):
    """Hands each iteration a secret of its own; records what happened, in order."""

    name: str = "grants"
    log: list[tuple[str, int]] = field(default_factory=list)
    given: dict[int, RunningIteration] = field(default_factory=dict)
    released: list[RunningIteration] = field(default_factory=list)

    def child_env(self, iteration: RunningIteration) -> Mapping[str, str]:
        self.log.append(("given", iteration.iteration))
        self.given[iteration.iteration] = iteration
        # LOOP_HAT is the engine's: the extension cannot change it
        return {"GRANT": f"secret-{iteration.hat}-{iteration.iteration}", "LOOP_HAT": "forged"}

    def release_child_env(self, iteration: RunningIteration) -> None:
        self.log.append(("released", iteration.iteration))
        self.released.append(iteration)

    def committed(self, record: IterationEnd) -> None:
        self.log.append(("committed", record.iteration))


def two_hats(tmp_path: Path, **loop: Any) -> Any:
    return make_config(
        {
            "a": {"triggers": ["task.start"], "publishes": ["a.done"]},
            "b": {"triggers": ["a.done"], "publishes": ["b.done", "LOOP_COMPLETE"]},
        },
        folder=tmp_path,
        **loop,
    )


async def test_each_child_gets_its_own_variables_and_they_are_released_before_the_commit(
    tmp_path: Path,
) -> None:
    """Every iteration's child sees the extension's variable for that iteration (the
    engine's LOOP_* win), and the release comes after the call, before the commit."""
    grants = Grants()
    agent = CommandBackend([sys.executable, "-c", SHOW_ENV])
    summary, cap = await run_hats(
        two_hats(tmp_path, max_iterations=2),
        {"a": agent, "b": agent},
        workdir=tmp_path,
        session_id="s",
        extra=[grants],
    )
    assert summary.iterations == 2
    payloads = [e.payload for e in cap.events if e.topic in ("a.done", "b.done")]
    assert payloads == [
        {"GRANT": "secret-a-1", "LOOP_HAT": "a", "LOOP_ITERATION": "1"},
        {"GRANT": "secret-b-2", "LOOP_HAT": "b", "LOOP_ITERATION": "2"},
    ]
    assert grants.log == [
        ("given", 1),
        ("released", 1),
        ("committed", 1),
        ("given", 2),
        ("released", 2),
        ("committed", 2),
    ]
    first = grants.given[1]
    assert grants.released == [first, grants.given[2]]
    assert (first.session_id, first.hat, first.activation) == ("s", "a", 0)
    assert first.session_dir == (tmp_path / ".loop/sessions/s").resolve()
    assert first.events_file == first.session_dir / "iterations/000001/attempt-1/events.jsonl"
    assert first.attempt == 1


async def test_in_process_hats_never_ask_for_a_child_environment(tmp_path: Path) -> None:
    """Scripted hats build no environment: nothing is given, nothing released."""
    grants = Grants()
    summary, _ = await run_hats(
        two_hats(tmp_path),
        {"a": scripted(tag("a.done")), "b": scripted(tag("LOOP_COMPLETE"))},
        workdir=tmp_path,
        session_id="s",
        extra=[grants],
    )
    assert summary.reason == "completed"
    assert grants.log == [("committed", 1), ("committed", 2)]


class Hangs(Backend):
    """Reads its environment, then waits until the engine's timeout cancels it."""

    kind = "hangs"

    def __init__(self) -> None:
        self.env: Mapping[str, str] = {}

    async def run(self, request: BackendRequest) -> BackendResult:
        self.env = request.env
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_cancelled_call_is_released_too(tmp_path: Path) -> None:
    """A call the engine's timeout cancels still releases what its child was given."""
    grants = Grants()
    hangs = Hangs()
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "timeout_seconds": 0.2}},
        folder=tmp_path,
        max_consecutive_failures=1,
    )
    summary, _ = await run_hats(cfg, {"a": hangs}, workdir=tmp_path, session_id="t", extra=[grants])
    assert summary.reason == "max_consecutive_failures"
    assert hangs.env["GRANT"] == "secret-a-1"
    assert grants.log == [("given", 1), ("released", 1), ("committed", 1)]


def test_a_backend_that_sets_path_keeps_it_with_this_python_first(tmp_path: Path) -> None:
    """``env = {PATH = ...}`` on a backend: its program is found there (as ``doctor``
    finds it), and the child's PATH is this Python's folder, then the backend's."""
    tools = tmp_path / "tools"
    tools.mkdir()
    program = tools / "mytool"
    program.write_text(
        '#!/bin/sh\ncat >/dev/null\necho "<event topic=\\"LOOP_COMPLETE\\">$PATH</event>"\n'
    )
    program.chmod(0o755)
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[backend]\ntype = "command"\ncommand = ["mytool"]\n'
        f'env = {{ PATH = "{tools}:/usr/bin:/bin" }}\n'
        '[hats.a]\ntriggers = ["task.start"]\npublishes = ["LOOP_COMPLETE"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "loop", "run", "-q", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    journal = next((tmp_path / ".loop/sessions").glob("*/journal.jsonl")).read_text()
    (end,) = [json.loads(x) for x in journal.splitlines() if '"iteration.end"' in x]
    assert end["events"][0]["payload"] == f"{Path(sys.executable).parent}:{tools}:/usr/bin:/bin"
