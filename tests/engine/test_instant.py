"""Instant backends: cancellation lands at once and other tasks still run."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.bus import EventBus
from loop.emit import append_event
from loop.events import Event
from loop.extensions import Extension
from loop.records import IterationEnd
from loop.testing import make_config, run_hats, scripted, tag

N = 3000


def ping_pong(tmp_path: Path, n: int = N) -> tuple[object, dict[str, object]]:
    config = make_config(
        {
            "ping": {"triggers": ["task.start", "pong.x"], "publishes": ["ping.x"]},
            "pong": {"triggers": ["ping.x"], "publishes": ["pong.x"]},
        },
        folder=tmp_path,
        max_iterations=n,
        stale_threshold=n + 1,
        durable=False,
    )
    backends = {
        "ping": scripted(*(tag("ping.x", str(k)) for k in range(n))),
        "pong": scripted(*(tag("pong.x", str(k)) for k in range(n))),
    }
    assert all(b.instant for b in backends.values())
    return config, backends


class CancelAt(Extension):
    """Cancels a scope when iteration ``at`` is done; remembers the last iteration seen."""

    def __init__(self, at: int, scope: anyio.CancelScope) -> None:
        self.at = at
        self.scope = scope
        self.last = 0

    def attach(self, bus: EventBus) -> None:
        """Watch the iterations."""
        bus.subscribe("loop.iteration.done", self._done)

    def _done(self, event: Event) -> None:
        assert isinstance(event.payload, IterationEnd)
        self.last = event.payload.iteration
        if self.last == self.at:
            self.scope.cancel()


@pytest.mark.parametrize("at", [1, 7, 100])
async def test_cancellation_lands_before_the_next_instant_iteration(
    tmp_path: Path, at: int
) -> None:
    """A scope cancelled by a subscriber stops a run of instant hats before one more runs."""
    config, backends = ping_pong(tmp_path)
    with anyio.CancelScope() as scope:
        stopper = CancelAt(at, scope)
        await run_hats(config, backends, workdir=tmp_path, extra=[stopper])  # type: ignore[arg-type]
    assert scope.cancelled_caught
    assert stopper.last == at


async def test_other_tasks_run_while_instant_hats_loop(tmp_path: Path) -> None:
    """The engine yields to the event loop, so a timer elsewhere fires mid-run."""
    config, backends = ping_pong(tmp_path)
    seen_at: list[int] = []
    progress = CancelAt(-1, anyio.CancelScope())  # never cancels; tracks the iteration
    done = anyio.Event()

    async def ticker() -> None:  # takes a turn whenever the event loop gives it one
        while not done.is_set():
            seen_at.append(progress.last)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        summary, _ = await run_hats(config, backends, workdir=tmp_path, extra=[progress])  # type: ignore[arg-type]
        done.set()
    assert summary.iterations == N
    assert any(0 < last < N for last in seen_at), "the ticker never ran mid-run"


class BrokenFlush(Extension):
    """An extension whose buffer cannot be written."""

    def __init__(self) -> None:
        self.calls = 0

    def flush(self) -> None:
        """Fail, every time."""
        self.calls += 1
        raise OSError(5, "Input/output error")


class Waiting(Backend):
    """A scripted backend that waits (so the engine flushes before it runs)."""

    kind = "waiting"

    def __init__(self, outputs: list[str]) -> None:
        self.inner = scripted(*outputs)

    async def run(self, request: BackendRequest) -> BackendResult:
        """Yield once, then answer like the scripted backend."""
        await anyio.lowlevel.checkpoint()
        return await self.inner.run(request)


async def test_a_failing_flush_is_logged_and_the_loop_goes_on(tmp_path: Path) -> None:
    """Flushing is the extension's business: an error there never stops the loop."""
    config, _ = ping_pong(tmp_path, n=6)
    backends = {
        "ping": Waiting([tag("ping.x", str(k)) for k in range(6)]),
        "pong": Waiting([tag("pong.x", str(k)) for k in range(6)]),
    }
    broken = BrokenFlush()
    summary, _ = await run_hats(config, backends, workdir=tmp_path, extra=[broken])  # type: ignore[arg-type]
    assert (summary.reason, summary.iterations) == ("max_iterations", 6)
    assert broken.calls >= 6  # before each hat that waits


class Silent(Backend):
    """In-process, answers with a tag, and says it writes no events file."""

    kind = "silent"
    uses_files = False
    writes_events = False

    def __init__(self) -> None:
        self.files: list[Path | None] = []

    async def run(self, request: BackendRequest) -> BackendResult:
        """Note the request's events file; publish through the output."""
        self.files.append(request.events_file)
        return BackendResult(output=tag("pong.x", str(request.activation)))


class Emitter(Backend):
    """In-process, publishes through the events file only (``writes_events`` default)."""

    kind = "emitter"
    uses_files = False

    def __init__(self) -> None:
        self.files: list[Path | None] = []

    async def run(self, request: BackendRequest) -> BackendResult:
        """Append one event to the file the engine names; say nothing."""
        self.files.append(request.events_file)
        assert request.events_file is not None
        append_event(
            request.events_file,
            "ping.x",
            str(request.activation),
            None,
            root=request.root,
            create_folders=True,
        )
        return BackendResult(output="")


async def test_only_a_backend_that_writes_events_is_given_an_events_file(tmp_path: Path) -> None:
    """``writes_events``: the engine names the attempt's events file (and reads it after the
    call) for a backend that may write one; one that says it writes none is given none."""
    config, _ = ping_pong(tmp_path, n=4)
    ping, pong = Emitter(), Silent()
    summary, _ = await run_hats(config, {"ping": ping, "pong": pong}, workdir=tmp_path)
    assert (summary.reason, summary.iterations) == ("max_iterations", 4)
    assert pong.files == [None, None]
    session_dir = Path(summary.session_dir)
    assert [f.relative_to(session_dir).parts for f in ping.files if f is not None] == [
        ("iterations", "000001", "attempt-1", "events.jsonl"),
        ("iterations", "000003", "attempt-1", "events.jsonl"),
    ]


class Warned(Backend):
    """In-process; its CLI "warned" of something, and it publishes nothing."""

    kind = "warned"
    uses_files = False
    writes_events = False

    async def run(self, request: BackendRequest) -> BackendResult:
        """Answer with no event and a note."""
        return BackendResult(output="", notes=("warned: Loop detected, stopping execution",))


async def test_a_backends_notes_are_the_iterations_notes(tmp_path: Path) -> None:
    """What the agent's CLI warned of goes into the iteration's notes (journaled, shown by
    ``show`` and the log), beside the engine's own reason for the outcome."""
    config, _ = ping_pong(tmp_path, n=1)
    seen: list[IterationEnd] = []

    class Keep(Extension):
        def attach(self, bus: EventBus) -> None:
            bus.subscribe("loop.iteration.done", lambda e: seen.append(e.payload))

    summary, _ = await run_hats(
        config,  # type: ignore[arg-type]
        {"ping": Warned(), "pong": Warned()},
        workdir=tmp_path,
        extra=[Keep()],
    )
    assert summary.iterations == 1
    assert seen[0].reason == "no events emitted"
    assert seen[0].notes == ("warned: Loop detected, stopping execution",)
