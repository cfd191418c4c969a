"""Parallel hats end to end: real subprocess agents that prove they overlap by waiting for
each other (files, no timing), aggregation, failures told to the aggregator, the journal."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loop._text import iterations_text
from loop.backends.command import CommandBackend
from loop.config import McpSection
from loop.engine.journal import read_journal
from loop.records import IterationEnd, IterationStart, JournalRecord
from loop.replay import replay_file, replay_recording
from loop.session.load import load_session
from loop.session.recording import SCHEMA_VERSION
from loop.testing import make_config, run_hats

AGENTS = Path(__file__).parent / "agents"


def wave_config(folder: Path, aggregate: dict[str, Any] | None = None, **loop: Any) -> Any:
    return make_config(
        {
            "coordinator": {"triggers": ["review.start"], "publishes": ["review.perspective"]},
            "reviewer": {
                "triggers": ["review.perspective"],
                "publishes": ["review.done"],
                "concurrency": 3,
            },
            "synthesizer": {
                "triggers": ["review.done", "loop.activation.failed"],
                "publishes": ["LOOP_COMPLETE"],
                "aggregate": aggregate or {"mode": "wait_for_all"},
            },
        },
        folder=folder,
        starting_event="review.start",
        **loop,
    )


def wave_agent(folder: Path, mode: str = "") -> CommandBackend:
    return CommandBackend([sys.executable, str(AGENTS / "wave.py"), str(folder), mode])


def journal(folder: Path, session: str) -> list[JournalRecord]:
    return read_journal(folder / f".loop/sessions/{session}/journal.jsonl").records


def schedule_of(records: list[JournalRecord]) -> list[str]:
    """The journal's interleaving: ``start N hat`` and ``end N hat`` lines."""
    out = []
    for r in records:
        if isinstance(r, IterationStart):
            out.append(f"start {r.iteration} {r.hat}")
        elif isinstance(r, IterationEnd):
            out.append(f"end {r.iteration} {r.hat}")
    return out


async def test_three_reviewers_run_at_once_and_the_aggregator_once_on_all(tmp_path: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(tmp_path / "w")
    agent = wave_agent(signals)
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    records = journal(tmp_path / "w", "s")
    sched = schedule_of(records)
    assert sched[:5] == [
        "start 1 coordinator",
        "end 1 coordinator",
        "start 2 reviewer",
        "start 3 reviewer",
        "start 4 reviewer",
    ]  # the three started before any ended: they ran together (each waited for the others)
    assert sorted(sched[5:8]) == ["end 2 reviewer", "end 3 reviewer", "end 4 reviewer"]
    assert sched[8:] == ["start 5 synthesizer", "end 5 synthesizer"]
    ends = [r for r in records if isinstance(r, IterationEnd)]
    assert [e.activation for e in ends if e.hat == "reviewer"] != []
    assert sorted(e.activation for e in ends if e.hat == "reviewer") == [0, 1, 2]
    synthesis = (signals / "synthesis.txt").read_text()
    for n in (1, 2, 3):
        assert f"findings of perspective {n}" in synthesis
    assert summary.iterations == 5


async def test_three_reviewers_publish_through_the_endpoint_at_once_each_as_itself(
    tmp_path: Path,
) -> None:
    """The session's MCP endpoint under a wave: three activations call ``emit_event`` at
    the same time, each with its own secret; each event lands in that activation's own
    events file, is the reviewer's, and reaches the aggregator once."""
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = replace(wave_config(tmp_path / "w"), mcp=McpSection(serve=True))
    agent = wave_agent(signals, "mcp")
    summary, cap = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    sched = schedule_of(journal(tmp_path / "w", "s"))
    assert sched[2:5] == ["start 2 reviewer", "start 3 reviewer", "start 4 reviewer"]
    files = {}
    for n in (1, 2, 3):
        iteration = int((signals / f"started-{n}").read_text())
        reply = json.loads((signals / f"mcp-{n}.json").read_text())
        files[iteration] = reply["events_file"]
        assert reply["events_file"].endswith(f"s/iterations/{iteration:06d}/attempt-1/events.jsonl")
    assert sorted(files) == [2, 3, 4]
    done = [(e.payload, e.source) for e in cap.events if e.topic == "review.done"]
    assert sorted(done) == [(f"findings of perspective {n}", "reviewer") for n in (1, 2, 3)]
    synthesis = (signals / "synthesis.txt").read_text()
    for n in (1, 2, 3):
        assert f"findings of perspective {n}" in synthesis


async def test_a_failed_activation_of_a_wave_is_told_to_the_aggregator(tmp_path: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(tmp_path / "w")
    agent = wave_agent(signals, "fail2")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    ends = [r for r in journal(tmp_path / "w", "s") if isinstance(r, IterationEnd)]
    failed = [e for e in ends if e.status == "failed"]
    assert len(failed) == 1 and failed[0].hat == "reviewer"  # not run again
    assert [e.hat for e in ends].count("reviewer") == 3
    synthesis = (signals / "synthesis.txt").read_text()
    assert f"iteration {failed[0].iteration} (reviewer) failed" in synthesis
    assert "reviewer 2 broke" in synthesis
    assert "findings of perspective 1" in synthesis and "findings of perspective 3" in synthesis


async def test_quorum_cancels_the_rest_of_the_wave_and_kills_its_process(tmp_path: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(tmp_path / "w", {"mode": "quorum", "count": 2})
    agent = wave_agent(signals, "hang3")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    pid = int((signals / "pid-3").read_text())
    assert not _alive(pid)  # its process group was killed when the quorum was met
    ends = [r for r in journal(tmp_path / "w", "s") if isinstance(r, IterationEnd)]
    cancelled = [e for e in ends if e.status == "failed"]
    assert len(cancelled) == 1 and "quorum was met" in (cancelled[0].reason or "")
    synthesis = (signals / "synthesis.txt").read_text()
    assert synthesis.count("findings of perspective") == 2
    assert "quorum was met" in synthesis


async def test_max_iterations_counts_activations_and_lets_the_wave_commit(tmp_path: Path) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(tmp_path / "w", max_iterations=3)
    agent = wave_agent(signals, "solo")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "max_iterations", summary
    sched = schedule_of(journal(tmp_path / "w", "s"))
    assert [s for s in sched if s.startswith("start")] == [
        "start 1 coordinator",
        "start 2 reviewer",
        "start 3 reviewer",
    ]
    assert sorted(s for s in sched if s.startswith("end")) == [
        "end 1 coordinator",
        "end 2 reviewer",
        "end 3 reviewer",
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] not in ("Z", "X")


async def record_wave(folder: Path) -> Path:
    """A recording of the three-reviewer wave, with real subprocess agents."""
    from loop.runner import RunOptions, run_loop
    from loop.session.recorder import Recorder

    signals = folder / "signals"
    signals.mkdir(parents=True)
    cfg = wave_config(folder / "w")
    path = folder / "wave.jsonl"
    options = RunOptions(
        workdir=folder / "w",
        session_id="rec",
        progress=False,
        backends=dict.fromkeys(cfg.hats, wave_agent(signals)),
        handle_signals=False,
    )
    summary = await run_loop(cfg, options, [Recorder(path)])
    assert summary.reason == "completed", summary
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def schedule_lines(records: list[dict[str, Any]]) -> list[str]:
    kinds = {"start": "start", "iteration": "end"}
    return [f"{kinds[r['kind']]} {r['iteration']}" for r in records if r["kind"] in kinds]


async def test_a_parallel_recording_keeps_the_interleaving_and_replays(tmp_path: Path) -> None:
    path = await record_wave(tmp_path)
    records = lines(path)
    assert records[0]["schema_version"] == SCHEMA_VERSION  # 3 and later hold start lines
    sched = schedule_lines(records)
    assert sched[:5] == ["start 1", "end 1", "start 2", "start 3", "start 4"]
    assert sched[-2:] == ["start 5", "end 5"]
    result = await replay_recording(path)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == result.expected_iterations == 5
    # another commit order (the reviewers ended the other way round) replays as recorded
    ends = [i for i, r in enumerate(records) if r["kind"] == "iteration" and r["hat"] == "reviewer"]
    swapped = list(records)
    swapped[ends[0]], swapped[ends[-1]] = records[ends[-1]], records[ends[0]]
    other = tmp_path / "swapped.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in swapped))
    result = await replay_recording(other)
    assert result.ok, result.divergence and result.divergence.render()


async def test_a_parallel_replay_that_schedules_otherwise_diverges(tmp_path: Path) -> None:
    path = await record_wave(tmp_path)
    records = lines(path)
    starts = [i for i, r in enumerate(records) if r["kind"] == "start" and r["hat"] == "reviewer"]
    moved = list(records)
    moved.insert(starts[0], moved.pop(starts[-1] + 1))  # a reviewer "ended" before it started
    edited = tmp_path / "moved.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in moved))
    result = await replay_recording(edited)
    assert not result.ok and result.divergence is not None
    assert "schedule differs" in result.divergence.what


def test_a_start_on_other_pending_events_diverges(tmp_path: Path) -> None:
    """A start line's triggers (the pending events it ran on) are part of the schedule a
    replay reproduces: the synthesizer's start edited from events 5, 6 and 7 to 5 and 6
    is a divergence that shows both (it replayed ok)."""
    wave = Path(__file__).resolve().parents[2] / "recordings" / "wave.jsonl"
    records = lines(wave)
    (start,) = [r for r in records if r["kind"] == "start" and r["hat"] == "synthesizer"]
    assert start["triggers"] == [5, 6, 7]
    start["triggers"] = [5, 6]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = replay_file(edited)
    assert result.divergence is not None
    assert result.divergence.iteration == 5
    assert result.divergence.what == (
        "hat synthesizer: the activation started on other pending events"
    )
    assert result.divergence.expected[-1] == "start 5 synthesizer on events 5, 6"
    assert result.divergence.actual[-1] == "start 5 synthesizer on events 5, 6, 7"


def _wave_toml(signals: Path, mode: str, *, tasks: bool = False, max_iterations: int = 100) -> str:
    command = [sys.executable, str(AGENTS / "wave.py"), str(signals), mode]
    return f"""
[loop]
prompt = "review"
starting_event = "review.start"
max_iterations = {max_iterations}
[tasks]
enabled = {json.dumps(tasks)}
block_completion = false
[themes]
enabled = false
[experience]
enabled = false
[backend]
type = "command"
command = {json.dumps(command)}
[hats.coordinator]
triggers = ["review.start"]
publishes = ["review.perspective"]
[hats.reviewer]
triggers = ["review.perspective"]
publishes = ["review.done"]
concurrency = 3
[hats.synthesizer]
triggers = ["review.done"]
publishes = ["LOOP_COMPLETE"]
aggregate = {{ mode = "wait_for_all" }}
"""


def _wait_for(check: Any, what: str) -> None:
    import time

    deadline = time.monotonic() + 120  # a safety net: the files come long before
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


_RUN = [sys.executable, "-m", "loop", "run", "-q", "--session-id", "s"]


def _kill_mid_wave(tmp_path: Path, signals: Path, env: dict[str, str]) -> Path:
    """Run the wave of ``tmp_path``'s ``loop.toml`` (a ``hold`` one) recorded to
    ``rec.jsonl``, and kill -9 the loop once
    reviewer 2 (perspective 2, iteration 3) committed while 1 and 3 (iterations 2 and 4)
    still run; the journal's path."""
    import signal
    import subprocess

    proc = subprocess.Popen(
        [*_RUN, "--record-session", "rec.jsonl"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal_path = tmp_path / ".loop/sessions/s/journal.jsonl"

    def reviewer_committed() -> bool:
        if not journal_path.exists():
            return False
        return any(
            json.loads(line).get("kind") == "iteration.end"
            and json.loads(line).get("hat") == "reviewer"
            for line in journal_path.read_text().splitlines()
            if line.strip()
        )

    try:
        _wait_for(lambda: (signals / "pid-1").exists() and (signals / "pid-3").exists(), "hold")
        _wait_for(reviewer_committed, "a reviewer committed")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -9
    return journal_path


def _resume_released(tmp_path: Path, env: dict[str, str]) -> None:
    """``run --resume s``, recording on, once the held reviewers are released: it ends."""
    import subprocess

    resumed = subprocess.run(
        [*_RUN[:-2], "--resume", "s", "--record-session", "rec.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr


def test_kill_9_with_a_wave_in_flight_resumes_exactly_the_uncommitted(tmp_path: Path) -> None:
    """Killed while two reviewers run and one has committed: the resume runs the two
    again (not the committed one), then the aggregator once."""
    signals = tmp_path / "signals"
    signals.mkdir()
    (tmp_path / "loop.toml").write_text(_wave_toml(signals, "hold"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    journal_path = _kill_mid_wave(tmp_path, signals, env)
    held = [int((signals / f"pid-{n}").read_text()) for n in (1, 3)]
    assert all(_alive(pid) for pid in held)  # the killed loop could not stop them
    before = [json.loads(x) for x in journal_path.read_text().splitlines()]
    started = {r["iteration"] for r in before if r["kind"] == "iteration.start"}
    ended = {r["iteration"]: r for r in before if r["kind"] == "iteration.end"}
    assert started == {1, 2, 3, 4} and set(ended) == {1, 2, 3, 4} - (started - set(ended))
    uncommitted = started - set(ended)
    assert len(uncommitted) == 2

    (signals / "release").write_text("")
    _resume_released(tmp_path, env)
    after = [json.loads(x) for x in journal_path.read_text().splitlines()]
    resume = next(r for r in after if r["kind"] == "resume")
    assert resume["in_flight_all"] == sorted(uncommitted)  # all of them, not only the first
    assert resume["in_flight"] == min(uncommitted)  # as before parallel hats
    assert set(held) <= set(resume["stopped"])  # the resume stopped both orphans first
    assert not any(_alive(pid) for pid in held)
    ends = [r for r in after if r["kind"] == "iteration.end"]
    reviewers = [r for r in ends if r["hat"] == "reviewer"]
    assert len(reviewers) == 3  # the committed one once, the two uncommitted once each
    payloads = sorted(t["payload"] for r in reviewers for t in r["triggers"])
    assert payloads == ["perspective-1", "perspective-2", "perspective-3"]
    assert [r["hat"] for r in ends].count("synthesizer") == 1
    assert after[-1]["kind"] == "session.end" and after[-1]["reason"] == "completed"
    # show: the three ran together: the two the kill cut short ran with the one that
    # committed before it, and again with each other under their own numbers after it
    cut = after.index(resume)
    (done,) = [r["iteration"] for r in after[:cut] if r in reviewers]
    first, second = [r["iteration"] for r in after[cut:] if r in reviewers]
    for view in (load_session(journal_path), load_session(tmp_path / "rec.jsonl")):
        lanes = {it.iteration: it.ran_with for it in view.iterations if it.hat == "reviewer"}
        assert lanes == {
            done: tuple(sorted((first, second))),
            first: tuple(sorted((done, second))),
            second: tuple(sorted((done, first))),
        }, lanes
    result = replay_file(tmp_path / "rec.jsonl")
    assert result.ok, result.divergence and result.divergence.render()


def test_a_resume_runs_the_activations_cut_short_under_their_own_numbers(tmp_path: Path) -> None:
    """Killed while iterations 2 and 4 run and after 3 committed, each reviewer having
    made a task: the resume runs 2 and 4 again as themselves (their second attempts), not
    as new iterations. Every number started ends, once; the re-run's task is the one its
    interrupted attempt made (3 tasks, not 5); max_iterations = 5, the wave's five
    activations, still completes it; show finds iteration 2; the recording replays."""
    import subprocess

    signals = tmp_path / "signals"
    signals.mkdir()
    toml = _wave_toml(signals, "hold-tasks", tasks=True, max_iterations=5)
    (tmp_path / "loop.toml").write_text(toml)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    journal_path = _kill_mid_wave(tmp_path, signals, env)
    before = [json.loads(x) for x in journal_path.read_text().splitlines()]
    assert [r["iteration"] for r in before if r["kind"] == "iteration.end"] == [1, 3]
    (signals / "release").write_text("")
    _resume_released(tmp_path, env)
    records = read_journal(journal_path).records
    after = schedule_of(records[len(before) :])
    assert sorted(after[:2]) == ["start 2 reviewer", "start 4 reviewer"], after
    assert after[-2:] == ["start 5 synthesizer", "end 5 synthesizer"], after
    again = {r.iteration: r.attempt for r in records if isinstance(r, IterationStart)}
    assert again == {1: 1, 2: 2, 3: 1, 4: 2, 5: 1}  # each number's last attempt
    ends = [r for r in records if isinstance(r, IterationEnd)]
    assert sorted(r.iteration for r in ends) == [1, 2, 3, 4, 5]  # each once, none lost
    reran = {r.iteration: r for r in ends if r.iteration in (2, 4)}
    assert [str(reran[n].triggers[0].payload) for n in (2, 4)] == ["perspective-1", "perspective-3"]
    assert records[-1].kind == "session.end" and records[-1].reason == "completed"
    # the task each re-run made is the one its interrupted attempt made
    listed = subprocess.run(
        [sys.executable, "-m", "loop", "task", "list", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    names = sorted(t["name"] for t in json.loads(listed.stdout)["tasks"])
    assert names == ["review 1", "review 2", "review 3"], names
    shown = subprocess.run(
        [sys.executable, "-m", "loop", "show", "s", "-i", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0 and "iteration 2 of session s" in shown.stdout, shown.stderr
    result = replay_file(tmp_path / "rec.jsonl")
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == 5


def test_sigint_stops_every_activation_and_its_process_group(tmp_path: Path) -> None:
    """SIGINT with two reviewers running: the loop ends as interrupted (130), and both
    reviewers' processes are gone; the summary, status, show and the resume name the
    activations it cut short, and the recording of the interrupted and resumed wave
    replays."""
    import signal
    import subprocess

    signals = tmp_path / "signals"
    signals.mkdir()
    (tmp_path / "loop.toml").write_text(_wave_toml(signals, "hold"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loop",
            "run",
            "-q",
            "--session-id",
            "s",
            "--record-session",
            "r.jsonl",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: (signals / "pid-1").exists() and (signals / "pid-3").exists(), "hold")
        held = [int((signals / f"pid-{n}").read_text()) for n in (1, 3)]
        assert all(_alive(pid) for pid in held)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert not any(_alive(pid) for pid in held)
    journal_path = tmp_path / ".loop/sessions/s/journal.jsonl"
    records = [json.loads(x) for x in journal_path.read_text().splitlines()]
    end = records[-1]
    assert end["kind"] == "session.end" and end["reason"] == "interrupted"
    started = {r["iteration"] for r in records if r["kind"] == "iteration.start"}
    cut = sorted(started - {r["iteration"] for r in records if r["kind"] == "iteration.end"})
    assert len(cut) >= 2  # the two held reviewers (the third may have committed)
    # the summary, status and show name the activations the interrupt cut short
    named = f"{iterations_text(cut)} (reviewer)"
    assert f"{named} were in flight as the run stopped: nothing of them was committed" in stdout
    loop = [sys.executable, "-m", "loop"]
    status = subprocess.run(
        [*loop, "status", "s", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(status.stdout)["in_flight_all"] == cut, status.stdout
    show = subprocess.run(
        [*loop, "show", "s"], cwd=tmp_path, env=env, capture_output=True, check=False
    )
    assert b"were in flight as the session ended (interrupted)" in show.stdout, show.stdout
    (signals / "release").write_text("")
    resumed = subprocess.run(
        [*loop, "run", "-q", "--resume", "s", "--record-session", "r.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    after = [json.loads(x) for x in journal_path.read_text().splitlines()]
    resume = next(r for r in after if r["kind"] == "resume")
    assert resume["in_flight_all"] == cut  # they run again, and the resume says so
    result = replay_file(tmp_path / "r.jsonl")  # the interrupted, resumed wave replays
    assert result.ok, result.divergence and result.divergence.render()


async def test_show_and_report_show_the_activations_that_ran_together(tmp_path: Path) -> None:
    """From the recording and from the journal: each reviewer ran with the other two; the
    overview says so and the report's timeline gives each its own lane."""
    from loop.commands.inspect import render_show
    from loop.commands.report_svg import timeline_svg
    from loop.session.load import load_session

    path = await record_wave(tmp_path)
    journal_path = tmp_path / "w/.loop/sessions/rec/journal.jsonl"
    for view in (load_session(path), load_session(journal_path)):
        lanes = {it.iteration: it.ran_with for it in view.iterations}
        assert lanes == {1: (), 2: (3, 4), 3: (2, 4), 4: (2, 3), 5: ()}
        shown = render_show(view)
        assert "(ran with #3, #4)" in shown and "(ran with #2, #3)" in shown
        svg = timeline_svg(view)
        assert ">reviewer<" in svg and ">reviewer ∥2<" in svg and ">reviewer ∥3<" in svg
        assert "∥4" not in svg and "coordinator ∥" not in svg


async def test_max_parallel_runs_hats_of_different_kinds_at_once(tmp_path: Path) -> None:
    """With max_parallel = 2, the left and right hats run together (each waits for the
    other to start); the joiner aggregates both."""
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = make_config(
        {
            "splitter": {"triggers": ["task.start"], "publishes": ["left.go", "right.go"]},
            "left": {"triggers": ["left.go"], "publishes": ["side.done"]},
            "right": {"triggers": ["right.go"], "publishes": ["side.done"]},
            "joiner": {
                "triggers": ["side.done"],
                "publishes": ["LOOP_COMPLETE"],
                "aggregate": {"mode": "wait_for_all"},
            },
        },
        folder=tmp_path / "w",
        max_parallel=2,
    )
    agent = CommandBackend([sys.executable, str(AGENTS / "pair.py"), str(signals)])
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    sched = schedule_of(journal(tmp_path / "w", "s"))
    assert sched[2:4] == ["start 2 left", "start 3 right"]
    assert sched[-2:] == ["start 4 joiner", "end 4 joiner"]


async def test_the_aggregate_timeout_cancels_what_still_runs_and_says_so(tmp_path: Path) -> None:
    """wait_for_all with timeout_seconds: a reviewer that hangs is cancelled when the
    wave's time is up (its process killed), and the synthesizer is told it timed out."""
    signals = tmp_path / "signals"
    signals.mkdir()
    # the wave's time is up 4 s after its first start: the two others end long before,
    # unless the machine is very busy; the test holds either way
    cfg = wave_config(tmp_path / "w", {"mode": "wait_for_all", "timeout_seconds": 4})
    agent = wave_agent(signals, "hang3")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    assert not _alive(int((signals / "pid-3").read_text()))
    ends = [r for r in journal(tmp_path / "w", "s") if isinstance(r, IterationEnd)]
    reviewers = [e for e in ends if e.hat == "reviewer"]
    timed_out = [e for e in reviewers if e.status == "failed"]
    assert len(reviewers) == 3 and timed_out
    assert all("timed out" in (e.reason or "") for e in timed_out)
    hung = next(e for e in reviewers if "perspective-3" in str(e.triggers[0].payload))
    assert hung in timed_out
    synthesis = (signals / "synthesis.txt").read_text()
    assert synthesis.count("findings of perspective") == 3 - len(timed_out)
    for e in timed_out:
        assert f"iteration {e.iteration} (reviewer) failed: timed out" in synthesis


async def test_an_aggregate_timeout_holds_from_the_waves_start_when_every_agent_hangs(
    tmp_path: Path,
) -> None:
    """Three reviewers that all hang: the wave is cancelled when its time is up, though
    none of it ever ends (no commit plans the scheduler again), and the three timed-out
    activations do not count as failures in a row (three is the default limit): the
    synthesizer runs, told of each."""
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(
        tmp_path / "w",
        {"mode": "wait_for_all", "timeout_seconds": 3},
        max_runtime_seconds=300,  # without the deadline, the run would end here
    )
    agent = wave_agent(signals, "hangall")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "completed", summary
    ends = [r for r in journal(tmp_path / "w", "s") if isinstance(r, IterationEnd)]
    reviewers = [e for e in ends if e.hat == "reviewer"]
    assert len(reviewers) == 3
    assert all(e.status == "failed" and "timed out" in (e.reason or "") for e in reviewers)
    for pid_file in signals.glob("pid-*"):  # each one that started its agent
        assert not _alive(int(pid_file.read_text()))
    synthesis = (signals / "synthesis.txt").read_text()
    for e in reviewers:
        assert f"iteration {e.iteration} (reviewer) failed: timed out" in synthesis


@pytest.mark.parametrize(
    "crash_at",
    [
        "iteration.start:2",  # the first reviewer's start journaled, nothing of it run
        "iteration.start:4",  # all three started
        "iteration.end:2",  # a reviewer's end about to be journaled
        "iteration.committed:3",  # two reviewers committed
        "iteration.recorded:2",  # a reviewer committed, its recording line maybe not
        "publish:2",  # while publishing a reviewer's events
    ],
)
def test_a_wave_killed_at_any_point_resumes_and_its_recording_replays(
    crash_at: str, tmp_path: Path
) -> None:
    """kill -9 at each point of a wave: the resume commits each perspective once and
    the aggregator once, and the recording (killed, then resumed) replays."""
    import subprocess

    signals = tmp_path / "signals"
    signals.mkdir()
    (tmp_path / "loop.toml").write_text(_wave_toml(signals, "solo"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    run = [sys.executable, "-m", "loop", "run", "-q", "--record-session", "rec.jsonl"]
    killed = subprocess.run(
        [*run, "--session-id", "s"],
        cwd=tmp_path,
        env=env | {"HATLOOP_CRASH_AT": crash_at},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run(
        [*run, "--resume", "s"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    ends = [r for r in journal(tmp_path, "s") if isinstance(r, IterationEnd)]
    reviewers = sorted(str(t.payload) for r in ends if r.hat == "reviewer" for t in r.triggers)
    assert reviewers == ["perspective-1", "perspective-2", "perspective-3"]
    assert [r.hat for r in ends].count("synthesizer") == 1
    result = replay_file(tmp_path / "rec.jsonl")
    assert result.ok, result.divergence and result.divergence.render()


async def test_max_runtime_cancels_a_hanging_wave_when_it_passes(tmp_path: Path) -> None:
    """A reviewer hangs: max_runtime_seconds stops the loop as it passes, though nothing
    ends then; the hung activation is cancelled (its process killed), not committed."""
    signals = tmp_path / "signals"
    signals.mkdir()
    cfg = wave_config(tmp_path / "w", max_runtime_seconds=3)
    agent = wave_agent(signals, "hang3")
    summary, _ = await run_hats(
        cfg, dict.fromkeys(cfg.hats, agent), workdir=tmp_path / "w", session_id="s"
    )
    assert summary.reason == "max_runtime", summary
    assert summary.elapsed < 60  # the hung agent sleeps far longer; its timeout is 600 s
    assert not _alive(int((signals / "pid-3").read_text()))
    ends = [r for r in journal(tmp_path / "w", "s") if isinstance(r, IterationEnd)]
    assert all("perspective-3" not in str(e.triggers[0].payload) for e in ends)
