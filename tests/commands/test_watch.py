"""``watch`` and ``status --follow`` on real sessions: run by another process, waited for
before they start, followed to their end, already over, killed, and on a terminal."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop.engine.journal import read_journal
from loop.records import Wait
from tests.commands.helpers import waited_session, wave_toml
from tests.commands.terminal import Terminal

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
for _name in ("CI", "NO_COLOR"):
    ENV.pop(_name, None)
ENV["TERM"] = "xterm-256color"

# The hat emits an event, then waits for the test to create ``release`` (it gives up
# after a minute), then completes the loop, or (``stall``) asks for more work.
WORKER = r"""
cat > /dev/null
"$LOOP_PYTHON" -m loop emit work.note "hello from the hat"
n=0
while [ ! -e release ]; do
  n=$((n + 1)); [ "$n" -gt 1200 ] && exit 9
  sleep 0.05
done
if [ -e stall ]; then echo '<event topic="work.more">again</event>'; exit 0; fi
echo '<event topic="LOOP_COMPLETE">done</event>'
"""

CONFIG = """\
[loop]
prompt = "count"
max_iterations = 2
durable = false
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.worker]
triggers = ["task.start", "work.more"]
publishes = ["work.note", "work.more", "LOOP_COMPLETE"]
backend = {{ type = "command", command = ["sh", "-c", {script}] }}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A one-hat loop whose hat emits ``work.note`` and waits for ``release``."""
    (tmp_path / "loop.toml").write_text(CONFIG.format(script=json.dumps(WORKER)), encoding="utf-8")
    return tmp_path


class Child:
    """``python -m loop ARGS`` with its output read as it comes."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loop", *args],
            cwd=cwd,
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out = b""
        self.err = b""

    def until(self, text: str, *, stream: str = "out", timeout: float = 60) -> None:
        """Read until ``text`` shows on stdout (or stderr)."""
        pipe = self.proc.stdout if stream == "out" else self.proc.stderr
        assert pipe is not None
        deadline = time.monotonic() + timeout
        while text.encode() not in (self.out if stream == "out" else self.err):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([pipe], [], [], max(0.0, left))
            data = os.read(pipe.fileno(), 65536) if ready else b""
            if left <= 0 or (ready and not data):
                raise AssertionError(f"{text!r} never showed: {self.out!r} {self.err!r}")
            if stream == "out":
                self.out += data
            else:
                self.err += data

    def finish(self, timeout: float = 120) -> int:
        """Wait for the end; the exit code (all output read)."""
        out, err = self.proc.communicate(timeout=timeout)
        self.out += out
        self.err += err
        return self.proc.returncode

    @property
    def lines(self) -> list[str]:
        """stdout's lines."""
        return self.out.decode().splitlines()


def _loop(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_watch_waits_for_a_named_session_and_follows_it_to_its_end(project: Path) -> None:
    """Started before the session exists, watch waits for it, shows what the running hat
    emits (from its iteration folder), its iteration, and exits with the run's code."""
    watch = Child("watch", "s1", cwd=project)
    try:
        watch.until("waiting for session s1 to start", stream="err")
        run = Child("run", "-q", "--session-id", "s1", cwd=project)
        watch.until("#1 worker emitted work.note: hello from the hat")
        (project / "release").touch()
        assert run.finish() == 0, run.err
        assert watch.finish() == 0, watch.err
    finally:
        (project / "release").touch()
    lines = watch.lines
    assert lines[0].startswith("session s1 · started ") and lines[0].endswith("1 hat(s): worker")
    assert "  #1 worker running" in lines
    assert any(line.startswith("  #1 worker · ok · ") for line in lines)
    assert lines[-1].startswith("session completed after 1 iteration(s) in ")
    assert lines[-1].endswith("(exit 0)")


def test_watch_of_a_session_already_over_shows_it_and_returns_its_code(project: Path) -> None:
    """A finished session: its iterations and its end at once, with its exit code (1: its
    work.note reached no hat); status --follow does the same; --json gives the journal's
    records."""
    (project / "release").touch()
    (project / "stall").touch()
    assert _loop("run", "-q", "--session-id", "over", cwd=project).returncode == 1
    for args in (("watch",), ("watch", "over"), ("status", "--follow", "over")):
        res = _loop(*args, cwd=project)
        assert res.returncode == 1, (args, res.stderr)
        lines = res.stdout.splitlines()
        assert [line.split(" · ")[:3] for line in lines if line.startswith("  #")] == [
            ["  #1 worker", "ok", lines[1].split(" · ")[2]]
        ]
        assert "events work.note, work.more" in lines[1]
        assert "running" not in res.stdout  # nothing runs in a session that is over
        assert lines[-1].startswith("session unrouted_event after 1 iteration(s)")
    res = _loop("watch", "--json", cwd=project)
    kinds = [json.loads(line)["kind"] for line in res.stdout.splitlines()]
    assert kinds == [
        "session.start",
        "iteration.start",
        "child.start",  # the hat's process: a resume stops it if it outlived its run
        "iteration.end",
        "session.end",
    ]
    assert res.returncode == 1


def test_watch_says_each_limit_waited_out(tmp_path: Path) -> None:
    """A session whose planner waited out two rate limits: a line for each wait, where it
    came, with how long, until when and what the CLI said, before the planner's line."""
    journal = waited_session(tmp_path)
    waits = [r for r in read_journal(journal).records if isinstance(r, Wait)]
    res = _loop("watch", "w", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    said = [
        f"  #1 planner waiting out a rate limit for {w.seconds:.2f}s, until "
        f"{time.strftime('%H:%M:%S', time.localtime(w.until))}: 429 Too Many Requests"
        for w in waits
    ]
    assert lines[1:3] == said
    assert lines[3].startswith("  #1 planner · ok · ")


def test_a_wait_in_progress_is_counted_down_on_the_live_line(tmp_path: Path) -> None:
    """A wait whose deadline is ahead: the live line says for what and until when; one
    whose deadline has passed (a session shown afterwards) leaves the line as it was."""
    from loop.commands.live import LiveView
    from loop.commands.watch import _Follower
    from loop.engine.session_dir import SessionPaths

    view = LiveView(stream="stdout", live=False, colors=False)
    follower = _Follower(SessionPaths(tmp_path, "w"), view)
    now = time.time()
    past = Wait(
        iteration=1,
        hat="planner",
        limit="rate_limit",
        message="429",
        attempt=1,
        seconds=30.0,
        until=now - 5,
        ts=now - 35,
    )
    follower._take(past)
    assert view.status.waiting is None
    ahead = Wait(**{**past.__dict__, "attempt": 2, "until": now + 60, "ts": now})
    follower._take(ahead)
    assert view.status.waiting is not None
    assert (view.status.waiting.reason, view.status.waiting.until) == ("rate limit", now + 60)


def test_watch_of_a_killed_session_says_so_and_exits_130(project: Path) -> None:
    """The run is killed (-9) mid-iteration: watch sees it let go of the session without
    an end, says how to resume, and exits 130 (interrupted)."""
    run = Child("run", "-q", "--session-id", "k", cwd=project)
    watch = Child("watch", "k", cwd=project)
    try:
        watch.until("#1 worker emitted work.note")
        run.proc.send_signal(signal.SIGKILL)
        run.finish()
        assert watch.finish() == 130, watch.err
    finally:
        (project / "release").touch()  # the orphaned hat ends too
    assert "stopped without an end" in watch.out.decode()
    assert "run --resume k" in watch.out.decode()


def test_no_session_at_all_or_an_empty_journal_is_an_error(
    project: Path,
) -> None:
    """watch without an id and without any session, or of a journal without a record:
    exit 2, one line."""
    res = _loop("watch", cwd=project)
    assert res.returncode == 2
    assert res.stderr.startswith("error: no session in ")
    empty = project / ".loop" / "sessions" / "empty"
    empty.mkdir(parents=True)
    (empty / "journal.jsonl").touch()  # a run that stopped before its first record
    res = _loop("watch", "empty", cwd=project)
    assert (res.returncode, res.stderr.count("\n")) == (2, 1)
    assert "no session.start record" in res.stderr


def test_watch_on_a_terminal_draws_the_live_line(project: Path) -> None:
    """On a terminal watch draws the status line while the hat runs, then erases it."""
    term = Terminal("watch", "t1", cwd=project, env=ENV)
    try:
        term.expect("waiting for session t1")
        run = Child("run", "-q", "--session-id", "t1", cwd=project)
        term.expect(r"iteration 1 · worker · \d+:\d\d")
        (project / "release").touch()
        assert run.finish() == 0
        assert term.finish() == 0
    finally:
        (project / "release").touch()
    assert "session completed after 1 iteration(s)" in term.plain


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_watch_stopped_by_a_signal_gives_the_terminal_back(
    project: Path, signum: signal.Signals
) -> None:
    """SIGTERM stops watch as Ctrl-C does: the status line erased, the cursor shown again,
    ``error: interrupted``, exit 130; the run it followed goes on."""
    run = Child("run", "-q", "--session-id", "t2", cwd=project)
    term = Terminal("watch", "t2", cwd=project, env=ENV)
    try:
        term.expect(r"iteration 1 · worker · \d+:\d\d")
        term.proc.send_signal(signum)
        assert term.finish() == 130
        assert run.proc.poll() is None  # the run is not watch's to stop
    finally:
        (project / "release").touch()
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
        ran = run.finish()
    assert ran == 0
    assert term.text.count("\x1b[?25l") == term.text.count("\x1b[?25h") == 1
    assert term.text.rstrip().endswith("error: interrupted")
    last_frame = term.text.rindex("iteration 1 · worker")
    assert "\x1b[2K" in term.text[last_frame : term.text.rindex("error: interrupted")]


# A fan-out to three reviewers at once: each emits its verdict early, then waits for
# ``release-N`` (its own) or ``release`` (all of them), bounded to a minute.
REVIEWER = r"""
cat > /dev/null
"$LOOP_PYTHON" -m loop emit review.done "early verdict from $LOOP_ITERATION"
n=0
while [ ! -e "release-$LOOP_ITERATION" ] && [ ! -e release ]; do
  n=$((n + 1)); [ "$n" -gt 1200 ] && exit 9
  sleep 0.05
done
"""


def test_watch_follows_every_activation_in_flight(tmp_path: Path) -> None:
    """Three reviewers run at once: watch shows what each one emits as it does, and one
    started after #2 committed says #3 and #4 are running and follows their events; each
    activation's events stop being followed at its own end."""
    scripts = {
        "coordinator": 'cat >/dev/null; "$LOOP_PYTHON" -m loop emit review.perspective '
        "--payloads security performance docs",
        "reviewer": REVIEWER,
        "synthesizer": "cat >/dev/null; echo '<event topic=\"LOOP_COMPLETE\">ok</event>'",
    }
    config = wave_toml(**scripts, durable=False)
    (tmp_path / "loop.toml").write_text(config, encoding="utf-8")
    watch = Child("watch", "w", cwd=tmp_path)
    late: Child | None = None
    try:
        watch.until("waiting for session w to start", stream="err")
        run = Child("run", "-q", "--session-id", "w", cwd=tmp_path)
        for n in (2, 3, 4):
            watch.until(f"  #{n} reviewer emitted review.done: early verdict from {n}")
        (tmp_path / "release-2").touch()
        watch.until("  #2 reviewer · ok · ")
        late = Child("watch", "w", cwd=tmp_path)
        for n in (3, 4):
            late.until(f"  #{n} reviewer emitted review.done: early verdict from {n}")
        (tmp_path / "release").touch()
        assert run.finish() == 0, run.err
        assert watch.finish() == 0, watch.err
        assert late.finish() == 0, late.err
    finally:
        (tmp_path / "release").touch()
    for n in (2, 3, 4):
        assert f"  #{n} reviewer running" in watch.lines
        assert (
            watch.lines.count(f"  #{n} reviewer emitted review.done: early verdict from {n}") == 1
        )
    heads = [line.split(" · ")[0] for line in late.lines if line.startswith("  #")]
    assert heads[:4] == [
        "  #1 coordinator",
        "  #2 reviewer",
        "  #3 reviewer running",
        "  #4 reviewer running",
    ]


def test_an_iteration_line_counts_hatloop_tool_calls_by_that_name() -> None:
    """The count is of hatloop's tool calls (the task, theme and experience tools), not of
    every tool the agent used (its shell, its editor): the line says so."""
    from loop.commands.watch import _iteration_line
    from loop.records import IterationEnd, ToolCall

    end = IterationEnd(
        iteration=2,
        hat="builder",
        backend="claude",
        backend_ok=True,
        status="ok",
        prompt="",
        output="",
        events=(),
        duration=1.5,
        elapsed=3.0,
        ts=0.0,
        tool_calls=(ToolCall(tool="theme_heartbeat", channel="loop", input={}, ts=0.0),),
    )
    assert _iteration_line(end) == "  #2 builder · ok · 1.50s · 1 hatloop tool call(s)"
