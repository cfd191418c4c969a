"""Replaying a session that extensions of the user's own took part in, from the command
line (``replay --extension``) and under pytest (``hatloop_extensions``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from loop import Recorder, RunOptions, run_loop
from loop.testing import make_config, tag
from tests.commands.helpers import ENV, loop

HOOKS = '''\
from loop import Event, EventBus, Extension


class Nudger(Extension):
    """After the planner's iteration, publish a nudge between iterations."""

    name = "nudger"

    def attach(self, bus: EventBus) -> None:
        self.bus = bus
        bus.subscribe("loop.iteration.done", self.on_done, name=self.name)

    async def on_done(self, event: Event) -> None:
        if event.payload.hat == "planner":
            await self.bus.publish(Event("nudge.please", "go", source=self.name))


def not_one():
    return 42
'''


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``hooks.py`` and ``rec.jsonl``: a session its Nudger published in."""
    (tmp_path / "hooks.py").write_text(HOOKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    from hooks import Nudger  # type: ignore[import-not-found]

    config = make_config(
        {
            "planner": {
                "triggers": ["task.start"],
                "publishes": ["plan.ready"],
                "backend": {"type": "scripted", "outputs": [tag("plan.ready", "p")]},
            },
            "sink": {
                "triggers": ["plan.ready"],
                "backend": {"type": "scripted", "outputs": ["nothing"]},
                "max_activations": 1,
            },
            "builder": {
                "triggers": ["nudge.please"],
                "publishes": ["LOOP_COMPLETE"],
                "backend": {"type": "scripted", "outputs": [tag("LOOP_COMPLETE", "ok")]},
            },
        },
        folder=tmp_path / "project",
        max_iterations=5,
    )
    options = RunOptions(workdir=tmp_path / "project", progress=False, handle_signals=False)
    recorder = Recorder(tmp_path / "rec.jsonl", force=True)
    summary = anyio.run(run_loop, config, options, [Nudger(), recorder])
    assert summary.reason == "completed"
    return tmp_path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_replay_takes_the_extensions_the_recorded_run_had(recorded: Path, jobs: str) -> None:
    """Without the extension the nudge is missing (a divergence, exit 4); named with
    ``--extension``, made anew in each process, the recording replays."""
    without = loop("replay", "rec.jsonl", "--jobs", jobs, cwd=recorded)
    assert without.returncode == 4, without.stdout + without.stderr
    assert "nudge.please" in without.stdout
    named = loop("replay", "rec.jsonl", "--jobs", jobs, "--extension", "hooks:Nudger", cwd=recorded)
    assert named.returncode == 0, named.stdout + named.stderr


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("hooks", "expected module:name"),
        (
            "nowhere:Nudger",
            "cannot import 'nowhere': ModuleNotFoundError: No module named 'nowhere'",
        ),
        ("hooks:Nope", "hooks has no 'Nope'"),
        ("hooks:not_one", "gave a int, not an Extension of hatloop's"),
    ],
)
def test_an_extension_that_cannot_be_made_is_one_line_before_any_replay(
    recorded: Path, spec: str, said: str
) -> None:
    done = loop("replay", "rec.jsonl", "--extension", spec, cwd=recorded)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: --extension {spec}: {said}"]


def test_pytest_takes_the_extensions_its_ini_names(recorded: Path) -> None:
    """``hatloop_extensions`` in the ini file: the recording passes; without it, it fails
    with the divergence."""
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    (recorded / "recordings").mkdir()
    (recorded / "rec.jsonl").rename(recorded / "recordings" / "rec.jsonl")
    (recorded / "pytest.ini").write_text("[pytest]\n")
    failed = subprocess.run(
        [*run, "recordings"], cwd=recorded, env=ENV, capture_output=True, text=True, check=False
    )
    assert failed.returncode == 1 and "nudge.please" in failed.stdout, failed.stdout
    (recorded / "pytest.ini").write_text("[pytest]\nhatloop_extensions = hooks:Nudger\n")
    passed = subprocess.run(
        [*run, "recordings"], cwd=recorded, env=ENV, capture_output=True, text=True, check=False
    )
    assert passed.returncode == 0, passed.stdout
    assert "1 passed" in passed.stdout
