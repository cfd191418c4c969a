"""The live view as a person sees it: the status line on a terminal (a pseudo-terminal
here), never where it cannot be redrawn; ``-v``; the log format off a terminal."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop._log import live_line_allowed, log_format, use_colors
from loop.bus import EventBus
from loop.commands import live as live_mod
from loop.commands.live import LiveExtension, LiveStatus, LiveView, clock_text, status_text
from loop.engine.lifecycle import Waiting, waiting_event
from loop.engine.state import HatUsage
from loop.records import IterationEnd
from loop.testing import make_config, run_hats, scripted, tag
from tests.commands.helpers import wave_toml
from tests.commands.terminal import Terminal
from tests.engine.test_live_events import HATS, Paid

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
for _name in ("CI", "NO_COLOR"):
    ENV.pop(_name, None)
ENV["TERM"] = "xterm-256color"

# The hat prints a line, then waits for the test to create ``release`` (bounded: it gives
# up after a minute and fails), then completes the loop.
WORKER = r"""
cat > /dev/null
echo "step one"
n=0
while [ ! -e release ]; do
  n=$((n + 1)); [ "$n" -gt 1200 ] && exit 9
  sleep 0.05
done
echo "step two"
echo '<event topic="LOOP_COMPLETE">done</event>'
"""

CONFIG = """\
[loop]
prompt = "count"
max_iterations = 3
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.worker]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "command", command = ["sh", "-c", {script}] }}
"""

STATUS = r"iteration 1 · worker · \d+:\d\d"  # what the status line says while it runs
HIDE_CURSOR = b"\x1b[?25l"  # the live display hides the cursor while it draws


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a one-hat loop whose hat waits for ``release``."""
    (tmp_path / "loop.toml").write_text(CONFIG.format(script=json.dumps(WORKER)), encoding="utf-8")
    return tmp_path


# -- pure: the decisions and the line's text ------------------------------------------------


class _Tty:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_line_needs_a_terminal_that_redraws_and_colour_left_on() -> None:
    """A terminal: yes; a pipe, TERM=dumb, CI, NO_COLOR or --color never: no;
    --color always wins over NO_COLOR, never over a pipe or a dumb terminal."""
    tty, pipe = _Tty(True), _Tty(False)
    env = {"TERM": "xterm"}
    assert live_line_allowed("auto", tty, env)  # type: ignore[arg-type]
    assert not live_line_allowed("auto", pipe, env)  # type: ignore[arg-type]
    assert not live_line_allowed("never", tty, env)  # type: ignore[arg-type]
    for extra in ({"TERM": "dumb"}, {"CI": "true"}, {"NO_COLOR": "1"}):
        assert not live_line_allowed("auto", tty, {**env, **extra})  # type: ignore[arg-type]
    assert live_line_allowed("always", tty, {**env, "NO_COLOR": "1"})  # type: ignore[arg-type]
    assert not live_line_allowed("always", pipe, env)  # type: ignore[arg-type]
    assert not live_line_allowed("always", tty, {"TERM": "dumb"})  # type: ignore[arg-type]


def test_colours_follow_the_flag_then_no_color_dumb_terminals_and_pipes() -> None:
    """auto: a terminal without NO_COLOR or TERM=dumb; always and never as they say."""
    tty, pipe = _Tty(True), _Tty(False)
    assert use_colors("auto", tty, {})  # type: ignore[arg-type]
    assert not use_colors("auto", pipe, {})  # type: ignore[arg-type]
    assert not use_colors("auto", tty, {"NO_COLOR": "1"})  # type: ignore[arg-type]
    assert not use_colors("auto", tty, {"TERM": "dumb"})  # type: ignore[arg-type]
    assert use_colors("always", pipe, {"NO_COLOR": "1"})  # type: ignore[arg-type]
    assert not use_colors("never", tty, {})  # type: ignore[arg-type]


def test_log_lines_are_for_people_unless_json_is_asked_for() -> None:
    """auto is console, in CI too; --log-format or HATLOOP_LOG_FORMAT=json ask for JSON."""
    assert log_format("auto", {}) == "console"
    assert log_format("auto", {"CI": "true"}) == "console"
    assert log_format("auto", {"HATLOOP_LOG_FORMAT": "json"}) == "json"
    assert log_format("auto", {"HATLOOP_LOG_FORMAT": "JSON "}) == "json"
    assert log_format("console", {"HATLOOP_LOG_FORMAT": "json"}) == "console"
    assert log_format("json", {}) == "json"


def test_the_line_says_iteration_hat_time_and_spend_or_the_wait() -> None:
    """Running: iteration, hat, its time, the session's spend; waiting: for what and until."""
    st = LiveStatus(session_id="s1")
    assert status_text(st, 100.0) == "session s1 · starting"
    st.iteration, st.hat, st.started = 3, "builder", 58.0
    assert status_text(st, 100.0) == "iteration 3 · builder · 0:42"
    st.spent = HatUsage(cost_usd=0.0123, input_tokens=12_000, output_tokens=340)
    assert status_text(st, 100.0) == (
        "iteration 3 · builder · 0:42 · spent $0.0123, 12.0k in / 340 out tokens"
    )
    st.waiting = Waiting("rate limit", until=100.0 + 192)
    text = status_text(st, 100.0)
    assert text.startswith("waiting for rate limit until ") and "(3:12 left)" in text
    assert status_text(st, 200.0 + 192) == (  # over: the hat is called again
        "iteration 3 · builder · 5:34 · spent $0.0123, 12.0k in / 340 out tokens"
    )


def test_a_wait_under_an_hour_ends_at_a_second_a_longer_one_at_a_minute() -> None:
    """At 15:55:07 a wait until 15:55:31 says 15:55:31 (15:55 would read as past); one
    until the next morning says its minute."""
    now = time.mktime((2026, 11, 29, 15, 55, 7, 0, 0, -1))
    st = LiveStatus(waiting=Waiting("rate limit", until=now + 24))
    assert status_text(st, now) == "waiting for rate limit until 15:55:31 (0:24 left)"
    st.waiting = Waiting("usage limit", until=now + 5 * 3600 + 53)
    assert status_text(st, now) == "waiting for usage limit until 20:56 (5:00:53 left)"
    assert [clock_text(s) for s in (0, 59.9, 61, 3600 + 62)] == ["0:00", "0:59", "1:01", "1:01:02"]


def test_parallel_activations_show_as_lanes() -> None:
    """Several activations in flight: one lane each, with its own time; one left: as usual."""
    view = LiveView(live=False, colors=False, clock=lambda: 100.0)
    for n, started in ((2, 90.0), (3, 95.0), (4, 98.0)):
        view.iteration_started(n, "reviewer", started)
    assert status_text(view.status, 100.0) == (
        "3 running · #2 reviewer 0:10 · #3 reviewer 0:05 · #4 reviewer 0:02"
    )
    for n in (4, 2):
        view.iteration_ended(_ended(n))
    assert status_text(view.status, 100.0) == "iteration 3 · reviewer · 0:05"


def test_the_line_is_redrawn_as_soon_as_an_activation_starts_or_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each start and end redraws the line at once, not at the next tick (a log line
    printed meanwhile would show the last frame: an ended activation still running)."""
    from rich.console import Console

    monkeypatch.setattr(live_mod, "REFRESH_PER_SECOND", 0.01)  # no tick during the test
    out = io.StringIO()
    view = LiveView(colors=False, clock=lambda: 100.0)
    view.console = Console(file=out, force_terminal=True, color_system=None, width=200)
    view.start()
    try:
        for n in (2, 3):
            view.iteration_started(n, "reviewer", 99.0)
        assert out.getvalue().endswith("2 running · #2 reviewer 0:01 · #3 reviewer 0:01")
        view.iteration_ended(_ended(3))
        assert out.getvalue().endswith("iteration 2 · reviewer · 0:01")
        view.waiting(Waiting("rate limit", 160.0))
        assert "rate limit" in out.getvalue().rsplit("\r", 1)[-1]
    finally:
        view.stop()


def _ended(n: int) -> IterationEnd:
    return IterationEnd(
        iteration=n,
        hat="reviewer",
        backend="command",
        backend_ok=True,
        status="ok",
        prompt="",
        output="",
        events=(),
        duration=0.0,
        elapsed=0.0,
        ts=0.0,
    )


async def test_a_live_view_follows_the_lifecycle_and_shows_a_wait(tmp_path: Path) -> None:
    """The view's status follows iteration.started, iteration.done and loop.waiting (the
    event a wait publishes); -v prints an in-process hat's output when it ends."""
    view = LiveView(live=False, colors=False, clock=lambda: 1000.0)
    printed: list[str] = []
    view.print = lambda line, style="": printed.append(line)  # type: ignore[method-assign]
    view.output = lambda piece, numbered=False: printed.append(f"[{piece.hat}] {piece.text}")  # type: ignore[method-assign]
    live = LiveExtension(view, verbose=True)
    config = make_config(HATS, folder=tmp_path)
    backends = {"a": Paid(tag("a.done")), "b": scripted("final words " + tag("LOOP_COMPLETE"))}
    await run_hats(config, backends, workdir=tmp_path, extra=[live])
    assert view.status.done == 2 and view.status.iteration is None
    assert view.status.spent == HatUsage(cost_usd=0.25, input_tokens=100, output_tokens=10)
    assert printed == [
        "[a] " + tag("a.done"),
        "[b] final words " + tag("LOOP_COMPLETE"),
    ]
    bus = EventBus()
    live.attach(bus)
    await bus.publish(waiting_event("rate limit", 1000.0 + 300, ts=1000.0))
    assert view.status.waiting == Waiting("rate limit", 1300.0)


# -- on a pseudo-terminal -------------------------------------------------------------------


def test_a_terminal_shows_the_live_line_while_the_hat_runs(project: Path) -> None:
    """The line (iteration, hat, time) shows while the hat runs, log lines above it; it
    is erased at the end and the summary follows."""
    term = Terminal("run", cwd=project, env=ENV)
    term.expect(STATUS)
    (project / "release").touch()
    assert term.finish() == 0
    screen = term.plain
    assert HIDE_CURSOR in term.screen
    assert "session started" in screen and "iteration=1" in screen  # the log lines too
    assert "hatloop: completed after 1 iteration(s)" in screen


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param((), {"NO_COLOR": "1"}, id="NO_COLOR"),
        pytest.param((), {"TERM": "dumb"}, id="TERM=dumb"),
        pytest.param(("--color", "never"), {}, id="--color-never"),
        pytest.param((), {"CI": "true"}, id="CI"),
    ],
)
def test_no_live_line_where_it_is_turned_off(
    project: Path, args: tuple[str, ...], env: dict[str, str]
) -> None:
    """On the same terminal, NO_COLOR, TERM=dumb, --color never and CI leave the line out
    (it would show at once: it is drawn when the session starts); the log lines stay."""
    (project / "release").touch()
    term = Terminal("run", *args, cwd=project, env={**ENV, **env})
    assert term.finish() == 0
    assert HIDE_CURSOR not in term.screen
    assert "· worker ·" not in term.plain and "· starting" not in term.plain
    assert "iteration=1" in term.plain and "hat=worker" in term.plain
    if "NO_COLOR" in env or "--color" in args or env.get("TERM") == "dumb":
        assert b"\x1b[" not in term.screen  # and no colour either


def test_verbose_prints_the_hats_lines_above_the_live_line(project: Path) -> None:
    """-v on a terminal: the hat's first line shows while it still runs, prefixed."""
    term = Terminal("run", "-v", cwd=project, env=ENV)
    term.expect(r"\[worker\] step one")
    term.expect(STATUS)
    (project / "release").touch()
    assert term.finish() == 0
    assert "[worker] step two" in term.plain


# -- off a terminal -------------------------------------------------------------------------


def _run(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loop", "run", *args],
        cwd=project,
        env={**ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_off_a_terminal_no_live_line_and_no_json_unless_asked(project: Path) -> None:
    """stderr a pipe: no live line, log lines for people (in CI too); JSON only when
    --log-format json or HATLOOP_LOG_FORMAT=json asks."""
    (project / "release").touch()
    for env in ({}, {"CI": "true"}):
        res = _run(project, env=env)
        assert res.returncode == 0, res.stderr
        assert "\x1b" not in res.stderr and "· worker ·" not in res.stderr
        assert "iteration=1" in res.stderr
        assert not [line for line in res.stderr.splitlines() if line.startswith("{")]
    for args, env in ((("--log-format", "json"), {}), ((), {"HATLOOP_LOG_FORMAT": "json"})):
        res = _run(project, *args, env=env)
        logs = [json.loads(line) for line in res.stderr.splitlines()]
        assert [e["hat"] for e in logs if e["event"] == "iteration"] == ["worker"]


def test_verbose_with_json_logs_gives_json_lines_only(project: Path) -> None:
    """-v --log-format json: stderr stays JSON lines, the hat's output as output events."""
    (project / "release").touch()
    res = _run(project, "-v", "--log-format", "json")
    assert res.returncode == 0, res.stderr
    logs = [json.loads(line) for line in res.stderr.splitlines()]
    outputs = [(e["hat"], e["kind"], e["text"]) for e in logs if e["event"] == "output"]
    assert outputs[:2] == [("worker", "line", "step one"), ("worker", "line", "step two")]


def test_verbose_off_a_terminal_streams_the_lines_of_a_command_hat(project: Path) -> None:
    """-v with stderr a pipe: every stdout line of the hat, prefixed, no live line."""
    (project / "release").touch()
    res = _run(project, "-v")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert "[worker] step one" in lines and "[worker] step two" in lines
    assert '[worker] <event topic="LOOP_COMPLETE">done</event>' in lines
    assert lines.index("[worker] step two") < next(
        i for i, line in enumerate(lines) if "iteration=1" in line
    )


# A fan-out of three perspectives to three reviewers at once, each of which says two
# lines; the other hats run one at a time.
WAVE_SCRIPTS = {
    "coordinator": 'cat >/dev/null; echo dispatching; "$LOOP_PYTHON" -m loop emit '
    "review.perspective --payloads security performance docs",
    "reviewer": 'cat >/dev/null; echo "reviewing in $LOOP_ITERATION"; '
    '"$LOOP_PYTHON" -m loop emit review.done ok; echo "reviewed in $LOOP_ITERATION"',
    "synthesizer": "cat >/dev/null; echo '<event topic=\"LOOP_COMPLETE\">ok</event>'",
}


def test_verbose_numbers_the_lines_of_activations_that_run_at_once(tmp_path: Path) -> None:
    """-v with a hat of concurrency 3: each of its lines is prefixed with the hat and its
    iteration (``[reviewer #3]``), so three activations' lines tell apart; the hats that
    run alone keep the hat alone."""
    (tmp_path / "loop.toml").write_text(wave_toml(**WAVE_SCRIPTS), encoding="utf-8")
    res = _run(tmp_path, "-v", "-q")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert "[coordinator] dispatching" in lines
    for n in (2, 3, 4):
        assert f"[reviewer #{n}] reviewing in {n}" in lines
        assert f"[reviewer #{n}] reviewed in {n}" in lines
    assert '[synthesizer] <event topic="LOOP_COMPLETE">ok</event>' in lines
    assert not [line for line in lines if line.startswith("[reviewer]")]


def test_verbose_prints_an_in_process_hats_output_when_it_ends(tmp_path: Path) -> None:
    """A scripted hat (the built-in demo) reports no output as it arrives: -v prints it
    whole when its iteration ends."""
    res = _run(tmp_path, "-v", "-q")
    assert res.returncode == 0, res.stderr
    assert any(line.startswith("[planner] ") for line in res.stderr.splitlines())
    assert "iteration=" not in res.stderr  # -q: no progress lines
