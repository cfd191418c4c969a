"""A child's output watched while it runs: lines as they arrive, from pipes and from
output files, and the idle timeout that stops a silent child and its whole group."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest

from loop.backends._output import MAX_LINE_BYTES, OutputWatch
from loop.backends._process import ProcessResult, run_process, stop_reason
from loop.backends.base import AgentOutput, BackendRequest
from loop.backends.command import CommandBackend

# The child prints a line, then waits for ``release`` to exist (bounded), then prints
# another: if lines were handed on only at the end, it would never be released.
WAITS_FOR_RELEASE = """
import pathlib, sys, time
print("first", flush=True)
for _ in range(1200):
    if pathlib.Path(sys.argv[1]).exists():
        break
    time.sleep(0.05)
else:
    sys.exit(9)
print("second")
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _gone(pid: int) -> bool:
    """Whether ``pid`` ends (a signal is delivered a moment after it is sent: a busy
    machine may not have run the process since)."""
    deadline = time.monotonic() + 30
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- the watch itself -----------------------------------------------------------------------


async def test_lines_are_split_across_chunks_and_the_last_one_handed_on_at_the_end() -> None:
    """Chunks cut anywhere make whole lines (CRLF too); an unended last line comes with
    finish(); a line over the cap is dropped, never half handed on."""
    lines: list[str] = []
    ended: list[bool] = []
    watch = OutputWatch(on_line=lines.append, on_end=lambda: ended.append(True))
    for chunk in (b"ab", b"c\r\nde\n", b"x" * (MAX_LINE_BYTES + 1), b"y\nlast"):
        watch.stdout(chunk)
    watch.stderr(b"not a line of stdout\n")
    assert lines == ["abc", "de"]
    watch.finish()
    assert lines == ["abc", "de", "last"] and ended == [True]


async def test_an_observer_that_raises_never_breaks_the_run() -> None:
    """The run goes on; the observer's failure is logged once."""
    calls: list[str] = []

    def broken(line: str) -> None:
        calls.append(line)
        raise RuntimeError("observer bug")

    watch = OutputWatch(on_line=broken)
    proc = await run_process(
        [sys.executable, "-c", "print('a'); print('b')"], watch=watch, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (0, b"a\nb\n")
    assert calls == ["a", "b"]


@pytest.mark.parametrize("output_files", [False, True], ids=["pipes", "files"])
async def test_lines_arrive_while_the_child_runs(tmp_path: Path, output_files: bool) -> None:
    """The first line reaches the watch while the child still runs (it is released only
    then), from a pipe or by following an output file."""
    release = tmp_path / "release"
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if line == "first":
            release.touch()

    proc = await run_process(
        [sys.executable, "-c", WAITS_FOR_RELEASE, str(release)],
        watch=OutputWatch(on_line=on_line),
        output_files=output_files,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert seen == ["first", "second"]
    assert proc.stdout == b"first\nsecond\n"


# -- the idle timeout -----------------------------------------------------------------------


@pytest.mark.parametrize("output_files", [False, True], ids=["pipes", "files"])
async def test_a_silent_child_is_stopped_with_its_whole_group(
    tmp_path: Path, output_files: bool
) -> None:
    """It printed, then went silent: after idle_timeout its group is stopped (a
    grandchild too), what it printed is kept, and the reason says idle_timeout."""
    pid_file = tmp_path / "grandchild"
    script = f'echo started; sleep 300 & echo $! > {pid_file}; echo "waiting"; wait'
    proc = await run_process(
        ["sh", "-c", script],
        watch=OutputWatch(idle_timeout=1.5),
        output_files=output_files,
        timeout=120,
    )
    assert proc.idle_timeout == 1.5 and not proc.timed_out
    assert proc.stdout == b"started\nwaiting\n"
    assert stop_reason(proc, 120) == "idle_timeout: no output for 1.5s"
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("output_files", [False, True], ids=["pipes", "files"])
async def test_a_child_that_keeps_talking_is_not_idle(output_files: bool) -> None:
    """Output on stderr counts as much as stdout: a child writing every 0.2 s for longer
    than the idle limit runs to its end."""
    code = (
        "import sys, time\n"
        "for i in range(20):\n"
        "    print(i, file=sys.stderr if i % 2 else sys.stdout, flush=True)\n"
        "    time.sleep(0.2)\n"
    )
    proc = await run_process(
        [sys.executable, "-c", code],
        watch=OutputWatch(idle_timeout=2.5),
        output_files=output_files,
        timeout=120,
    )
    assert (proc.returncode, proc.idle_timeout, proc.timed_out) == (0, None, False)


def test_stop_reason_names_the_limit_that_stopped_the_child() -> None:
    """idle_timeout, the iteration's timeout, or none."""
    ran = ProcessResult(returncode=0, stdout=b"", stderr=b"")
    assert stop_reason(ran, 10) is None
    timed = ProcessResult(returncode=None, stdout=b"", stderr=b"", timed_out=True)
    assert stop_reason(timed, 10) == "timeout after 10s"
    assert stop_reason(timed, None) == "timeout"
    idle = ProcessResult(returncode=None, stdout=b"", stderr=b"", idle_timeout=30)
    assert stop_reason(idle, 10) == "idle_timeout: no output for 30s"


# -- through the backend seam ---------------------------------------------------------------


def _request(tmp_path: Path, **fields: object) -> BackendRequest:
    folder = tmp_path / "it"
    folder.mkdir(exist_ok=True)
    base: dict[str, object] = {
        "hat": "worker",
        "prompt": "go",
        "iteration": 4,
        "session_id": "s",
        "activation": 0,
        "events_file": folder / "events.jsonl",
        "workdir": tmp_path,
    }
    return BackendRequest(**{**base, **fields})  # type: ignore[arg-type]


async def test_the_command_backend_reports_its_lines_as_the_hats_output(tmp_path: Path) -> None:
    """request.observer gets each stdout line, with the hat and the iteration."""
    release = tmp_path / "release"
    seen: list[AgentOutput] = []

    def observer(piece: AgentOutput) -> None:
        seen.append(piece)
        release.touch()

    backend = CommandBackend([sys.executable, "-c", WAITS_FOR_RELEASE, str(release)])
    result = await backend.run(_request(tmp_path, observer=observer))
    assert result.ok, result.reason
    assert seen == [
        AgentOutput(hat="worker", iteration=4, kind="line", text="first"),
        AgentOutput(hat="worker", iteration=4, kind="line", text="second"),
    ]


async def test_the_command_backend_fails_a_silent_agent_with_idle_timeout(tmp_path: Path) -> None:
    """idle_timeout_seconds on the request: the iteration fails, reason idle_timeout,
    keeping what the agent printed."""
    backend = CommandBackend(["sh", "-c", "echo thinking; exec sleep 300"])
    with anyio.fail_after(60):
        result = await backend.run(_request(tmp_path, idle_timeout_seconds=1))
    assert not result.ok
    assert result.reason == "idle_timeout: no output for 1s"
    assert result.output == "thinking\n"


async def test_without_an_observer_or_a_limit_nothing_watches(tmp_path: Path) -> None:
    """The common case costs nothing: no watch at all."""
    backend = CommandBackend(["true"])
    assert backend.watch(_request(tmp_path)) is None
    assert backend.watch(_request(tmp_path, idle_timeout_seconds=5)) is not None
