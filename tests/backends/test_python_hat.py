"""The python backend: what a function hat may do, and what it can no longer do once its
iteration has ended."""

from __future__ import annotations

import contextvars
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from loop.backends.base import BackendRequest
from loop.backends.python_hat import HatContext, PythonBackend, resolve_target
from loop.errors import BackendUnavailable, InputError, SessionError
from loop.testing import make_config, run_hats

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="unset")
release = threading.Event()
late: list[BaseException | None] = []


def request(tmp_path: Path) -> BackendRequest:
    return BackendRequest(
        hat="h",
        prompt="p",
        iteration=1,
        session_id="s",
        activation=0,
        workdir=tmp_path,
        events_file=tmp_path / "events.jsonl",
    )


def outlives_its_iteration(ctx: HatContext) -> str:
    """Waits until the test releases it, long after its iteration ended, then emits."""
    release.wait(10)
    try:
        ctx.emit("late.event", "x")
        late.append(None)
    except BaseException as exc:  # the test reads what the hat met
        late.append(exc)
    return "late"


async def test_a_sync_hat_past_its_iteration_can_publish_nothing(tmp_path: Path) -> None:
    """The engine's timeout cuts the call; the thread goes on, and its late ``ctx.emit``
    raises instead of adding an event to an iteration that is over."""
    release.clear()
    late.clear()
    backend = PythonBackend(f"{__name__}:outlives_its_iteration")
    with anyio.move_on_after(0.2):
        await backend.run(request(tmp_path))
    release.set()
    for _ in range(200):
        if late:
            break
        await anyio.sleep(0.05)
    (error,) = late
    assert isinstance(error, SessionError)
    assert "iteration 1 of hat h has ended" in str(error)
    assert not (tmp_path / "events.jsonl").exists()


def sees_the_callers_context(ctx: HatContext) -> str:
    return SEEN.get()


async def test_a_sync_hat_runs_with_the_callers_context_variables(tmp_path: Path) -> None:
    """The thread runs in a copy of the calling task's context (what in-process tool
    calls are attributed by)."""
    SEEN.set("the iteration's")
    result = await PythonBackend(f"{__name__}:sees_the_callers_context").run(request(tmp_path))
    assert result.ok and result.output == "the iteration's"


def exits(ctx: HatContext) -> None:
    sys.exit(3)


async def exits_async(ctx: HatContext) -> None:
    sys.exit(3)


def interrupts(ctx: HatContext) -> None:
    raise KeyboardInterrupt("from the hat")


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("exits", "SystemExit: 3"),
        ("exits_async", "SystemExit: 3"),
        ("interrupts", "KeyboardInterrupt: from the hat"),
    ],
)
async def test_a_hat_that_exits_is_a_failed_iteration(
    tmp_path: Path, target: str, reason: str
) -> None:
    """``sys.exit()`` in a hat (sync or async), or a KeyboardInterrupt a sync hat raises
    itself, fails the iteration: it does not end the run."""
    result = await PythonBackend(f"{__name__}:{target}").run(request(tmp_path))
    assert not result.ok
    assert result.reason == reason


def test_ctx_emit_refuses_what_the_emit_command_refuses(tmp_path: Path) -> None:
    """A topic that is not one, or a payload that is not JSON, raises at once (the hat
    learns of it) and writes nothing."""
    ctx = HatContext("h", "p", 1, 0, (), tmp_path, tmp_path / "events.jsonl")
    with pytest.raises(InputError, match="invalid topic 'build done'"):
        ctx.emit("build done", "x")
    with pytest.raises(InputError, match="the payload is not JSON"):
        ctx.emit("build.done", float("nan"))
    with pytest.raises(InputError, match="the payload is not JSON"):
        ctx.emit("build.done", {1, 2})
    assert not (tmp_path / "events.jsonl").exists()
    ctx.emit("build.done", {"n": 1})
    assert (tmp_path / "events.jsonl").read_text().count("\n") == 1


def test_a_sync_hat_past_its_timeout_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    """The run ends at the timeout: the thread of a function still sleeping (60 s) is left
    behind, and the process exits without waiting for it."""
    (tmp_path / "slow.py").write_text("import time\ndef hat(ctx):\n    time.sleep(60)\n")
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\nmax_consecutive_failures = 1\n[tasks]\nenabled = false\n'
        '[hats.a]\ntriggers = ["task.start"]\n'
        'backend = { type = "python", target = "slow:hat", timeout_seconds = 0.5 }\n'
    )
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "loop", "run", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "timeout after 0.5s" in done.stdout + done.stderr
    assert time.monotonic() - t0 < 30  # the sleeping thread would hold it for 60 s


async def blocks_the_loop(ctx: HatContext) -> str:
    """An async hat that blocks (no await): nothing can cut it while it runs."""
    time.sleep(1.0)  # noqa: ASYNC251 - the point: it blocks the event loop
    return '<event topic="LOOP_COMPLETE">done late</event>'


@pytest.mark.parametrize(
    ("hat_timeout", "runtime", "reason", "iterations"),
    [(0.3, 3600.0, "max_consecutive_failures", 1), (600.0, 0.3, "max_runtime", 0)],
)
async def test_a_result_back_late_from_a_blocked_loop_is_not_committed_as_ok(
    tmp_path: Path, hat_timeout: float, runtime: float, reason: str, iterations: int
) -> None:
    """A call that returns past its timeout is a timeout; past max_runtime_seconds, it is
    cut as the runtime ends (nothing of it committed): never a late success."""
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "timeout_seconds": hat_timeout}},
        folder=tmp_path,
        max_consecutive_failures=1,
        max_runtime_seconds=runtime,
    )
    backend = PythonBackend(f"{__name__}:blocks_the_loop")
    summary, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path)
    assert summary.reason == reason
    assert summary.iterations == iterations


def returns_bytes(ctx: HatContext) -> bytes:
    return b'<event topic="build.done">bytes</event>'


async def test_a_hat_that_returns_something_else_than_text_fails_and_says_so(
    tmp_path: Path,
) -> None:
    """Output is text: bytes (or a dict) is not turned into its repr, tags and all."""
    result = await PythonBackend(f"{__name__}:returns_bytes").run(request(tmp_path))
    assert not result.ok
    assert (
        result.reason
        == "the function returned bytes: a python hat returns its output text (str) or None"
    )


def test_a_module_that_raises_as_it_is_imported_cannot_run_at_all(tmp_path: Path) -> None:
    """Not a failed iteration after another with a traceback each: the run stops at once
    (backend_unavailable), naming the module and what it raised."""
    (tmp_path / "broken_on_import.py").write_text("1 / 0\n")
    with pytest.raises(BackendUnavailable, match=r"'broken_on_import'.*ZeroDivisionError"):
        resolve_target("broken_on_import:f", tmp_path)
