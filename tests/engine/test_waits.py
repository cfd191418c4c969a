"""Rate and usage limits are waited out, journaled, bounded, and survive a kill -9."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from loop.backends.base import Backend, BackendRequest, BackendResult, RateLimit
from loop.backends.scripted import ScriptedBackend
from loop.cli import build_parser
from loop.commands.run import limit_overrides, overrides_from
from loop.config import load_config
from loop.engine.decide import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    RESET_MARGIN,
    Limits,
    jitter_fraction,
    plan_wait,
)
from loop.engine.journal import read_journal
from loop.engine.progress import resume_command
from loop.engine.state import LoopState, RouteContext, fold
from loop.records import IterationEnd, Resume, SessionEnd, Wait
from loop.session.store import session_status
from loop.testing import FakeClock, make_config, run_hats, tag
from tests.engine.test_decide import CTX, end_record, start_record

AGENTS = Path(__file__).parent / "agents"
NOW = 1_800_000_000.0
RATE = RateLimit("rate_limit", "429 Too Many Requests")


def _plan(limit: RateLimit = RATE, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "attempt": 1,
        "waited": 0.0,
        "now": NOW,
        "max_wait": 3600.0,
        "runtime_left": 10_000.0,
        "jitter": 0.0,
    }
    return plan_wait(limit, **(args | kw))


def test_a_wait_lasts_until_the_reset_else_the_delay_else_a_growing_backoff() -> None:
    """Reset time first (plus a margin), then the CLI's delay, then backoff to its cap."""
    at_reset = _plan(RateLimit("usage_limit", "x", reset_at=NOW + 100, retry_after=5))
    assert (at_reset.seconds, at_reset.until, at_reset.stop) == (
        100 + RESET_MARGIN,
        NOW + 100 + RESET_MARGIN,
        None,
    )
    assert _plan(RateLimit("rate_limit", "x", retry_after=41)).seconds == 41
    backoff = [_plan(attempt=n).seconds for n in range(1, 8)]
    assert backoff[:3] == [BACKOFF_BASE, 2 * BACKOFF_BASE, 4 * BACKOFF_BASE]
    assert backoff[-1] == BACKOFF_CAP
    past_reset = _plan(RateLimit("usage_limit", "x", reset_at=NOW - 5))
    assert past_reset.seconds == BACKOFF_BASE  # a reset already past is no reset


def test_jitter_lengthens_a_wait_by_at_most_a_fifth_and_a_minute() -> None:
    """Never shorter than the reset; at most +20% (and +60 s) with the full jitter."""
    assert _plan(jitter=0.999).seconds <= BACKOFF_BASE * 1.2
    long = _plan(RateLimit("usage_limit", "x", reset_at=NOW + 3600), jitter=0.999)
    assert 3600 + RESET_MARGIN < long.seconds <= 3600 + RESET_MARGIN + 60


def test_the_loop_stops_rather_than_wait_past_max_wait_or_the_runtime() -> None:
    """max_wait_seconds bounds an iteration's waits in all; the runtime limit bounds too."""
    far = RateLimit("usage_limit", "limit reached", reset_at=NOW + 5 * 3600)
    stop = _plan(far).stop
    assert stop is not None and stop.startswith(
        "usage limit: waiting 5.0h more would pass max_wait_seconds (3600), resets at"
    )
    assert _plan(waited=3590.0).stop is not None  # 3590 + 30 > 3600
    assert "max_runtime_seconds" in (_plan(runtime_left=10.0).stop or "")
    assert _plan(max_wait=0.0).stop is not None  # never wait


def _wait(n: int, attempt: int, seconds: float = 30.0) -> Wait:
    return Wait(
        iteration=n,
        hat="planner",
        limit="rate_limit",
        message="429",
        attempt=attempt,
        seconds=seconds,
        until=NOW + seconds,
        ts=NOW,
    )


def test_the_journal_keeps_the_wait_across_a_resume_until_the_iteration_commits() -> None:
    """waiting/waited fold from Wait records; a commit clears them; not a failure."""
    state = fold([start_record(), _wait(1, 1), _wait(1, 2, 60.0)], CTX)
    assert state.waiting is not None and state.waiting.attempt == 2 and state.waited == {1: 90.0}
    assert state.consecutive_failures == 0 and state.failed_iterations == 0
    state = fold([start_record(), _wait(1, 1), Resume(pid=1, iteration=0, ts=NOW)], CTX)
    assert state.waiting is not None and state.waited == {1: 30.0}  # a kill: the wait goes on
    gave_up = [
        start_record(),
        _wait(1, 1),
        SessionEnd(reason="rate_limited", iterations=0, elapsed=1, ts=NOW),
        Resume(pid=1, iteration=0, ts=NOW),
    ]
    assert fold(gave_up, CTX).waited == {}  # resumed after giving up: a fresh budget
    done = fold([start_record(), _wait(1, 1), end_record(1, "planner", [], [1])], CTX)
    assert done.waiting is None and done.waited == {}


def test_iterations_in_flight_at_once_keep_a_wait_each() -> None:
    """Parallel hats: each activation's wait and budget are its own; one's commit ends
    only its own; the session waits until the wait that ends last."""
    state = fold([start_record(), _wait(1, 1, 90.0), _wait(2, 1, 30.0), _wait(2, 2, 30.0)], CTX)
    assert {n: w.attempt for n, w in state.waits.items()} == {1: 1, 2: 2}
    assert state.waited == {1: 90.0, 2: 60.0}
    assert state.waiting is not None and state.waiting.iteration == 1  # it ends last
    both = [start_record(), _wait(1, 1, 90.0), _wait(2, 1, 30.0)]
    one_done = fold([*both, end_record(1, "planner", [], [1])], CTX)
    assert list(one_done.waits) == [2] and one_done.waited == {2: 30.0}
    killed = fold([*both, Resume(pid=1, iteration=0, ts=NOW + 60)], CTX)
    assert list(killed.waits) == [1]  # 2's deadline had passed when the session resumed
    interrupted = SessionEnd(reason="interrupted", iterations=0, elapsed=1, ts=NOW)
    assert list(fold([*both, interrupted], CTX).waits) == [1, 2]  # Ctrl-C: resume waits on
    stopped = SessionEnd(reason="max_runtime", iterations=0, elapsed=1, ts=NOW)
    assert fold([*both, stopped], CTX).waiting is None  # a stop ends them


class Limited(Backend):
    """Refused by a limit ``times`` times, then answers ``output``."""

    kind = "limited"
    uses_files = False
    instant = True

    def __init__(self, output: str, times: int, limit: RateLimit = RATE) -> None:
        self.output, self.times, self.limit = output, times, limit
        self.calls = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        self.calls += 1
        if self.calls <= self.times:
            result = BackendResult.failed(f"refused: {self.limit.message}")
            result.limited = self.limit
            return result
        return BackendResult(output=self.output)


def ends_and_waits(tmp_path: Path, session_id: str) -> tuple[list[IterationEnd], list[Wait]]:
    records = read_journal(tmp_path / f".loop/sessions/{session_id}/journal.jsonl").records
    return (
        [r for r in records if isinstance(r, IterationEnd)],
        [r for r in records if isinstance(r, Wait)],
    )


async def test_a_limited_hat_is_waited_out_and_the_loop_completes(tmp_path: Path) -> None:
    """Two 429s: two journaled waits with a growing backoff, no failed iteration."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    clock = FakeClock(NOW)
    backend = Limited(tag("LOOP_COMPLETE"), times=2)
    summary, cap = await run_hats(
        cfg,
        {"a": backend},
        workdir=tmp_path,
        session_id="w",
        clock=clock,
        wall_clock=clock,
        sleep=clock.sleep,
    )
    assert (summary.reason, summary.iterations, summary.failed_iterations) == ("completed", 1, 0)
    ends, waits = ends_and_waits(tmp_path, "w")
    assert [w.attempt for w in waits] == [1, 2] and len(ends) == 1
    assert waits[1].seconds > waits[0].seconds >= BACKOFF_BASE
    assert clock.now >= waits[1].until  # slept until the deadline
    assert [e.payload.wait for e in cap.events if e.topic == "loop.waiting"] == waits


async def test_a_limit_past_max_wait_ends_the_run_as_rate_limited(tmp_path: Path) -> None:
    """A reset hours away with max_wait_seconds 600: stop at once, exit 3, say why."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path, max_wait_seconds=600)
    clock = FakeClock(NOW)
    far = RateLimit("usage_limit", "You've hit your limit", reset_at=NOW + 7200)
    summary, _ = await run_hats(
        cfg,
        {"a": Limited(tag("LOOP_COMPLETE"), 1, far)},
        workdir=tmp_path,
        session_id="r",
        clock=clock,
        wall_clock=clock,
        sleep=clock.sleep,
    )
    assert (summary.reason, summary.exit_code, summary.iterations) == ("rate_limited", 3, 0)
    assert "would pass max_wait_seconds (600)" in summary.notes[0]
    assert clock.now == NOW  # it never waited
    seconds = round(7200 + RESET_MARGIN + 60 * jitter_fraction("r", 1, 1), 3)
    assert summary.resume_command == (  # above the wait refused: twice it
        f"python -m loop run --resume r --max-wait {math.ceil(seconds * 2)}"
    )
    status = session_status(tmp_path / ".loop/sessions", "r")  # the journal has no wait
    assert status.resume_command == "python -m loop run --resume r --max-wait 1200"


async def test_a_rate_limited_stop_gives_the_resume_that_waits_it_out(tmp_path: Path) -> None:
    """max_wait_seconds 5 refuses the first backoff (30 s and its jitter), which a plain
    resume would refuse again at once: the summary and ``status`` give the command that
    raises --max-wait to twice the longest first backoff; that command, parsed as the
    command line parses it, waits and completes."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\nmax_wait_seconds = 5\n[hats.a]\ntriggers = ["task.start"]\n'
    )
    cfg = load_config(tmp_path / "loop.toml", root=tmp_path)
    clock = FakeClock(NOW)
    backend = Limited(tag("LOOP_COMPLETE"), times=3)
    run = partial(
        run_hats, workdir=tmp_path, session_id="m", clock=clock, wall_clock=clock, sleep=clock.sleep
    )
    first, _ = await run(cfg, {"a": backend})
    assert first.reason == "rate_limited" and clock.now == NOW
    hint = "python -m loop run --resume m --max-wait 72"  # 2 x (30 s + 20%)
    assert first.resume_command == session_status(tmp_path / ".loop/sessions", "m").resume_command
    assert first.resume_command == hint
    again, _ = await run(cfg, {"a": backend}, resume=True)
    assert (again.reason, again.resume_command, clock.now) == ("rate_limited", hint, NOW)

    args = build_parser("run").parse_args(hint.split()[3:])
    config = load_config(tmp_path / "loop.toml", root=tmp_path, overrides=overrides_from(args))
    done, _ = await run(config, {"a": backend}, resume=True, limit_overrides=limit_overrides(args))
    assert (done.reason, backend.calls) == ("completed", 4)
    assert clock.now >= NOW + BACKOFF_BASE  # it waited, once


def test_a_wait_past_the_runtime_left_gives_the_resume_that_raises_the_runtime() -> None:
    """A wait that would pass max_runtime_seconds, not max_wait_seconds: the resume
    command raises --max-runtime above the runtime the wait needs."""
    refused = _plan(runtime_left=10.0)
    assert refused.passes == "max_runtime_seconds" and refused.over == BACKOFF_BASE - 10
    limits = Limits(max_iterations=9, max_runtime_seconds=100, max_consecutive_failures=3)
    command = resume_command("s", "rate_limited", LoopState(), limits, refused)
    assert command == "python -m loop run --resume s --max-runtime 240"  # 2 x (100 + 20)


CONFIG = """
[loop]
prompt = "wait for it"
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.a]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "claude", command = ["{python}", "{agent}"], mcp = false }}
"""


def test_a_kill_during_the_wait_resumes_still_waiting_until_the_same_deadline(
    tmp_path: Path,
) -> None:
    """kill -9 right after the wait is journaled: the resumed run waits until that
    deadline (the CLI's reset plus the margin) before calling the hat again."""
    agent = AGENTS / "limited_claude.py"
    (tmp_path / "loop.toml").write_text(CONFIG.format(python=sys.executable, agent=agent))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    env |= {"LIMITED_STATE": str(tmp_path / "state"), "LIMITED_RESET_IN": "3"}
    run = [sys.executable, "-m", "loop", "run", "--session-id", "k", "--log-format", "json"]
    killed = subprocess.run(
        run,
        cwd=tmp_path,
        env=env | {"HATLOOP_CRASH_AT": "wait:1"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    journal = tmp_path / ".loop/sessions/k/journal.jsonl"
    waits = [r for r in read_journal(journal).records if isinstance(r, Wait)]
    assert len(waits) == 1 and waits[0].limit == "usage_limit" and waits[0].reset_at is not None
    resume = [sys.executable, "-m", "loop", "run", "--resume", "k", "--log-format", "json"]
    done = subprocess.run(
        resume, cwd=tmp_path, env=env, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"waiting out a usage limit" in done.stderr
    second_call = float((tmp_path / "state" / "started-2").read_text())
    assert second_call >= waits[0].until  # not retried at once
    records = read_journal(journal).records
    assert len([r for r in records if isinstance(r, Wait)]) == 1  # the same wait, not a new one
    assert [r.iteration for r in records if isinstance(r, IterationEnd)] == [1]


def two_reviewers(folder: Path) -> Any:
    """A coordinator fans out two perspectives to a reviewer of concurrency 2; a
    synthesizer waits for both."""
    return make_config(
        {
            "coordinator": {"triggers": ["task.start"], "publishes": ["review.perspective"]},
            "reviewer": {
                "triggers": ["review.perspective"],
                "publishes": ["review.done"],
                "concurrency": 2,
            },
            "synthesizer": {
                "triggers": ["review.done"],
                "publishes": ["LOOP_COMPLETE"],
                "aggregate": {"mode": "wait_for_all"},
            },
        },
        folder=folder,
    )


def wave_backends(reviewer: Backend) -> dict[str, Backend]:
    return {
        "coordinator": ScriptedBackend(
            [tag("review.perspective", "a") + tag("review.perspective", "b")]
        ),
        "reviewer": reviewer,
        "synthesizer": ScriptedBackend([tag("LOOP_COMPLETE")]),
    }


class LimitedOnce(Backend):
    """Refuses the first call of each iteration with a rate limit, then answers."""

    kind = "limited"
    uses_files = False
    instant = True

    def __init__(self, output: str) -> None:
        self.output = output
        self.refused: set[int] = set()

    async def run(self, request: BackendRequest) -> BackendResult:
        if request.iteration not in self.refused:
            self.refused.add(request.iteration)
            result = BackendResult.failed("refused: 429")
            result.limited = RATE
            return result
        return BackendResult(output=self.output)


async def test_parallel_activations_limited_at_once_each_wait_and_all_commit(
    tmp_path: Path,
) -> None:
    """Two reviewers run at once and both hit a rate limit: both waits are journaled
    and in the session's state together (neither overwrites the other), each is waited
    out, both activations commit, and the aggregator completes the loop."""
    cfg = two_reviewers(tmp_path)
    clock = FakeClock(NOW)
    both_waiting = anyio.Event()
    sleeping: list[float] = []
    seen: dict[int, Wait] = {}

    async def sleep(seconds: float) -> None:  # holds each wait until both are waiting
        sleeping.append(seconds)
        if len(sleeping) == 2:
            journal = tmp_path / ".loop/sessions/p/journal.jsonl"
            records = read_journal(journal).records
            seen.update(fold(records, RouteContext.from_start(records[0])).waits)  # type: ignore[arg-type]
            both_waiting.set()
        with anyio.fail_after(30):
            await both_waiting.wait()
        await clock.sleep(seconds)

    backends = wave_backends(LimitedOnce(tag("review.done", "ok")))
    summary, _ = await run_hats(
        cfg, backends, workdir=tmp_path, session_id="p", clock=clock, wall_clock=clock, sleep=sleep
    )
    assert (summary.reason, summary.iterations, summary.failed_iterations) == ("completed", 4, 0)
    ends, waits = ends_and_waits(tmp_path, "p")
    reviewers = sorted(e.iteration for e in ends if e.hat == "reviewer")
    assert sorted(w.iteration for w in waits) == reviewers and len(reviewers) == 2
    assert sorted(seen) == reviewers  # both waits held at once
    assert all(clock.now >= w.until for w in waits)
    records = read_journal(tmp_path / ".loop/sessions/p/journal.jsonl").records
    assert fold(records, RouteContext.from_start(records[0])).waits == {}  # type: ignore[arg-type]


class Killed(Exception):
    """Stands for a kill -9 in an in-process test (the journal is cut where it hit)."""


class Answering(Backend):
    """Answers at once; notes the (fake) time of each call."""

    kind = "answering"
    uses_files = False
    instant = True

    def __init__(self, output: str, clock: FakeClock) -> None:
        self.output, self.clock = output, clock
        self.calls: list[float] = []

    async def run(self, request: BackendRequest) -> BackendResult:
        self.calls.append(self.clock.now)
        return BackendResult(output=self.output)


async def test_a_parallel_session_killed_while_activations_wait_resumes_waiting(
    tmp_path: Path,
) -> None:
    """Killed while two activations wait out limits with different deadlines: the
    resumed session starts nothing before the later deadline, then re-runs both."""
    cfg = two_reviewers(tmp_path)
    clock = FakeClock(NOW)
    journal = tmp_path / ".loop/sessions/k/journal.jsonl"
    sleeps = 0
    cut = 0

    async def sleep(seconds: float) -> None:  # the second wait journaled: "kill -9"
        nonlocal sleeps, cut
        sleeps += 1
        if sleeps == 2:
            cut = journal.stat().st_size
            raise Killed
        await anyio.sleep_forever()  # the first waits until the kill

    limited = LimitedOnce(tag("review.done", "ok"))
    with contextlib.suppress(Killed):
        await run_hats(
            cfg,
            wave_backends(limited),
            workdir=tmp_path,
            session_id="k",
            clock=clock,
            wall_clock=clock,
            sleep=sleep,
        )
    with journal.open("r+b") as fh:  # what a kill -9 leaves: the journal up to the wait
        fh.truncate(cut)
    waits = [r for r in read_journal(journal).records if isinstance(r, Wait)]
    assert len(waits) == 2 and len({w.iteration for w in waits}) == 2
    last = max(w.until for w in waits)
    reviewer = Answering(tag("review.done", "ok"), clock)
    summary, _ = await run_hats(
        cfg,
        wave_backends(reviewer),
        workdir=tmp_path,
        session_id="k",
        resume=True,
        clock=clock,
        wall_clock=clock,
        sleep=clock.sleep,
    )
    assert summary.reason == "completed", summary.notes
    assert len(reviewer.calls) == 2 and min(reviewer.calls) >= last  # not before the deadline
    records = read_journal(journal).records
    assert len([r for r in records if isinstance(r, Wait)]) == 2  # no new wait
    assert len([r for r in records if isinstance(r, IterationEnd) and r.hat == "reviewer"]) == 2
