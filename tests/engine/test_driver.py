"""The async driver end to end: real backends, real subprocess agents, the journal."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from loop.backends.command import CommandBackend
from loop.backends.python_hat import HatContext, PythonBackend
from loop.backends.scripted import ScriptedBackend
from loop.config.backends import ScriptedConfig
from loop.engine import journal as journal_mod
from loop.engine.invoke import BACKSTOP_SECONDS
from loop.engine.journal import read_journal
from loop.engine.progress import RunSummary, render_summary, resume_after, resume_command
from loop.engine.records import session_end
from loop.engine.state import Exhaustion, LoopState
from loop.extensions import Extension
from loop.records import IterationEnd, IterationStart, SessionEnd, encode_record, parse_record
from loop.session.store import session_status
from loop.testing import make_config, run_hats, scripted, tag

AGENTS = Path(__file__).parent / "agents"


def journal_ends(tmp_path: Path, session_id: str) -> list[IterationEnd]:
    """The ``iteration.end`` records of a session's journal."""
    records = read_journal(tmp_path / f".loop/sessions/{session_id}/journal.jsonl").records
    return [r for r in records if isinstance(r, IterationEnd)]


def pingpong(tmp_path: Path, **loop: Any) -> Any:
    return make_config(
        {
            "ping": {"triggers": ["task.start", "pong.done"], "publishes": ["ping.done"]},
            "pong": {"triggers": ["ping.done"], "publishes": ["pong.done", "LOOP_COMPLETE"]},
        },
        folder=tmp_path,
        **loop,
    )


async def test_scripted_ping_pong_completes_and_journals_every_iteration(tmp_path: Path) -> None:
    """Events route between hats until the completion event; the journal has it all."""
    cfg = pingpong(tmp_path)
    backends = {
        "ping": scripted(tag("ping.done", "1"), tag("ping.done", "2")),
        "pong": scripted(tag("pong.done", "1"), tag("LOOP_COMPLETE", "done")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path, session_id="s1")
    assert summary.reason == "completed" and summary.exit_code == 0
    assert summary.iterations == 4
    assert cap.topics() == ["ping.done", "pong.done", "ping.done", "LOOP_COMPLETE"]
    records = read_journal(tmp_path / ".loop/sessions/s1/journal.jsonl").records
    kinds = [r.kind for r in records]
    assert kinds[0] == "session.start" and kinds[-1] == "session.end"
    ends = [r for r in records if r.kind == "iteration.end"]
    assert [r.hat for r in ends] == ["ping", "pong", "ping", "pong"]
    assert "Events that triggered you" in ends[0].prompt and "task.start" in ends[0].prompt


async def test_a_real_subprocess_agent_emits_through_both_channels(tmp_path: Path) -> None:
    """`python -m loop emit` lines and <event> tags both reach the bus, file events first."""
    cfg = make_config(
        {
            "writer": {"triggers": ["task.start"], "publishes": ["draft.ready"]},
            "checker": {"triggers": ["draft.ready"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
    )
    agent = CommandBackend([sys.executable, str(AGENTS / "both_channels.py")])
    summary, cap = await run_hats(
        cfg, {"writer": agent, "checker": agent}, workdir=tmp_path, session_id="s"
    )
    assert summary.reason == "completed", summary
    assert cap.topics() == ["draft.ready", "experience.thought", "LOOP_COMPLETE"]
    draft = next(e for e in cap.events if e.topic == "draft.ready")
    assert draft.payload == {"words": 3} and draft.source == "writer"


async def test_an_event_no_hat_takes_ends_the_run(tmp_path: Path) -> None:
    """An event that no hat subscribes to ends the run as unrouted_event (exit 1)."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    summary, _ = await run_hats(cfg, {"a": scripted(tag("nobody.cares"))}, workdir=tmp_path)
    assert summary.reason == "unrouted_event" and summary.exit_code == 1


async def test_an_unrouted_topic_is_named_in_the_log_the_summary_and_the_journal(
    tmp_path: Path,
) -> None:
    """The topic no hat takes: a warning when it is published, the summary, session.end."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    with capture_logs() as logs:
        summary, _ = await run_hats(
            cfg, {"a": scripted(tag("nobody.cares"))}, workdir=tmp_path, session_id="u"
        )
    warned = [e for e in logs if e["event"].startswith("unrouted event")]
    assert [(e["topic"], e["hat"], e["log_level"]) for e in warned] == [
        ("nobody.cares", "a", "warning")
    ]
    assert summary.unrouted_topic == "nobody.cares"
    assert "unrouted  nobody.cares" in render_summary(summary)
    records = read_journal(tmp_path / ".loop/sessions/u/journal.jsonl").records
    end = records[-1]
    assert isinstance(end, SessionEnd) and end.unrouted_topic == "nobody.cares"


async def test_a_stale_loop_names_what_repeated_and_what_to_change_before_a_resume(
    tmp_path: Path,
) -> None:
    """The summary says which event came back the same, and that a resume as it is stops
    again (the same for an unrouted topic): the command alone would do nothing."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "a.again"], "publishes": ["a.again"]}},
        folder=tmp_path,
        stale_threshold=3,
    )
    summary, _ = await run_hats(
        cfg, {"a": scripted(*[tag("a.again", "same")] * 5)}, workdir=tmp_path
    )
    assert summary.reason == "stale_loop"
    assert (
        "a.again from a came 3 times in a row, the same each time ('same'); change a's "
        "prompt (its instructions, say) or backend, or raise [loop] stale_threshold, in "
        "loop.toml before you resume: a resume as it is stops again"
    ) in summary.notes
    cfg = make_config({"b": {"triggers": ["task.start"]}}, folder=tmp_path / "u")
    summary, _ = await run_hats(cfg, {"b": scripted(tag("nobody.cares"))}, workdir=tmp_path / "u")
    assert any(
        n.startswith("add a hat triggered by nobody.cares to loop.toml") for n in summary.notes
    )


def test_session_end_without_an_unrouted_topic_keeps_its_old_form() -> None:
    """The optional field is left out when unset, so older readers read the line."""
    line = encode_record(session_end("completed", 2, 1.0, 5.0))
    assert b"unrouted_topic" not in line
    assert parse_record(line) == session_end("completed", 2, 1.0, 5.0)
    old = b'{"kind":"session.end","reason":"unrouted_event","iterations":1,"elapsed":0.1,"ts":1.0}'
    assert cast(SessionEnd, parse_record(old)).unrouted_topic is None


async def test_a_failing_command_is_a_failed_iteration_with_its_reason(tmp_path: Path) -> None:
    """Non-zero exit: failed iteration, stderr's last line in the reason, then the limit."""
    cfg = make_config(
        {"a": {"triggers": ["task.start"]}}, folder=tmp_path, max_consecutive_failures=2
    )
    agent = CommandBackend([sys.executable, str(AGENTS / "misbehave.py"), "exit3"])
    summary, _ = await run_hats(cfg, {"a": agent}, workdir=tmp_path, session_id="f")
    assert summary.reason == "max_consecutive_failures" and summary.exit_code == 1
    ends = journal_ends(tmp_path, "f")
    assert len(ends) == 2
    assert ends[0].status == "failed" and ends[0].exit_code == 3
    assert ends[0].reason == "exit status 3: something broke"
    assert ends[0].output.strip() == "partial output"
    # the summary says why, not only which limit: the failure that ended the run
    assert "2 iteration(s) failed in a row; the last: #2 a: exit status 3: something broke" in (
        summary.notes
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = (
        Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    )
    return state not in ("Z", "X")


async def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """Past the iteration timeout the agent and its grandchild are gone."""
    pids = tmp_path / "pids"
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "timeout_seconds": 1.0}},
        folder=tmp_path,
        max_consecutive_failures=1,
    )
    agent = CommandBackend([sys.executable, str(AGENTS / "misbehave.py"), "hang", str(pids)])
    summary, _ = await run_hats(cfg, {"a": agent}, workdir=tmp_path, session_id="t")
    assert summary.reason == "max_consecutive_failures"
    ends = journal_ends(tmp_path, "t")
    assert ends[0].reason == "timeout after 1s"
    parent, child = (int(x) for x in pids.read_text().split())
    assert not _alive(parent) and not _alive(child)


async def test_max_runtime_cancels_the_iteration_in_flight_when_it_passes(tmp_path: Path) -> None:
    """A hat's limit is 600 s, the session's runtime 2 s: the hanging agent (and its
    grandchild) are stopped as the runtime passes; nothing of the iteration is committed,
    so a resume runs it again, and the summary says so."""
    pids = tmp_path / "pids"
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path, max_runtime_seconds=2)
    agent = CommandBackend([sys.executable, str(AGENTS / "misbehave.py"), "hang", str(pids)])
    summary, _ = await run_hats(cfg, {"a": agent}, workdir=tmp_path, session_id="r")
    assert summary.reason == "max_runtime"
    assert summary.elapsed < 60
    assert journal_ends(tmp_path, "r") == []
    assert summary.notes == [
        "iteration 1 (a) was in flight as the run stopped: nothing of it was committed, "
        "a resume runs it again"
    ]
    parent, child = (int(x) for x in pids.read_text().split())
    assert not _alive(parent) and not _alive(child)


async def test_a_timed_out_command_keeps_what_it_printed(tmp_path: Path) -> None:
    """The backend's own timeout acts first (the engine's scope is only a backstop), so
    the iteration records the partial output and the stderr tail, not an empty result."""
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "timeout_seconds": 1.0}},
        folder=tmp_path,
        max_consecutive_failures=1,
    )
    agent = CommandBackend([sys.executable, str(AGENTS / "misbehave.py"), "partial-hang"])
    summary, _ = await run_hats(cfg, {"a": agent}, workdir=tmp_path, session_id="p")
    assert summary.reason == "max_consecutive_failures"
    (end,) = journal_ends(tmp_path, "p")
    assert end.reason == "timeout after 1s"
    assert end.output == "partial output\n"
    assert end.meta["stderr_tail"] == "still thinking"
    assert end.duration < 1 + BACKSTOP_SECONDS


def slow_check(ctx: HatContext) -> str:
    """A python hat that takes far longer than its backend's timeout."""
    time.sleep(5)
    return "never"


async def test_a_python_backend_timeout_limits_the_hat(tmp_path: Path) -> None:
    """``timeout_seconds`` of a python backend is the hat's limit when tighter than the
    hat's own (600 s here): the iteration fails at 0.3 s."""
    cfg = make_config(
        {"a": {"triggers": ["task.start"], "timeout_seconds": 600.0}},
        folder=tmp_path,
        max_consecutive_failures=1,
    )
    backend = PythonBackend(f"{__name__}:slow_check", timeout_seconds=0.3)
    summary, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="py")
    assert summary.reason == "max_consecutive_failures"
    (end,) = journal_ends(tmp_path, "py")
    assert end.reason == "timeout after 0.3s"


async def test_max_activations_publishes_exhausted_once_then_stops(tmp_path: Path) -> None:
    """A hat past max_activations gets `<hat>.exhausted` published, and the loop idles out."""
    cfg = make_config(
        {
            "a": {"triggers": ["task.start", "a.again"], "max_activations": 2},
        },
        folder=tmp_path,
    )
    backend = scripted(tag("a.again", "1"), tag("a.again", "2"), tag("a.again", "3"))
    summary, cap = await run_hats(cfg, {"a": backend}, workdir=tmp_path)
    assert summary.iterations == 2
    assert cap.topics(include_loop=False).count("a.exhausted") == 1
    assert summary.reason == "no_pending_events" and summary.exit_code == 3


async def test_a_queue_emptied_by_an_exhausted_hat_says_why_and_what_a_resume_needs(
    tmp_path: Path,
) -> None:
    """Hat a reached max_activations and a.exhausted had no taker: the summary's note says
    so (the events dropped) and what loop.toml needs before a resume, status says it
    beside the command, and a resume as it is stops again; once a hat takes a.exhausted,
    the resume runs it."""
    hats: dict[str, Any] = {"a": {"triggers": ["task.start", "a.again"], "max_activations": 2}}
    cfg = make_config(hats, folder=tmp_path)
    backend = scripted(tag("a.again", "1"), tag("a.again", "2"))
    note = (
        "hat a reached max_activations (2): 1 event(s) for it dropped, and a.exhausted had "
        "no taker; add a hat triggered by a.exhausted to loop.toml before you resume (the "
        "dropped events are gone: raising max_activations brings none back): a resume as "
        "it is stops again"
    )
    for resume in (False, True):  # the run, then a resume as it is
        summary, _ = await run_hats(
            cfg, {"a": backend}, workdir=tmp_path, session_id="x", resume=resume
        )
        assert (summary.reason, summary.iterations, summary.notes) == (
            "no_pending_events",
            2,
            [note],
        )
        assert summary.resume_command == "python -m loop run --resume x"
        status = session_status(tmp_path / ".loop/sessions", "x")
        assert status.resume_command == summary.resume_command
        assert status.resume_after == "loop.toml has a hat triggered by a.exhausted"
    hats["b"] = {"triggers": ["a.exhausted"], "publishes": ["LOOP_COMPLETE"]}
    done, _ = await run_hats(
        make_config(hats, folder=tmp_path),
        {"a": backend, "b": scripted(tag("LOOP_COMPLETE"))},
        workdir=tmp_path,
        session_id="x",
        resume=True,
    )
    assert (done.reason, done.activations) == ("completed", {"a": 2, "b": 1})


def test_a_queue_emptied_with_nothing_a_hat_could_take_offers_no_resume() -> None:
    """No pending event and no exhausted hat's event without a taker: no resume could go
    on, so none is offered; an exhausted hat whose event a hat took is only said."""
    taken = LoopState(exhausted={"a": Exhaustion(3, 2, "a.exhausted", "b")})
    for state in (LoopState(), taken):
        assert resume_command("s", "no_pending_events", state, None) is None
        assert resume_after("no_pending_events", state) is None
    summary = RunSummary.of(
        taken,
        "no_pending_events",
        session_id="s",
        session_dir="d",
        elapsed=1.0,
        resumed=False,
        notes=[],
    )
    assert summary.notes == [
        "hat a reached max_activations (3): 2 event(s) for it dropped, a.exhausted went to hat b"
    ]
    assert "resume" not in render_summary(summary)


class _Blocker(Extension):
    def __init__(self) -> None:
        self.open = 1

    def completion_blocker(self) -> str | None:
        if self.open:
            self.open -= 1
            return "1 task is still open"
        return None


async def test_completion_is_refused_while_an_extension_blocks_it(tmp_path: Path) -> None:
    """The hat is told why (a targeted loop.completion_rejected) and completes later."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    backend = scripted(tag("LOOP_COMPLETE"), tag("LOOP_COMPLETE"))
    summary, cap = await run_hats(cfg, {"a": backend}, workdir=tmp_path, extra=[_Blocker()])
    assert summary.reason == "completed" and summary.iterations == 2
    rejected = [e for e in cap.events if e.topic == "loop.completion_rejected"]
    assert len(rejected) == 1 and rejected[0].target == "a"
    assert "1 task is still open" in rejected[0].payload


def run_checks(ctx: HatContext) -> str:
    """A Python hat: publishes a verdict through ctx.emit."""
    ctx.emit("tests.passed" if "green" in ctx.prompt else "tests.failed", {"n": ctx.iteration})
    return "ran the checks"


async def test_a_python_hat_publishes_through_ctx_emit(tmp_path: Path) -> None:
    """backend python: the function's events reach the next hat."""
    cfg = make_config(
        {
            "checks": {"triggers": ["task.start"], "publishes": ["tests.passed", "tests.failed"]},
            "done": {"triggers": ["tests.passed"]},
        },
        folder=tmp_path,
        prompt="make it green",
    )
    backends = {
        "checks": PythonBackend(f"{__name__}:run_checks"),
        "done": scripted(tag("LOOP_COMPLETE")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path)
    assert summary.reason == "completed"
    verdict = next(e for e in cap.events if not e.topic.startswith("loop."))
    assert verdict.topic == "tests.passed" and verdict.payload == {"n": 1}


async def test_scripted_outputs_running_out_is_a_failed_iteration(tmp_path: Path) -> None:
    """Past the last canned output the iteration fails and says so."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "a.more"]}}, folder=tmp_path, max_consecutive_failures=1
    )
    summary, _ = await run_hats(
        cfg, {"a": scripted(tag("a.more"))}, workdir=tmp_path, session_id="x"
    )
    ends = journal_ends(tmp_path, "x")
    assert "scripted outputs exhausted" in ends[-1].reason
    assert summary.reason == "max_consecutive_failures"


async def test_scripted_outputs_with_repeat_last_answer_every_activation(tmp_path: Path) -> None:
    """With ``repeat_last`` (a stand-in's), past the last output the hat gets it again;
    the same event three times in a row is then a stale loop, as an agent's would be."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "a.more"]}}, folder=tmp_path, max_iterations=4
    )
    outputs = [tag("a.more", "first"), tag("a.more", "then")]
    backend = ScriptedBackend.from_config(ScriptedConfig(outputs=outputs, repeat_last=True))
    summary, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="x")
    ends = journal_ends(tmp_path, "x")
    assert [e.status for e in ends] == ["ok"] * 4
    assert [e.events[0].payload for e in ends] == ["first", "then", "then", "then"]
    assert summary.reason == "stale_loop"


@pytest.mark.parametrize("limit", ["max_iterations", "max_runtime_seconds"])
async def test_iteration_and_runtime_limits_stop_a_loop_that_never_completes(
    tmp_path: Path, limit: str
) -> None:
    """A ping-pong without completion stops at the configured limit (exit 3)."""
    value = 3 if limit == "max_iterations" else 0.000001
    cfg = pingpong(tmp_path, **{limit: value})
    many = [tag("ping.done", str(i)) for i in range(10)]
    backends = {
        "ping": scripted(*many),
        "pong": scripted(*[tag("pong.done", str(i)) for i in range(10)]),
    }
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path)
    expected = "max_iterations" if limit == "max_iterations" else "max_runtime"
    assert summary.reason == expected and summary.exit_code == 3


async def test_prompt_in_a_file_and_the_output_cap(tmp_path: Path) -> None:
    """prompt_via=file hands the child a prompt file; output past the cap is cut, flagged."""
    script = (
        "import sys; text = open(sys.argv[1]).read(); "
        "print('x' * 5000); print('<event topic=\"LOOP_COMPLETE\">' + str(len(text)) + '</event>')"
    )
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    capped = CommandBackend(
        [sys.executable, "-c", script, "{prompt_file}"], prompt_via="file", max_output_bytes=100_000
    )
    summary, cap = await run_hats(cfg, {"a": capped}, workdir=tmp_path, session_id="f")
    assert summary.reason == "completed"
    assert int(next(e for e in cap.events if e.topic == "LOOP_COMPLETE").payload) > 100
    assert (
        (tmp_path / ".loop/sessions/f/iterations/000001/attempt-1/prompt.md")
        .read_text()
        .startswith("# hatloop · iteration 1")
    )
    tiny = CommandBackend(
        [sys.executable, "-c", script, "{prompt_file}"], prompt_via="file", max_output_bytes=1000
    )
    cfg2 = make_config(
        {"a": {"triggers": ["task.start"]}}, folder=tmp_path / "two", max_consecutive_failures=1
    )
    summary2, _ = await run_hats(cfg2, {"a": tiny}, workdir=tmp_path / "two", session_id="g")
    ends = [
        r
        for r in read_journal(tmp_path / "two/.loop/sessions/g/journal.jsonl").records
        if r.kind == "iteration.end"
    ]
    assert len(ends[0].output) == 1000 and ends[0].meta["truncated"] is True
    assert summary2.reason == "max_consecutive_failures"  # the tag was cut off: no event


async def test_a_missing_program_ends_the_run_as_backend_unavailable(tmp_path: Path) -> None:
    """No such program: the run stops at once (exit 1) and says which program is missing."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path)
    missing = CommandBackend([str(tmp_path / "no-such-agent")])
    summary, _ = await run_hats(cfg, {"a": missing}, workdir=tmp_path, session_id="m")
    assert summary.reason == "backend_unavailable" and summary.exit_code == 1
    assert summary.iterations == 0
    assert any("program not found" in note for note in summary.notes)


class CountWrites:
    """Counts ``os.write`` calls on one file descriptor (the journal's)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        self.path = path
        self.writes = 0
        real = os.write

        def write(fd: int, data: Any) -> int:
            if os.path.realpath(f"/proc/self/fd/{fd}") == str(self.path.resolve()):
                self.writes += 1
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)


async def test_each_record_is_one_write_and_iterations_start_before_they_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record is journaled by one write of its own: an iteration's start marker
    before it runs, its end when it commits."""
    cfg = pingpong(tmp_path)
    backends = {
        "ping": scripted(tag("ping.done", "1"), tag("ping.done", "2")),
        "pong": scripted(tag("pong.done", "1"), tag("LOOP_COMPLETE", "done")),
    }
    journal = tmp_path / ".loop/sessions/m/journal.jsonl"
    counter = CountWrites(monkeypatch, journal)
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="m")
    assert summary.iterations == 4
    records = read_journal(journal).records
    kinds = [
        (r.kind, r.iteration if isinstance(r, IterationStart | IterationEnd) else None)
        for r in records
    ]
    assert kinds == [
        ("session.start", None),
        ("iteration.start", 1),
        ("iteration.end", 1),
        ("iteration.start", 2),
        ("iteration.end", 2),
        ("iteration.start", 3),
        ("iteration.end", 3),
        ("iteration.start", 4),
        ("iteration.end", 4),  # completed: no marker for an iteration that will not run
        ("session.end", None),
    ]
    assert counter.writes == len(records)


@pytest.mark.parametrize("durable", [True, False])
async def test_durable_journal_syncs_once_per_commit_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    """Durable: one data sync per commit point (never for a marker alone) and the
    journal's folder synced once; not durable: no sync at all."""
    syncs: list[int] = []
    folder_syncs: list[int] = []
    real_sync, real_fsync = journal_mod._sync, os.fsync

    def sync(fd: int) -> None:
        syncs.append(fd)
        real_sync(fd)

    def fsync(fd: int) -> None:
        folder_syncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(journal_mod, "_sync", sync)
    monkeypatch.setattr(journal_mod.os, "fsync", fsync)
    cfg = pingpong(tmp_path, durable=durable)
    backends = {
        "ping": scripted(tag("ping.done", "1"), tag("ping.done", "2")),
        "pong": scripted(tag("pong.done", "1"), tag("LOOP_COMPLETE", "done")),
    }
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="d")
    assert summary.iterations == 4
    # session.start, four commits, session.end (the start markers are never synced)
    assert len(syncs) == (6 if durable else 0)
    assert len(folder_syncs) == (1 if durable else 0)


async def test_no_marker_follows_the_last_commit_before_a_limit(tmp_path: Path) -> None:
    """Stopped at max_iterations: no start marker after the last commit; nothing in flight."""
    cfg = pingpong(tmp_path, max_iterations=3)
    backends = {
        "ping": scripted(*(tag("ping.done", str(k)) for k in range(5))),
        "pong": scripted(*(tag("pong.done", str(k)) for k in range(5))),
    }
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="x3")
    assert (summary.reason, summary.iterations) == ("max_iterations", 3)
    records = read_journal(tmp_path / ".loop/sessions/x3/journal.jsonl").records
    assert [r.kind for r in records[-2:]] == ["iteration.end", "session.end"]
    starts = [r.iteration for r in records if r.kind == "iteration.start"]
    assert starts == [1, 2, 3]


async def test_the_summary_gives_the_elapsed_time_of_the_sessions_end_record(
    tmp_path: Path,
) -> None:
    """The run's summary (and ``run --json``) says the session's elapsed time as its
    ``session.end`` says it, the figure status and show read: never a later reading."""
    cfg = pingpong(tmp_path)
    backends = {
        "ping": scripted(tag("ping.done", "1")),
        "pong": scripted(tag("LOOP_COMPLETE", "done")),
    }
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="el")
    records = read_journal(tmp_path / ".loop/sessions/el/journal.jsonl").records
    (end,) = [r for r in records if isinstance(r, SessionEnd)]
    assert summary.elapsed == end.elapsed
