"""run_process: output files keep what a child wrote before exiting; nothing a child
starts outlives it; a process is signalled only if it is still the one found."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loop.backends._process import run_process
from loop.backends._procs import (
    TAG_VARIABLE,
    Mark,
    SpawnedProcess,
    boot_id,
    pid_window,
    read_stat,
    stop_processes,
)

# Node queues a pipe write it cannot finish and drops the queue at process.exit.
NODE_WRITES_AND_EXITS = 'process.stdout.write("x".repeat(3e6) + "END"); process.exit(0)'


async def test_output_files_keep_what_node_wrote_just_before_exiting() -> None:
    """3 MB written, then process.exit: through a pipe most of it is lost; a file keeps it."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    proc = await run_process([node, "-e", NODE_WRITES_AND_EXITS], output_files=True)
    assert proc.returncode == 0
    assert len(proc.stdout) == 3_000_003 and proc.stdout.endswith(b"END")
    assert not proc.truncated


async def test_output_files_keep_the_cap_stdin_and_stderr() -> None:
    """The cap cuts each stream and says so; stdin still reaches the child."""
    code = "import sys; d = sys.stdin.read(); print(d * 50, end=''); print('oops', file=sys.stderr)"
    proc = await run_process(
        [sys.executable, "-c", code], stdin=b"abc", max_output_bytes=100, output_files=True
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"abc" * 33 + b"a", b"oops\n")
    assert proc.truncated


async def test_output_files_keep_the_output_of_a_timed_out_child() -> None:
    """At the timeout the group is stopped and what it wrote so far is returned."""
    proc = await run_process(
        ["sh", "-c", "echo partial; exec sleep 60"], timeout=3, output_files=True
    )
    assert (proc.timed_out, proc.stdout) == (True, b"partial\n")


# -- what a child leaves behind -----------------------------------------------------------

# A grandchild that leaves the child's process group (setsid), keeps the output open and
# writes to it until it is stopped: it writes "<pid> <start ticks>" to argv[1] first.
GRANDCHILD = """
import os, sys, time
os.setsid()
start = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {start}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    print("tick", flush=True)
    time.sleep(0.05)
"""

# The child: starts the grandchild (with its own environment, or an empty one when
# argv[2] is "bare"), waits until it runs, says it is done and exits 0.
CHILD = """
import os, subprocess, sys, time
env = {"PATH": os.environ["PATH"]} if sys.argv[2] == "bare" else None
subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[1]], env=env)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print("LOOP_COMPLETE", flush=True)
"""


def _gone(pid_file: Path) -> bool:
    """Whether the process named in ``pid_file`` is gone (or a zombie, or another one)."""
    pid, start = (int(x) for x in pid_file.read_text().split())
    st = read_stat(pid)
    return st is None or st.state == "Z" or st.start_ticks != start


def _stop(pid_file: Path) -> None:
    if pid_file.exists() and not _gone(pid_file):
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)


async def test_a_grandchild_that_left_the_group_is_stopped_when_the_child_exits(
    tmp_path: Path,
) -> None:
    """The child exits 0; its setsid grandchild still holds the output: the run does not
    wait for the timeout, keeps the child's output, and the grandchild is stopped."""
    pid_file = tmp_path / "grandchild.pid"
    try:
        proc = await run_process(
            [sys.executable, "-c", CHILD, str(pid_file), "tagged", GRANDCHILD], timeout=120
        )
        assert (proc.returncode, proc.timed_out) == (0, False)
        assert b"LOOP_COMPLETE\n" in proc.stdout
        assert _gone(pid_file)
    finally:
        _stop(pid_file)


async def test_an_untracked_holder_of_the_output_cannot_keep_the_run_waiting(
    tmp_path: Path,
) -> None:
    """A grandchild that also cleared its environment is not found (documented), but the
    run stops reading the output a short grace after the child exited: no timeout."""
    pid_file = tmp_path / "grandchild.pid"
    try:
        proc = await run_process(
            [sys.executable, "-c", CHILD, str(pid_file), "bare", GRANDCHILD], timeout=120
        )
        assert (proc.returncode, proc.timed_out) == (0, False)
        assert b"LOOP_COMPLETE\n" in proc.stdout
    finally:
        _stop(pid_file)


async def test_a_timed_out_child_takes_what_it_started_along(tmp_path: Path) -> None:
    """At the timeout the child's group is stopped, and so is the grandchild that left it."""
    pid_file = tmp_path / "grandchild.pid"
    child = CHILD + "\ntime.sleep(600)\n"
    try:
        proc = await run_process(
            [sys.executable, "-c", child, str(pid_file), "tagged", GRANDCHILD], timeout=3
        )
        assert proc.timed_out
        assert _gone(pid_file)
    finally:
        _stop(pid_file)


async def test_on_start_names_the_child_and_its_tag(tmp_path: Path) -> None:
    """on_start gets the child's pid, group and start time; the tag is in its environment.

    The child waits for on_start before it ends: one that ended and was reaped before
    it could be read has no start time (``None``, by design), which a loaded machine
    would otherwise make happen here."""
    seen: list[SpawnedProcess] = []
    started = tmp_path / "on_start"
    code = (
        f"import os, time\nwhile not os.path.exists({str(started)!r}): time.sleep(0.01)\n"
        f"print(os.environ['{TAG_VARIABLE}'], os.getpgid(0))"
    )

    def on_start(child: SpawnedProcess) -> None:
        seen.append(child)
        started.touch()

    proc = await run_process([sys.executable, "-c", code], on_start=on_start)
    (child,) = seen
    tag, pgid = proc.stdout.decode().split()
    assert (tag, int(pgid)) == (child.tag, child.pgid)
    assert child.pgid == child.pid and child.start_ticks is not None
    assert child.boot_id == boot_id() != ""


async def test_a_process_is_signalled_only_if_it_is_still_the_one_found() -> None:
    """A pid whose start time is not the one found (a reused pid) is never signalled."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        st = read_stat(sleeper.pid)
        assert st is not None
        other = dataclasses.replace(st, start_ticks=st.start_ticks - 1)
        assert await stop_processes(lambda: [other], grace=0, wait=1) == []
        assert sleeper.poll() is None
        assert await stop_processes(lambda: [st], grace=1, wait=1) == [sleeper.pid]
        assert sleeper.wait(timeout=10) == -signal.SIGTERM
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_pid_window_follows_the_counter_around_the_wrap() -> None:
    """New pids lie after the last one handed out before, around the wrap; after as many
    forks as there are pids, any pid may be new."""
    window = pid_window(Mark(1000, 50), Mark(1010, 55), 32768)
    assert window is not None
    assert [p for p in (999, 1000, 1001, 1010, 1011) if window(p)] == [1001, 1010]
    wrapped = pid_window(Mark(32700, 50), Mark(400, 200), 32768)
    assert wrapped is not None
    assert [p for p in (300, 400, 401, 32700, 32701) if wrapped(p)] == [300, 400, 32701]
    assert pid_window(Mark(1000, 50), Mark(1010, 50 + 32768), 32768) is None
    assert pid_window(Mark(None, 50), Mark(1010, 55), 32768) is None
