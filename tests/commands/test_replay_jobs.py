"""`replay DIR --jobs N --shard K/N --junit FILE`: the real CLI, real worker processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from loop.cli import main
from loop.commands.replay_worker import crash_point_name
from tests.commands.terminal import Terminal

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "recordings" / "default.jsonl"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}


def diverging(source: Path = GOOD) -> str:
    """``source`` with its second iteration's hat changed: a replay diverges there."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    iterations = [r for r in records if r["kind"] == "iteration"]
    hats = sorted(records[0]["hats"])
    iterations[1]["hat"] = next(h for h in hats if h != iterations[1]["hat"])
    return "".join(json.dumps(r) + "\n" for r in records)


def suite(folder: Path, good: int, *, bad: bool = False, broken: bool = False) -> Path:
    """``folder`` with ``good`` copies of a recording, maybe a diverging and a broken one."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(good):
        (folder / f"r{i:02d}.jsonl").write_bytes(GOOD.read_bytes())
    if bad:
        (folder / "r05_diverges.jsonl").write_text(diverging(), encoding="utf-8")
    if broken:
        (folder / "r07_broken.jsonl").write_text('{"file": "a.wav"}\n', encoding="utf-8")
    return folder


def verdicts(out: str) -> list[tuple[str, str]]:
    """``(status word, path)`` of each result row, in the order printed."""
    found = []
    for line in out.splitlines():
        match = re.match(r"^(ok|DIVERGED|ERROR) +(\S+?\.jsonl)", line)
        if match:
            found.append((match[1], match[2]))
    return found


def test_the_summary_counts_the_jobs_used_not_the_jobs_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--jobs 100000 on one recording replays it in this process: the summary says 1 job."""
    assert main(["replay", str(GOOD), "--jobs", "100000"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.search(r" \(1 job, [0-9.]+s of replays\)$", summary), summary


def test_jobs_gives_the_rows_of_one_job_in_the_same_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--jobs 2 prints what --jobs 1 prints, in the same order; one summary; exit 2 for
    the broken recording; the diff of the diverging one."""
    folder = suite(tmp_path / "suite", 8, bad=True, broken=True)
    assert main(["replay", str(folder), "--jobs", "1", "--log-format", "json"]) == 2
    one = capsys.readouterr().out
    assert main(["replay", str(folder), "--jobs", "2", "--log-format", "json"]) == 2
    two, err = capsys.readouterr()
    assert verdicts(two) == verdicts(one)
    assert len(verdicts(two)) == 10
    assert [p for _, p in verdicts(two)] == sorted(str(p) for p in folder.glob("*.jsonl"))
    assert "diverged at iteration 2: a different hat ran" in two
    assert "r07_broken.jsonl:1: not a hatloop recording" in two
    assert re.search(r"^10 recording\(s\): 8 passed, 1 diverged, 1 error\(s\) in ", two, re.M)
    assert "(2 jobs, " in two
    assert f"diverged: {folder / 'r05_diverges.jsonl'}" in two
    assert "replay: 10 recording(s) in 2 worker processes" in err
    assert "replay: 10/10 done: 8 passed, 1 diverged, 1 error(s)" in err


def test_exit_codes_match_the_single_recording_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 when all pass, 4 when one diverged; the JUnit file has one case per recording."""
    good = suite(tmp_path / "good", 3)
    assert main(["replay", str(good), "-j", "2", "--log-format", "json"]) == 0
    diverges = suite(tmp_path / "diverges", 3, bad=True)
    report = tmp_path / "reports" / "replay.xml"
    code = main(
        ["replay", str(diverges), "-j", "auto", "--junit", str(report), "--log-format", "json"]
    )
    assert code == 4
    assert f"JUnit XML written to {report}" in capsys.readouterr().out
    cases = ET.parse(report).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == sorted(str(p) for p in diverges.glob("*.jsonl"))
    failure = ET.parse(report).getroot().find(".//failure")
    assert failure is not None
    assert "a different hat ran" in str(failure.text)


def test_shards_split_a_folder_across_machines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--shard 1/3, 2/3, 3/3 replay every recording exactly once between them."""
    folder = suite(tmp_path / "suite", 7)
    seen: list[str] = []
    for k in (1, 2, 3):
        assert main(["replay", str(folder), "--shard", f"{k}/3", "--log-format", "json"]) == 0
        out, err = capsys.readouterr()
        seen += [p for _, p in verdicts(out)]
        assert f"shard {k}/3: " in err
        assert f"shard {k}/3)" in out
    assert sorted(seen) == sorted(str(p) for p in folder.glob("*.jsonl"))
    assert len(seen) == 7


@pytest.mark.parametrize("shard", ["0/3", "4/3", "one/two"])
def test_a_bad_shard_is_exit_2_with_one_line(tmp_path: Path, shard: str) -> None:
    """The real CLI refuses a bad K/N before replaying anything: exit 2, one line."""
    folder = suite(tmp_path / "suite", 1)
    proc = subprocess.run(
        [sys.executable, "-m", "loop", "replay", str(folder), "--shard", shard],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: --shard ")
    assert proc.stderr.count("\n") == 1


def test_a_worker_that_dies_gives_an_error_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker SIGKILLed on one recording: that row is an error, the rest still replay,
    exit 1, and the JUnit file has the error."""
    folder = suite(tmp_path / "suite", 6)
    victim = folder / "r03.jsonl"
    monkeypatch.setenv("HATLOOP_CRASH_AT", f"{crash_point_name(victim)}:1")  # workers read it
    report = tmp_path / "junit.xml"
    code = main(
        ["replay", str(folder), "--jobs", "2", "--junit", str(report), "--log-format", "json"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert f"ERROR    {victim}: the worker process replaying it died (killed by SIGKILL)" in out
    assert [s for s, _ in verdicts(out)] == ["ok"] * 3 + ["ERROR"] + ["ok"] * 2
    assert "6 recording(s): 5 passed, 0 diverged, 1 error(s)" in out
    error = ET.parse(report).getroot().find(f".//testcase[@name='{victim}']/error")
    assert error is not None


def _processes_under(scratch: Path) -> list[int]:
    """The processes whose TMPDIR is inside ``scratch`` (the replay's workers get their
    own temporary folder there)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(v.startswith(f"TMPDIR={scratch}/".encode()) for v in environ):
            pids.append(int(proc.name))
    return pids


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_stops_the_workers_and_exits_130(tmp_path: Path) -> None:
    """SIGINT while the workers are inside replays: exit 130, the summary of what was
    done, and no worker is left (none of the processes it started runs on)."""
    folder = suite(tmp_path / "suite", 200)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with subprocess.Popen(
        [sys.executable, "-m", "loop", "replay", str(folder), "--jobs", "2", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**ENV, "CI": "true", "TMPDIR": str(scratch)},
    ) as proc:
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # the first tenth is done: the workers are busy
                if line.startswith("replay: 20/200 done"):
                    break
            assert len(_processes_under(scratch)) == 2, "the two workers run"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "error: interrupted" in err
    assert re.search(r"^interrupted: \d+ of 200 recording\(s\) not replayed$", out, re.M)
    assert _processes_under(scratch) == []


def test_a_worker_killed_mid_replay_leaves_no_temporary_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers SIGKILLed inside a replay (its temporary folder made): each recording is
    an error row, and the temporary folders they were using are gone with the run."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("HATLOOP_CRASH_AT", "iteration.start:1")  # each worker's first
    folder = suite(tmp_path / "suite", 3)
    assert main(["replay", str(folder), "--jobs", "2", "--log-format", "json"]) == 1
    out = capsys.readouterr().out
    assert [s for s, _ in verdicts(out)] == ["ERROR"] * 3
    assert out.count("died (killed by SIGKILL)") == 3
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(("signum", "jobs"), [("SIGTERM", 1), ("SIGTERM", 2), ("SIGINT", 2)])
def test_a_signal_interrupts_with_a_summary_and_leaves_no_temporary_folder(
    tmp_path: Path, signum: str, jobs: int
) -> None:
    """SIGTERM (a CI job's timeout) stops a replay as Ctrl-C does, in this process or in
    workers: the summary of what was done, exit 130, and no temporary folder left."""
    folder = suite(tmp_path / "suite", 200)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with subprocess.Popen(
        [sys.executable, "-m", "loop", "replay", str(folder), "--jobs", str(jobs), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**ENV, "CI": "true", "TMPDIR": str(scratch)},
    ) as proc:
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # the first tenth is done: the run is surely in flight
                if line.startswith("replay: 20/200 done"):
                    break
            proc.send_signal(getattr(signal, signum))
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "error: interrupted" in err
    match = re.search(r"^interrupted: (\d+) of 200 recording\(s\) not replayed$", out, re.M)
    assert match is not None, out
    assert 0 < int(match[1]) <= 180
    assert list(scratch.iterdir()) == []


def test_a_terminal_shows_a_live_counter(tmp_path: Path) -> None:
    """On a terminal the counter is redrawn in place; the rows and summary still print."""
    folder = suite(tmp_path / "suite", 4)
    env = {k: v for k, v in ENV.items() if k not in ("CI", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    term = Terminal("replay", str(folder), "--jobs", "2", cwd=tmp_path, env=env)
    assert term.finish() == 0
    assert "\r\x1b[K[4/4 done: 4 passed, 0 diverged, 0 error(s)]" in term.text
    assert "4 recording(s): 4 passed, 0 diverged, 0 error(s)" in term.plain
    assert "replay: 4 recording(s)" not in term.plain  # no plain progress lines


def test_one_recording_shows_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    """Replaying one file prints its row and the summary, and no progress lines."""
    assert main(["replay", str(GOOD), "--log-format", "json"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"ok       {GOOD}: ")
    assert "replay: " not in err
