"""Resuming after a limit or failure stop: the limits given on the command line, journaled
as an override; status and the summary agree on the hint; a recording replays."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config import LoadedConfig, load_config
from loop.engine.journal import read_journal
from loop.engine.resume import LimitOverrides, resumed_limits
from loop.exits import EXIT_FAILED, EXIT_LIMIT
from loop.records import LimitSettings, Override, Resume
from loop.replay import replay_recording
from loop.runner import RunOptions, build_backends, run_loop
from loop.session.recorder import Recorder
from loop.session.store import session_status
from loop.testing import make_config, run_hats, tag
from tests.commands.helpers import loop

from .test_recorder import LOOP_TOML, Yielding, lines

SETTINGS = LimitSettings(max_iterations=10, max_runtime_seconds=60, max_consecutive_failures=3)


class Flaky(Backend):
    """Fails while ``broken`` (an outage the user fixes), then completes."""

    kind = "flaky"
    uses_files = False
    instant = True

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        """Fail, or complete once fixed."""
        self.calls += 1
        if self.broken:
            return BackendResult.failed("connection refused")
        return BackendResult(output=tag("LOOP_COMPLETE"))


def _cfg(tmp_path: Path) -> LoadedConfig:
    return make_config(
        {"a": {"triggers": ["task.start"]}}, folder=tmp_path, max_consecutive_failures=2
    )


async def test_a_failure_stop_resumes_with_a_higher_limit_and_status_agrees(
    tmp_path: Path,
) -> None:
    """After max_consecutive_failures, a plain resume stops again at once (the failures in
    a row still count) with the same hint status gives; the hint's command goes on, and
    the override is journaled after the resume."""
    cfg, backend = _cfg(tmp_path), Flaky()
    sessions = tmp_path / ".loop/sessions"
    first, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="f")
    assert (first.reason, first.exit_code, backend.calls) == (
        "max_consecutive_failures",
        EXIT_FAILED,
        2,
    )
    status = session_status(sessions, "f")
    assert status.status == "failed"
    hint = "python -m loop run --resume f --max-consecutive-failures 4"
    assert first.resume_command == status.resume_command == hint

    again, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="f", resume=True)
    assert again.reason == "max_consecutive_failures" and backend.calls == 2
    assert again.resume_command == hint

    backend.broken = False  # the user fixed the outage, then ran the hint
    done, capture = await run_hats(
        cfg,
        {"a": backend},
        workdir=tmp_path,
        session_id="f",
        resume=True,
        limit_overrides=LimitOverrides(max_consecutive_failures=4),
    )
    assert done.reason == "completed" and done.exit_code == 0 and backend.calls == 3
    records = read_journal(sessions / "f/journal.jsonl").records
    kinds = [r.kind for r in records]
    overrides = [r for r in records if isinstance(r, Override)]
    assert len(overrides) == 1 and overrides[0].max_consecutive_failures == 4
    assert overrides[0].after_iteration == 2
    assert kinds[kinds.index("override") - 1] == "resume"
    assert kinds.count("resume") == 2  # the plain resume changed nothing: no override
    [resumed] = [e.payload for e in capture.events if e.topic == "loop.resumed"]
    assert resumed.override == overrides[0]  # and what it changed, its log line says
    assert resumed.override.changes(resumed.limits_before) == {"max_consecutive_failures": 4}
    assert session_status(sessions, "f").status == "completed"


async def test_status_tells_a_limit_reached_from_a_failure(tmp_path: Path) -> None:
    """max_iterations is a limit reached (exit 3); the hint raises it past what was used."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "a.more"]}}, folder=tmp_path, max_iterations=2
    )
    outputs = [tag("a.more"), tag("a.more"), tag("LOOP_COMPLETE")]

    class Script(Backend):
        kind = "script"
        uses_files = False
        instant = True

        async def run(self, request: BackendRequest) -> BackendResult:
            return BackendResult(output=outputs[request.iteration - 1])

    first, _ = await run_hats(cfg, {"a": Script()}, workdir=tmp_path, session_id="m")
    assert (first.reason, first.exit_code) == ("max_iterations", EXIT_LIMIT)
    status = session_status(tmp_path / ".loop/sessions", "m")
    assert status.status == "limit_reached"
    assert status.resume_command == first.resume_command
    assert first.resume_command == "python -m loop run --resume m --max-iterations 4"
    done, _ = await run_hats(
        cfg,
        {"a": Script()},
        workdir=tmp_path,
        session_id="m",
        resume=True,
        limit_overrides=LimitOverrides(max_iterations=4),
    )
    assert done.reason == "completed" and done.iterations == 3


def test_resumed_limits_take_flags_then_edits_then_the_last_run() -> None:
    """Limit by limit: a flag wins; else a value edited in the file since the start; else
    what the session last ran with (an earlier override stays)."""
    last = LimitSettings(max_iterations=20, max_runtime_seconds=60, max_consecutive_failures=5)
    edited = LimitSettings(max_iterations=10, max_runtime_seconds=90, max_consecutive_failures=3)
    after = resumed_limits(
        started=SETTINGS,
        last=last,
        loaded=edited,
        given=LimitOverrides(max_consecutive_failures=7, max_cost_usd=2.5),
    )
    assert after == LimitSettings(
        max_iterations=20,  # the earlier override stays (the file still says 10)
        max_runtime_seconds=90,  # edited in the file
        max_consecutive_failures=7,  # the flag
        max_cost_usd=2.5,
    )
    assert (
        resumed_limits(started=SETTINGS, last=SETTINGS, loaded=SETTINGS, given=LimitOverrides())
        == SETTINGS
    )
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        resumed_limits(
            started=SETTINGS,
            last=SETTINGS,
            loaded=SETTINGS,
            given=LimitOverrides(max_iterations=0),
        )


def test_a_hats_budget_given_on_the_command_line_changes_that_hat_alone() -> None:
    """--hat-max-cost-usd / --hat-max-tokens change the hats they name; the other hats
    keep what the session ran with, or what the file says when it was edited since."""
    started = replace(SETTINGS, hat_max_cost_usd={"a": 1.0, "b": 2.0}, hat_max_tokens={"b": 9})
    last = replace(started, hat_max_cost_usd={"a": 1.0, "b": 3.0})  # an earlier resume's
    after = resumed_limits(
        started=started,
        last=last,
        loaded=started,
        given=LimitOverrides(hat_max_cost_usd={"a": 2.4}, hat_max_tokens={"c": 5}),
    )
    assert after.hat_max_cost_usd == {"a": 2.4, "b": 3.0}
    assert after.hat_max_tokens == {"b": 9, "c": 5}
    edited = replace(started, hat_max_cost_usd={"a": 1.0, "b": 5.0})
    after = resumed_limits(
        started=started,
        last=last,
        loaded=edited,
        given=LimitOverrides(hat_max_cost_usd={"a": 2.4}),
    )
    assert after.hat_max_cost_usd == {"a": 2.4, "b": 5.0}


async def test_a_recording_resumed_with_other_limits_replays(tmp_path: Path) -> None:
    """The override goes into the recording; a replay applies it at the same point, so a
    session stopped at max_iterations = 2 and resumed with 20 replays all five iterations."""
    (tmp_path / "loop.toml").write_text(
        LOOP_TOML.replace("max_iterations = 20", "max_iterations = 2"), encoding="utf-8"
    )
    path = tmp_path / "rec.jsonl"

    async def run(overrides: LimitOverrides | None, **recorder: bool) -> str:
        config = load_config(tmp_path / "loop.toml", root=tmp_path)
        backends: dict[str, Backend] = {n: Yielding(b) for n, b in build_backends(config).items()}
        options = RunOptions(
            workdir=tmp_path,
            progress=False,
            handle_signals=False,
            session_id="r",
            resume=overrides is not None,
            backends=backends,
            limit_overrides=overrides or LimitOverrides(),
        )
        summary = await run_loop(config, options, [Recorder(path, **recorder)])
        return summary.reason

    assert await run(None) == "max_iterations"
    assert await run(LimitOverrides(max_iterations=20), append=True) == "completed"
    data = lines(path)
    kinds = [d["kind"] for d in data]
    assert kinds.count("override") == 1
    assert kinds[kinds.index("override") - 1] == "marker"
    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert result.actual_iterations == 5
    assert not result.warnings  # only the limits changed: the same configuration


class Repeating(Backend):
    """Says the same each time, unless its prompt asks it to COUNT its steps."""

    kind = "repeating"
    uses_files = False
    instant = True

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        """The same event, or a numbered one."""
        self.calls += 1
        said = f"step {self.calls}" if "COUNT" in request.prompt else "same"
        return BackendResult(output=tag("a.again", said))


async def test_a_stale_loop_resumed_with_its_hat_changed_runs_it_and_replays(
    tmp_path: Path,
) -> None:
    """A stale_loop resumed as it is stops again at once, without a call (status says what
    to change); resumed with the hat's instructions or its backend changed, the hat runs
    again on a fresh streak: still the same, it stops after stale_threshold more; told to
    count, it goes on to max_iterations. The recording of it all replays whole."""
    path, backend, other = tmp_path / "rec.jsonl", Repeating(), Repeating()
    other.kind = "other"

    async def run(instructions: str, runs_on: Backend = backend) -> tuple[str, int]:
        hat = {"triggers": ["task.start", "a.again"], "publishes": ["a.again"]}
        config = make_config(
            {"a": {**hat, "instructions": instructions}},
            folder=tmp_path,
            stale_threshold=3,
            max_iterations=12,
        )
        resume = path.exists()
        options = RunOptions(
            workdir=tmp_path,
            progress=False,
            handle_signals=False,
            session_id="s",
            resume=resume,
            backends={"a": runs_on},
        )
        summary = await run_loop(config, options, [Recorder(path, append=resume)])
        return summary.reason, summary.iterations

    assert (await run("Work."), backend.calls) == (("stale_loop", 3), 3)
    assert (await run("Work."), backend.calls) == (("stale_loop", 3), 3)  # as it is
    status = session_status(tmp_path / ".loop/sessions", "s")
    assert status.resume_after == (
        "hat a's prompt or backend, or [loop] stale_threshold, has changed in loop.toml"
    )
    assert (await run("Work well."), backend.calls) == (("stale_loop", 6), 6)
    assert (await run("Work well."), backend.calls) == (("stale_loop", 6), 6)
    assert (await run("Work well.", other), other.calls) == (("stale_loop", 9), 3)
    assert await run("Work well. COUNT your steps.") == ("max_iterations", 12)

    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert (result.actual_iterations, result.actual_reason) == (12, "max_iterations")


def test_a_plain_resume_keeps_the_flags_the_session_was_started_with(tmp_path: Path) -> None:
    """A session started with --backend scripted (the file says claude, not installed)
    and --max-iterations 1 resumes with both when they are not given again; a flag given
    to a resume holds for the resumes after it. Before, a plain resume took loop.toml's
    backend and limit as if the file had been edited."""
    assert loop("init", "--backend", "claude", cwd=tmp_path).returncode == 0
    sid = ["--session-id", "s"]
    first = loop(
        "run",
        "-q",
        "--no-preflight",
        "--backend",
        "scripted",
        "--max-iterations",
        "1",
        *sid,
        cwd=tmp_path,
    )
    assert first.returncode == EXIT_LIMIT, first.stderr
    again = loop("run", "-q", "--resume", "s", cwd=tmp_path)  # the limit holds: stops at once
    assert again.returncode == EXIT_LIMIT, again.stderr
    assert "not found on PATH" not in again.stderr  # still on the scripted backend
    raised = loop("run", "-q", "--resume", "s", "--max-iterations", "2", cwd=tmp_path)
    assert raised.returncode == EXIT_LIMIT, raised.stderr
    last = loop("run", "--resume", "s", "--log-format", "json", cwd=tmp_path)
    assert last.returncode == EXIT_LIMIT, last.stderr
    assert '"backend": "scripted"' in last.stderr and '"max_iterations": 2' in last.stderr
    records = read_journal(tmp_path / ".loop/sessions/s/journal.jsonl").records
    ends = [r for r in records if r.kind == "iteration.end"]
    assert [r.backend for r in ends] == ["scripted", "scripted"]  # 1, then 1 more, then 0
    assert not any(isinstance(r, Override) and r.max_iterations != 2 for r in records)
    assert [r.flags for r in records if isinstance(r, Resume)] == [
        {"backend": "scripted", "max_iterations": 1},
        {"backend": "scripted", "max_iterations": 2},
        {"backend": "scripted", "max_iterations": 2},
    ]


def _resumed_without_the_recording_between(folder: Path) -> list[dict]:
    """Record a run stopped at max_iterations 1, resume it without the recording with the
    limit raised to 2, then resume it recorded with 10; replay the recording with the CLI
    (it must pass) and return its lines."""
    record = ("--record-session", "r.jsonl")
    first = loop("run", "-q", "--max-iterations", "1", *record, cwd=folder)
    assert first.returncode == EXIT_LIMIT, first.stderr
    unrecorded = loop("run", "-q", "--resume", "--max-iterations", "2", cwd=folder)
    assert unrecorded.returncode == EXIT_LIMIT, unrecorded.stderr
    last = loop("run", "-q", "--resume", "--max-iterations", "10", *record, cwd=folder)
    assert last.returncode == 0, last.stderr
    replayed = loop("replay", "r.jsonl", cwd=folder)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    return lines(folder / "r.jsonl")


def _shape(data: list[dict]) -> list[tuple]:
    """Each line's kind, with what says where it stands."""
    shown: list[tuple] = []
    for d in data:
        if d["kind"] == "iteration":
            shown.append(("iteration", d["iteration"]))
        elif d["kind"] == "marker":
            shown.append((d["marker"], d["resumed_at_iteration"]))
        elif d["kind"] == "override":
            shown.append(("override", d["after_iteration"], d["max_iterations"]))
        elif d["kind"] == "footer":
            shown.append(("footer", d["reason"], d["iterations"]))
        else:
            shown.append((d["kind"],))
    return shown


def test_a_resume_without_the_recording_is_backfilled_whole_and_replays(tmp_path: Path) -> None:
    """A command hat's session: a resume run without --record-session raised the limit
    to 2 and ran iteration 2. The next recorded resume backfills all of it from the
    journal (its resumed marker, its override, its iteration, its footer), so the replay
    applies max_iterations 2 after iteration 1 as the run did. Before, only the
    iteration was backfilled: the replay stopped at the recorded limit, 1, and diverged."""
    agent = (
        'if [ "$LOOP_ITERATION" -lt 4 ]; then "$LOOP_PYTHON" -m loop emit step "$LOOP_ITERATION"\n'
        'else "$LOOP_PYTHON" -m loop emit LOOP_COMPLETE done; fi\n'
    )
    (tmp_path / "agent.sh").write_text(agent, encoding="utf-8")
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "go"\n\n[backend]\ntype = "command"\ncommand = ["sh", "agent.sh"]\n\n'
        '[hats.w]\ntriggers = ["task.start", "step"]\npublishes = ["step", "LOOP_COMPLETE"]\n',
        encoding="utf-8",
    )
    data = _resumed_without_the_recording_between(tmp_path)
    assert _shape(data) == [
        ("header",),
        ("iteration", 1),
        ("footer", "max_iterations", 1),
        ("resumed", 1),  # the unrecorded resume, from the journal
        ("override", 1, 2),
        ("iteration", 2),
        ("footer", "max_iterations", 2),
        ("resumed", 2),  # the recorded one
        ("override", 2, 10),
        ("iteration", 3),
        ("iteration", 4),
        ("footer", "completed", 4),
    ]
    backfilled = data[3]
    assert "not recorded" in backfilled["message"] and "base_digest" not in backfilled


def test_the_demo_resumed_without_the_recording_between_replays(tmp_path: Path) -> None:
    """The same with the built-in demo (no loop.toml): the replay runs all five
    iterations."""
    data = _resumed_without_the_recording_between(tmp_path)
    kinds = [d["kind"] for d in data]
    assert kinds.count("override") == 2 and kinds.count("footer") == 3
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 2, 3, 4, 5]
