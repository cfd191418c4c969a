"""What the engine tells a live display, and the idle timeout in a whole loop: the
``loop.iteration.started`` event with the spend so far, the hats' output handed to an
observer, and a silent agent stopped with reason ``idle_timeout``."""

from __future__ import annotations

import sys
from pathlib import Path

from structlog.testing import capture_logs

from loop.backends import build_backend
from loop.backends.base import AgentOutput, Backend, BackendRequest, BackendResult
from loop.engine.invoke import idle_limits
from loop.engine.lifecycle import ITERATION_STARTED, IterationStarted
from loop.engine.state import HatUsage
from loop.runner import RunOptions, run_loop
from loop.testing import make_config, run_hats, tag


class Paid(Backend):
    """Answers at once, and says what the answer cost."""

    kind = "paid"

    def __init__(self, *outputs: str) -> None:
        self.outputs = list(outputs)

    async def run(self, request: BackendRequest) -> BackendResult:
        return BackendResult(
            output=self.outputs[request.activation],
            cost_usd=0.25,
            input_tokens=100,
            output_tokens=10,
        )


class Talks(Backend):
    """Reports two lines of output as they 'arrive', then answers."""

    kind = "talks"
    watches_output = True

    async def run(self, request: BackendRequest) -> BackendResult:
        assert request.observer is not None
        for text in ("thinking", "done"):
            request.observer(AgentOutput(request.hat, request.iteration, "line", text))
        return BackendResult(output=tag("LOOP_COMPLETE"))


HATS = {
    "a": {"triggers": ["task.start"], "publishes": ["a.done"]},
    "b": {"triggers": ["a.done"], "publishes": ["LOOP_COMPLETE"]},
}


async def test_each_iteration_is_announced_with_the_spend_before_it(tmp_path: Path) -> None:
    """loop.iteration.started comes before the hat runs, with its number, hat, backend and
    what the session had spent so far."""
    config = make_config(HATS, folder=tmp_path)
    backends = {"a": Paid(tag("a.done")), "b": Paid(tag("LOOP_COMPLETE"))}
    summary, capture = await run_hats(config, backends, workdir=tmp_path)
    assert summary.reason == "completed"
    started = [e.payload for e in capture.events if e.topic == ITERATION_STARTED]
    assert all(isinstance(p, IterationStarted) for p in started)
    assert [(p.iteration, p.hat, p.backend, p.watched) for p in started] == [
        (1, "a", "paid", False),
        (2, "b", "paid", False),
    ]
    assert [p.spent for p in started] == [
        HatUsage(),
        HatUsage(cost_usd=0.25, input_tokens=100, output_tokens=10),
    ]
    topics = capture.topics(include_loop=True)
    assert topics.index(ITERATION_STARTED) < topics.index("a.done")


async def test_the_observer_gets_each_hats_output(tmp_path: Path) -> None:
    """RunOptions.observer reaches the backend through its request."""
    config = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    seen: list[AgentOutput] = []
    options = RunOptions(
        workdir=tmp_path,
        progress=False,
        backends={"a": Talks()},
        handle_signals=False,
        observer=seen.append,
    )
    summary = await run_loop(config, options)
    assert summary.reason == "completed"
    assert [(p.hat, p.iteration, p.text) for p in seen] == [("a", 1, "thinking"), ("a", 1, "done")]


# -- the idle timeout -----------------------------------------------------------------------

SILENT = [sys.executable, "-c", "print('thinking', flush=True); import time; time.sleep(300)"]


async def test_a_silent_agent_fails_its_iteration_with_idle_timeout(tmp_path: Path) -> None:
    """A real subprocess agent prints, then goes silent: after [loop]
    idle_timeout_seconds its group is stopped and the iteration fails, reason
    idle_timeout; the loop goes on as after any failure."""
    hats = {"a": {"triggers": ["task.start"], "backend": {"type": "command", "command": SILENT}}}
    config = make_config(
        hats, folder=tmp_path, idle_timeout_seconds=1.5, max_consecutive_failures=1
    )
    summary, capture = await run_hats(
        config, {"a": build_backend(config.hat_backend("a"))}, workdir=tmp_path
    )
    assert summary.reason == "max_consecutive_failures"
    [done] = [e.payload for e in capture.events if e.topic == "loop.iteration.done"]
    assert done.status == "failed"
    assert done.reason == "idle_timeout: no output for 1.5s"
    assert done.output == "thinking\n"


def test_a_hats_idle_limit_wins_over_the_loops_and_applies_only_where_watched(
    tmp_path: Path,
) -> None:
    """hat > [loop] > none; a hat whose backend does not watch output has none, and
    setting one on it is warned about."""
    command = {"type": "command", "command": ["true"]}
    hats = {
        "own": {"triggers": ["task.start"], "idle_timeout_seconds": 30, "backend": command},
        "loops": {"triggers": ["x.y"], "backend": command},
        "scripted": {"triggers": ["y.z"], "idle_timeout_seconds": 5},
    }
    config = make_config(hats, folder=tmp_path, idle_timeout_seconds=120)
    backends = {name: build_backend(config.hat_backend(name)) for name in hats}
    with capture_logs() as logs:
        limits = idle_limits(config, backends)
    assert limits == {"own": 30, "loops": 120, "scripted": None}
    assert [(e["hat"], e["backend"]) for e in logs] == [("scripted", "scripted")]
    plain = make_config(
        hats | {"own": {"triggers": ["task.start"], "backend": command}}, folder=tmp_path / "b"
    )
    assert idle_limits(plain, backends)["own"] is None
