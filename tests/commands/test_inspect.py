"""`loop show` and `loop events`: a session from its id, its journal or its recording.

The sessions are made by real runs of the CLI (`python -m loop run`, the default preset,
with `--record-session`); `show` and `events` then run in-process on their files.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import pytest
import structlog

from loop.cli import main
from loop.engine.journal import read_journal
from loop.engine.records import session_end
from loop.engine.session_dir import SessionLock
from loop.records import JOURNAL_VERSION, IterationEnd, Resume, SessionStart, encode_record
from loop.session.store import status_elapsed
from tests.commands.helpers import ENV, loop, waited_session

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Made:
    """A folder where real runs left sessions, and what their summaries said."""

    folder: Path
    summary: str  # stdout of the recorded run
    resumed_summary: str  # stdout of the resumed run of session `split`

    @property
    def journal(self) -> Path:
        return self.folder / ".loop/sessions/demo/journal.jsonl"

    @property
    def recording(self) -> Path:
        return self.folder / "demo.jsonl"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    """Session `demo`, recorded; session `split`, stopped by a limit then resumed, both
    into one recording."""
    folder = tmp_path_factory.mktemp("runs")
    first = loop("run", "-q", "--session-id", "demo", "--record-session", "demo.jsonl", cwd=folder)
    assert first.returncode == 0, first.stderr
    args = ("-q", "--record-session", "split.jsonl")
    stopped = loop("run", "--session-id", "split", "--max-iterations", "2", *args, cwd=folder)
    assert stopped.returncode == 3, stopped.stderr
    resumed = loop("run", "--resume", "split", "--max-iterations", "20", *args, cwd=folder)
    assert resumed.returncode == 0, resumed.stderr
    return Made(folder, first.stdout, resumed.stdout)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main()` configures structlog for the process; put the previous set-up back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]


# -- show -----------------------------------------------------------------------------------


def test_show_reads_a_session_id_its_journal_and_its_recording(
    made: Made, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same five iterations from the id (in its folder), the journal and the recording."""
    monkeypatch.chdir(made.folder)
    expected = ["planner", "builder", "reviewer", "builder", "reviewer"]
    for target, source in (
        ("demo", "journal"),
        (str(made.journal), "journal"),
        (str(made.journal.parent), "journal"),
        (str(made.recording), "recording"),
    ):
        code, out, err = run(capsys, "show", target)
        assert (code, err) == (0, ""), target
        assert out.startswith(source)
        rows = rows_of(out)
        assert [r[1] for r in rows] == expected, target
        assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
        assert rows[2][-1] == "review.rejected"
        assert "end   completed after 5 iteration(s)" in out


def test_show_without_a_target_is_the_most_recent_session(
    made: Made, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No argument: the session the last run wrote (`split`, resumed last)."""
    monkeypatch.chdir(made.folder)
    code, out, _ = run(capsys, "show")
    assert code == 0
    assert "session split ·" in out


def test_show_counts_the_records_the_run_summary_counted(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run summary's "N records" is the records in the file, footer included; show
    says the same (the footer's own `records` field counts those before it)."""
    said = re.search(r"recording demo\.jsonl: (\d+) records", made.summary)
    assert said is not None, made.summary
    lines = made.recording.read_text(encoding="utf-8").splitlines()
    assert int(said.group(1)) == len(lines) == 7
    assert json.loads(lines[-1])["records"] == 6
    _, out, _ = run(capsys, "show", str(made.recording))
    assert "(exit 0) · 7 records · 0 write failure(s)" in out
    _, out, _ = run(capsys, "show", str(made.recording), "--json")
    assert json.loads(out)["records"] == 7


def test_show_of_a_resumed_recording_counts_the_file_and_its_last_run(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording that was resumed: every record in it, and what the last run wrote (what
    its summary said); the first end and the resume sit in the timeline where they were."""
    path = made.folder / "split.jsonl"
    said = re.search(r"recording split\.jsonl: (\d+) records", made.resumed_summary)
    assert said is not None, made.resumed_summary
    total = len(path.read_text(encoding="utf-8").splitlines())
    _, out, _ = run(capsys, "show", str(path))
    assert f"· {total} records (its last run wrote {said.group(1)})" in out
    lines = out.splitlines()
    ended = lines.index("    --  ended: max_iterations after 2 iteration(s) (exit 3)")
    assert lines[ended - 1].split()[0] == "2"
    assert lines[ended + 1].startswith("    --  resumed: ")
    # the resume's --max-iterations 20, in the timeline where it took effect
    assert lines[ended + 2] == "    --  override: from here on: max_iterations 20"  # what changed
    assert lines[ended + 3].split()[0] == "3"
    _, out, _ = run(capsys, "show", str(made.folder / ".loop/sessions/split"))
    assert "    --  resumed: resumed by pid " in out
    assert "    --  override: from here on: max_iterations 20\n" in out
    assert "completed after 5 iteration(s)" in out


def test_an_override_a_new_recordings_header_holds_already_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resume that records into a new file: its header holds the limits the resume
    set, so the override marker has no difference to list, and says where they are."""
    folder = tmp_path  # the built-in demo, in a folder of its own
    stopped = loop("run", "-q", "--session-id", "t", "--max-iterations", "2", cwd=folder)
    assert stopped.returncode == 3, stopped.stderr
    args = ("-q", "--resume", "t", "--max-iterations", "20", "--record-session", "t.jsonl")
    assert loop("run", *args, cwd=folder).returncode == 0
    _, out, _ = run(capsys, "show", str(folder / "t.jsonl"))
    assert "    --  override: from here on: the limits in the header\n" in out


def test_show_iteration_prints_prompt_output_events_and_timings(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--iteration N`: what triggered it, its events, its timings, its prompt and output;
    the journal and the recording say the same."""
    outs = []
    for target in (made.journal, made.recording):
        code, out, _ = run(capsys, "show", str(target), "--iteration", "3")
        assert code == 0
        outs.append(out)
    assert outs[0] == outs[1]
    out = outs[0]
    assert out.startswith("iteration 3 of session demo · hat reviewer (its run #1)")
    assert "  triggers    build.done from builder: reverse_words added; tests: 3 passed" in out
    assert "  events      review.rejected: missing test: extra spaces between words" in out
    assert re.search(r"  timings     took \d+\.\d{3}s · from \d+\.\d{3}s to \d+\.\d{3}s", out)
    prompt = out.split("── prompt ", 1)[1].split("── output ", 1)
    assert "# hatloop · iteration 3 · hat `reviewer`" in prompt[0]
    assert '<event topic="review.rejected">missing test' in prompt[1]


def test_show_iteration_json_is_the_whole_iteration(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--iteration N --json`: prompt, output, events, tool calls and timings as JSON."""
    _, out, _ = run(capsys, "show", str(made.recording), "-i", "2", "--json")
    data = json.loads(out)
    assert data["iteration"] == 2 and data["hat"] == "builder" and data["status"] == "ok"
    assert data["prompt"].startswith("# hatloop · iteration 2 · hat `builder`")
    assert "reverse_words" in data["output"]
    assert [e["topic"] for e in data["events"]] == ["build.done"]
    assert [e["topic"] for e in data["triggers"]] == ["plan.ready"]
    # the default preset uses no theme: no heartbeat, so no call in the iteration
    assert data["tool_calls"] == []
    assert data["agent_tools"] == []
    assert data["started"] == pytest.approx(data["elapsed"] - data["duration"], abs=1e-5)


def test_show_iteration_lists_an_agents_tool_calls(capsys: pytest.CaptureFixture[str]) -> None:
    """The committed Claude Code recording: hatloop's tool calls made in the iteration
    (the heartbeat, the agent's createTask over MCP) with their input and outcome, and
    every tool the agent reported using, in order."""
    path = str(REPO / "recordings" / "claude.jsonl")
    _, out, _ = run(capsys, "show", path, "-i", "1")
    assert "  tool calls  theme_heartbeat via loop {} → ok\n" in out
    assert '              createTask via mcp {"name": "Write the release notes"} → ok\n' in out
    assert "  agent used  mcp__hatloop__createTask, mcp__hatloop__emit_event\n" in out
    _, out, _ = run(capsys, "show", path, "-i", "1", "--json")
    data = json.loads(out)
    assert data["agent_tools"] == ["mcp__hatloop__createTask", "mcp__hatloop__emit_event"]
    created = data["tool_calls"][1]
    assert (created["tool"], created["channel"]) == ("createTask", "mcp")
    assert created["result"]["task"]["name"] == "Write the release notes"


def test_show_json_is_the_timeline(made: Made, capsys: pytest.CaptureFixture[str]) -> None:
    """`show --json`: the session, one entry per iteration, how it ended, the record count."""
    _, out, _ = run(capsys, "show", str(made.journal), "--json")
    data = json.loads(out)
    assert data["source"] == "journal" and data["session_id"] == "demo"
    assert data["schema_version"] == JOURNAL_VERSION  # the journal's own (it was null)
    assert data["outcome"] == "completed"
    assert data["end"] == {
        "reason": "completed",
        "iterations": 5,
        "elapsed": data["end"]["elapsed"],
        "exit_code": 0,
    }
    assert [i["hat"] for i in data["iterations"]] == [
        "planner",
        "builder",
        "reviewer",
        "builder",
        "reviewer",
    ]
    assert data["iterations"][4]["completed"] is True
    assert data["records"] == len(made.journal.read_text(encoding="utf-8").splitlines())
    assert set(data["hats"]) == {"planner", "builder", "reviewer"}


def test_show_marks_failures_cost_and_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed iteration shows its reason, a cost shows in dollars, the cap marker shows."""
    src = REPO / "recordings" / "command.jsonl"
    records = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    records[1]["cost_usd"] = 0.0123
    records[1]["input_tokens"], records[1]["output_tokens"] = 1200, 340
    records.insert(
        -1,
        {
            "kind": "marker",
            "marker": "cap_reached",
            "ts": 1.0,
            "message": "recording stopped: the next record would pass the cap",
        },
    )
    records[-1]["cap_reached"] = True
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "$0.0123" in out
    assert "1200/340" in out
    assert "failed: exit status 3" in out
    assert "--  cap_reached: recording stopped" in out
    assert "size cap reached" in out


def test_show_says_where_a_limit_was_waited_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A planner refused twice by a rate limit: the timeline has a `wait` marker for
    each wait before the planner's row, `--json` has them as markers and as waits, and
    `show -i 1` says when the iteration started, how long it waited, and each wait."""
    journal = waited_session(tmp_path)
    code, out, _ = run(capsys, "show", str(journal))
    assert code == 0
    lines = out.splitlines()
    marks = [n for n, line in enumerate(lines) if line.startswith("    --  wait: planner waited ")]
    first_row = next(n for n, line in enumerate(lines) if line.strip().startswith("1  planner"))
    assert len(marks) == 2 and marks[-1] < first_row
    assert "for rate_limit (iteration 1): 429 Too Many Requests" in lines[marks[0]]
    shown = json.loads(run(capsys, "show", "--json", str(journal))[1])
    assert [m["kind"] for m in shown["markers"]] == ["wait", "wait"]
    waited = sum(w["seconds"] for w in shown["waits"])
    assert shown["iterations"][0]["waited"] == waited and "waited" not in shown["iterations"][1]
    code, out, _ = run(capsys, "show", str(journal), "-i", "1")
    assert code == 0
    assert f"of the session · started at 0.000s, waited {waited:.3f}s\n" in out
    first = shown["waits"][0]
    assert f"  waits       rate_limit for {first['seconds']:.3f}s from 0.000s: 429 Too" in out
    detail = json.loads(run(capsys, "show", str(journal), "-i", "1", "--json")[1])
    assert detail["began"] == 0.0 and [w["attempt"] for w in detail["waits"]] == [1, 2]
    assert detail["started"] == pytest.approx(waited)


def test_show_of_a_torn_recording_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recording cut off mid-write shows what it has, says it has no footer, and warns."""
    data = (REPO / "recordings" / "default.jsonl").read_bytes()
    path = tmp_path / "t.jsonl"
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1] + b'{"kind":"foo')
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert len(rows_of(out)) == 5
    assert "(no footer: the recording was cut off)" in out
    assert "warning: " in out
    assert "torn last line" in out


def test_show_of_a_torn_journal_warns_and_shows_the_in_flight_iteration(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal killed mid-iteration (its last line torn): the committed iterations, the
    iteration in flight, no end, and a warning."""
    lines = made.journal.read_bytes().splitlines(keepends=True)
    starts = [n for n, line in enumerate(lines) if line.startswith(b'{"kind":"iteration.start"')]
    cut = [*lines[: starts[3] + 1], lines[starts[3] + 1][:40]]  # iteration 4 in flight, torn
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(cut))
    code, out, _ = run(capsys, "show", str(path))
    assert code == 0
    assert [r[0] for r in rows_of(out)] == ["1", "2", "3"]
    assert (
        "--  in_flight: iteration 4 started and has not ended: the session's run stopped "
        "without an end, by a kill or a crash; a resume runs it again" in out
    )
    assert re.search(
        r"\(no end record: its run stopped without one, a kill or a crash; "
        r"\d+\.\d\ds at the last commit\)",
        out,
    )
    assert "warning: " in out and "torn last line" in out
    lock = SessionLock(tmp_path / "lock")  # a live run holds the session: it is running
    lock.acquire()
    try:
        code, out, _ = run(capsys, "show", str(path))
    finally:
        lock.release()
    assert "--  in_flight: iteration 4 started and has not ended (running)" in out
    assert re.search(r"\(no end record: the session is running, \d+\.\d\ds so far\)", out)


def parallel_kill(journal: Path, tmp_path: Path) -> Path:
    """The journal as parallel hats killed with `kill -9` leave it: iterations 3 and 4
    started before 2 ended (2 committed last), and nothing after."""
    lines = journal.read_bytes().splitlines(keepends=True)
    at = {
        (r["kind"], r.get("iteration")): n
        for n, r in enumerate(json.loads(line) for line in lines)
        if r["kind"] in ("iteration.start", "iteration.end")
    }
    start = lambda n: lines[at["iteration.start", n]]  # noqa: E731
    cut = [
        *lines[: at["iteration.start", 2] + 1],
        start(3),
        start(4),
        lines[at["iteration.end", 2]],
    ]
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(cut))
    return path


def test_show_and_report_name_every_activation_in_flight_at_a_kill(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parallel hats commit out of order: 2 ended after 3 and 4 started, and 3 and 4 are
    in flight, in the timeline, in the JSON and in the report."""
    path = parallel_kill(made.journal, tmp_path)
    code, out, _ = run(capsys, "show", str(path))
    assert code == 0
    assert [r[0] for r in rows_of(out)] == ["1", "2"]
    assert "--  in_flight: iterations 3 and 4 started and have not ended" in out
    code, out, _ = run(capsys, "show", "--json", str(path))
    shown = json.loads(out)
    assert shown["in_flight"] == 3 and shown["in_flight_all"] == [3, 4]
    assert [m["kind"] for m in shown["markers"]] == ["in_flight"]
    page = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", str(path), "-o", str(page))
    assert code == 0
    assert "unfinished: iterations 3 and 4 were running when the file ended" in page.read_text()


def test_status_names_every_activation_in_flight_as_running_or_stopped(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`status` (and so `get_session_status`, the same code) of the parallel kill: 3 and 4
    were in flight; while a run holds the lock, they are in flight (no "was")."""
    folder = tmp_path / "sessions" / "pk"
    folder.mkdir(parents=True)
    parallel_kill(made.journal, folder)
    args = ("status", "--sessions-dir", str(tmp_path / "sessions"), "pk")
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "iterations  2 (iterations 3 and 4 were in flight)" in out
    code, out, _ = run(capsys, *args, "--json")
    st = json.loads(out)
    assert (st["in_flight"], st["in_flight_all"]) == (3, [3, 4])
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running run holds it
        code, out, _ = run(capsys, *args)
    assert "status      running" in out
    assert "iterations  2 (iterations 3 and 4 in flight)" in out
    resume = Resume(pid=9, iteration=2, in_flight=3, in_flight_all=(3, 4), ts=1.0)
    with (folder / "journal.jsonl").open("ab") as fh:
        fh.write(encode_record(resume))
    code, out, _ = run(capsys, "show", str(folder))
    assert "resumed by pid 9 after iteration 2 (iterations 3 and 4 were in flight and ran" in out


def test_status_elapsed_is_the_end_records_as_show_and_the_summary_say(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted seconds after its last commit: `status` says the session.end's elapsed (what
    the run's summary and `show` say), not the last commit's; a run killed without an
    end says its figure is the last commit's, and a running one's is its runtime so far."""
    lines = made.journal.read_bytes().splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    two = next(n for n, r in enumerate(records) if r["kind"] == "iteration.end" and n > 2)
    committed = records[two]["elapsed"]
    folder = tmp_path / "sessions" / "st"
    folder.mkdir(parents=True)
    journal = folder / "journal.jsonl"
    ended = int(committed) + 7.25  # the interrupt came later; exact, so no rounding differs
    end = session_end("interrupted", records[two]["iteration"], ended, 1.0)
    journal.write_bytes(b"".join(lines[: two + 1]) + encode_record(end))
    args = ("status", "--sessions-dir", str(tmp_path / "sessions"), "st")
    st = json.loads(run(capsys, *args, "--json")[1])
    assert st["elapsed"] == ended  # not the last commit's
    assert st["elapsed_as_of"] == "end"
    _, out, _ = run(capsys, "show", str(journal))
    assert f"in {ended:.2f}s" in out
    assert f"elapsed     {ended:.2f}s\n" in run(capsys, *args)[1]

    journal.write_bytes(b"".join(lines[: two + 2]))  # killed: the next one started, no end
    st = json.loads(run(capsys, *args, "--json")[1])
    assert (st["elapsed"], st["elapsed_as_of"]) == (round(committed, 6), "last_commit")
    assert "at the last commit (the run stopped without an end record)" in run(capsys, *args)[1]


def test_a_running_sessions_elapsed_is_its_runtime_so_far(made: Made) -> None:
    """From its start (or its resume, going on from the last commit before it) to now."""
    records = read_journal(made.journal).records
    start = replace(cast(SessionStart, records[0]), ts=100.0)
    first = next(r for r in records if isinstance(r, IterationEnd))
    assert status_elapsed([start], running=True, now=103.5) == (3.5, "now")
    assert status_elapsed([start, first], running=False, now=103.5) == (
        first.elapsed,
        "last_commit",
    )
    resume = Resume(pid=1, iteration=1, ts=200.0)
    ran = status_elapsed([start, first, resume], running=True, now=201.0)
    assert ran == (pytest.approx(first.elapsed + 1.0), "now")


@pytest.mark.parametrize("kind", ["journal", "recording"])
def test_a_corrupt_line_before_the_last_is_a_one_line_error(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Bad JSON in the middle of a journal or a recording: exit 2, one line naming the line."""
    source = made.journal if kind == "journal" else made.recording
    lines = source.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"kind": "iteration' + b"\n"
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(b"".join(lines))
    for command in (["show"], ["events"], ["show", "-i", "1"]):
        code, out, err = run(capsys, *command, str(path))
        assert (code, out) == (2, "")
        assert err.count("\n") == 1 and err.startswith(f"error: {path}:3: corrupt")


def test_an_invalid_iteration_record_is_a_one_line_error(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An iteration line that is JSON but not an iteration names the line and the field."""
    lines = made.journal.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[2])
    del rec["hat"]
    lines[2] = json.dumps(rec)
    path = tmp_path / "journal.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "show", str(path))
    assert code == 2
    assert err.startswith(f"error: {path}:3: corrupt journal line (iteration.end.hat: Field")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("change", "field"), [({"status": "weird"}, "status"), ({"output": None}, "output")]
)
def test_an_invalid_iteration_field_in_a_recording_is_an_error_not_a_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], field: str
) -> None:
    """A recording's iteration line is JSON with its number and hat but a bad field (the
    scan reads only those): show, events and report say the line and exit 2; they do not
    stop at it and call the recording cut off."""
    lines = (REPO / "recordings" / "default.jsonl").read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[2])
    assert rec["kind"] == "iteration"
    rec.update(change)
    if rec[field] is None:
        del rec[field]
    lines[2] = json.dumps(rec)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = tmp_path / "r.html"
    for command in (["show"], ["show", "-i", "2"], ["events"], ["report", "-o", str(page)]):
        code, out, err = run(capsys, *command, str(path))
        assert (code, out) == (2, ""), command
        assert err.startswith(f"error: {path}:3: invalid record: iteration.{field}: "), err
        assert err.count("\n") == 1
    assert not page.exists()


def test_bad_targets_are_one_line_errors_with_exit_2(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unknown id, missing file, empty file, not JSON, another JSONL, an empty folder, no
    session at all, an iteration the session does not have."""
    (tmp_path / "text.txt").write_text("just text\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "other.jsonl").write_text('{"kind": "task", "id": 1}\n', encoding="utf-8")
    (tmp_path / "folder").mkdir()
    cases = {
        ("show", "nope"): "unknown session 'nope': no such file, and no session of that id in",
        ("events", "nope"): "unknown session 'nope'",
        ("show", str(tmp_path / "none.jsonl")): "none.jsonl: no such file",
        ("show", str(tmp_path / "empty.jsonl")): "empty file: neither a session journal nor",
        ("show", str(tmp_path / "text.txt")): "text.txt:1: neither a session journal nor a "
        "recording (the line is not JSON)",
        ("events", str(tmp_path / "other.jsonl")): "neither a session journal nor a recording "
        "(its first record is 'task')",
        ("show", str(tmp_path / "folder")): "a folder without a journal.jsonl",
        ("show", "--sessions-dir", str(tmp_path / "folder")): "no session in",
        ("show", str(made.journal), "-i", "6"): "iteration 6 is not in session demo (it has "
        "iterations 1-5)",
        ("events", str(made.journal), "-i", "9"): "iteration 9 is not in session demo",
    }
    monkeypatch.chdir(made.folder)
    for args, message in cases.items():
        code, out, err = run(capsys, *args)
        assert (code, out) == (2, ""), args
        assert err.startswith("error: ") and err.count("\n") == 1, (args, err)
        assert message in err, (args, err)


# -- events ---------------------------------------------------------------------------------


def test_events_lists_every_event_with_who_ran_on_it(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """The starting event, then each iteration's events, with the iteration that ran on
    each; the journal and the recording list the same."""
    outs = [run(capsys, "events", str(p))[1] for p in (made.journal, made.recording)]
    assert outs[0] == outs[1]
    lines = outs[0].splitlines()
    assert lines[0].split() == ["iter", "hat", "topic", "source", "to", "payload"]
    rows = [line.split(maxsplit=5) for line in lines[1:]]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("0", "-", "task.start", "loop", "1"),
        ("1", "planner", "plan.ready", "planner", "2"),
        ("2", "builder", "build.done", "builder", "3"),
        ("3", "reviewer", "review.rejected", "reviewer", "4"),
        ("4", "builder", "build.done", "builder", "5"),
        ("5", "reviewer", "LOOP_COMPLETE", "reviewer", "-"),
    ]
    assert rows[3][5] == "missing test: extra spaces between words"


def test_events_filters_by_topic_pattern_hat_and_iteration(
    made: Made, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--topic` takes hatloop's `*` patterns; `--hat` and `--iteration` narrow to where an
    event was published; filters combine; no argument is the most recent session."""
    monkeypatch.chdir(made.folder)

    def topics(*args: str) -> list[tuple[int, str]]:
        code, out, _ = run(capsys, "events", "demo", "--json", *args)
        assert code == 0
        return [(d["iteration"], d["topic"]) for d in map(json.loads, out.splitlines())]

    assert topics("--topic", "build.*") == [(2, "build.done"), (4, "build.done")]
    assert topics("--topic", "*.done") == [(2, "build.done"), (4, "build.done")]
    assert topics("--topic", "review.*", "--hat", "reviewer") == [(3, "review.rejected")]
    assert topics("--hat", "planner") == [(1, "plan.ready")]
    assert topics("--iteration", "5") == [(5, "LOOP_COMPLETE")]
    assert topics("--iteration", "0") == [(0, "task.start")]
    assert topics("--topic", "nothing.here") == []
    code, out, _ = run(capsys, "events", "--topic", "nothing.here")
    assert (code, out) == (0, "no event in session split matches\n")


def test_events_marks_the_iteration_in_flight_that_runs_on_an_event(
    made: Made, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Iteration 2 started on plan.ready and did not end: killed (no end), running (a
    run holds the lock) or cut short by an interrupt, `to` is `2*` (`taken_by` 2 in
    JSON, `to` null: no iteration that ended ran on it), as `status` says `#2 runs on
    it`; an event no hat ran on is still `-`."""
    lines = made.journal.read_bytes().splitlines(keepends=True)
    starts = [n for n, line in enumerate(lines) if line.startswith(b'{"kind":"iteration.start"')]
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(lines[: starts[1] + 1]))  # killed in iteration 2

    def plan_ready() -> tuple[list[str], dict[str, object]]:
        _, out, _ = run(capsys, "events", str(path), "--topic", "plan.ready")
        _, js, _ = run(capsys, "events", str(path), "--topic", "plan.ready", "--json")
        return rows_of(out)[0], json.loads(js)

    row, data = plan_ready()
    assert row[:5] == ["1", "planner", "plan.ready", "planner", "2*"]
    assert (data["to"], data["taken_by"]) == (None, 2)
    lock = SessionLock(tmp_path / "lock")  # a live run holds the session: it is running
    lock.acquire()
    try:
        assert plan_ready()[0][4] == "2*"
    finally:
        lock.release()
    with path.open("ab") as fh:  # Ctrl-C: the end cut iteration 2 short
        fh.write(encode_record(session_end("interrupted", 1, 3.0, 1.0)))
    assert plan_ready()[0][4] == "2*"
    _, out, _ = run(capsys, "events", str(made.journal))
    assert [r[4] for r in rows_of(out)][-1] == "-"  # the completion event: no hat ran on it
    assert (
        json.loads(run(capsys, "events", str(made.journal), "--json")[1].splitlines()[0])[
            "taken_by"
        ]
        is None
    )


def test_events_json_lines_carry_the_whole_event(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json`: one JSON object per line, with payload, source, target, time and `to`."""
    _, out, _ = run(capsys, "events", str(made.recording), "--json")
    first, *rest = map(json.loads, out.splitlines())
    assert first["topic"] == "task.start" and first["source"] == "loop" and first["to"] == 1
    assert first["payload"] == "Write a function that reverses the words of a sentence, with tests."
    assert len(rest) == 5
    assert all(isinstance(d["ts"], float) and d["target"] is None for d in rest)


def test_events_rejects_a_bad_pattern_or_an_unknown_hat(
    made: Made, capsys: pytest.CaptureFixture[str]
) -> None:
    """A topic pattern that is not one, or a hat the session does not have: exit 2."""
    code, _, err = run(capsys, "events", str(made.journal), "--topic", "a..b")
    assert code == 2 and "not a topic pattern" in err
    code, _, err = run(capsys, "events", str(made.journal), "--hat", "tester")
    assert code == 2
    assert err == (
        "error: --hat 'tester': session demo has no such hat (its hats: builder, planner, "
        "reviewer)\n"
    )


def test_events_keeps_a_multi_line_payload_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal: payloads are whole, each on one line (newlines shown as \\n)."""
    src = REPO / "recordings" / "default.jsonl"
    records = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    records[1]["published"][0]["payload"] = "line one\nline two"
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    _, out, _ = run(capsys, "events", str(path), "-i", "1")
    assert out.splitlines()[1].endswith("line one\\nline two")
    assert len(out.splitlines()) == 2


def test_show_and_events_run_as_a_user_runs_them(made: Made) -> None:
    """The real CLI in a child process: results on stdout, exit codes as documented."""
    res = loop("show", "demo", cwd=made.folder)
    assert res.returncode == 0 and res.stderr == ""
    assert "end   completed after 5 iteration(s)" in res.stdout
    res = loop("events", "demo", "--topic", "review.*", cwd=made.folder)
    assert res.returncode == 0 and "review.rejected" in res.stdout
    res = loop("events", "nope", cwd=made.folder)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("error: unknown session 'nope'")


def test_events_on_a_terminal_cuts_payloads_to_its_width(made: Made) -> None:
    """On a terminal (a real pseudo-terminal here), each line fits its width."""
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "loop", "events", "demo"],
            cwd=made.folder,
            stdout=follower,
            stderr=subprocess.PIPE,
            env={**ENV, "COLUMNS": "80"},
            timeout=120,
            check=False,
        )
        os.close(follower)
        follower = -1
        data = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child's side is closed and everything was read
                break
            if not chunk:
                break
            data += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert proc.returncode == 0, proc.stderr
    lines = data.decode().splitlines()
    assert len(lines) == 7
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[1].endswith("…")


def test_events_on_a_narrow_terminal_keep_a_payloads_first_characters(made: Made) -> None:
    """40 columns, narrower than the other columns: each payload keeps its first 19
    characters and a `…` (the row wraps, as it would anyway), never a bare `…`; a
    payload that fits is whole."""
    from loop.commands.inspect import render_events
    from loop.session.load import load_session
    from loop.session.view import event_rows

    least = 20  # docs/inspect.md: "keeps at least its first 20 characters"
    rows = list(event_rows(load_session(made.journal)))
    lines = render_events(rows, width=40).splitlines()[1:]
    for row, line in zip(rows, lines, strict=True):
        payload = row.event.payload_text()
        if len(payload) > least:
            assert line.endswith(" " + payload[: least - 1] + "…"), line
        else:
            assert line.endswith(" " + payload), line
    assert any(len(r.event.payload_text()) > least for r in rows)


def test_the_marker_table_in_the_docs_lists_every_marker_show_prints() -> None:
    """docs/inspect.md's table of timeline markers has a row for each kind of marker."""
    from typing import get_args

    from loop.session.view import MarkerKind

    text = (Path(__file__).resolve().parents[2] / "docs" / "inspect.md").read_text("utf-8")
    table = text[text.index("| marker | what |") :].split("\n\n")[0]
    listed = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, re.MULTILINE))
    names = {name for row in listed for name in row if name}
    assert names == set(get_args(MarkerKind))


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "p.jsonl"],
        ["show", "p.jsonl"],
        ["events", "p.jsonl"],
        ["report", "p.jsonl", "-o", "r.html"],
    ],
)
def test_a_fifo_given_as_a_recording_is_refused_not_waited_on(
    tmp_path: Path, args: list[str]
) -> None:
    """A named pipe where a recording or journal is expected: one line naming it, exit 2,
    at once (an open that waited for a writer would hang a CI job for ever)."""
    os.mkfifo(tmp_path / "p.jsonl")
    res = loop(*args, cwd=tmp_path)
    assert res.returncode == 2
    said = res.stdout if args[0] == "replay" else res.stderr
    assert "p.jsonl: cannot read: not a regular file (a pipe, a socket or a device)" in said
    assert not (tmp_path / "r.html").exists()


def test_a_fifo_in_a_folder_of_recordings_is_never_opened(tmp_path: Path) -> None:
    """`replay DIR` takes a folder's regular files, as pytest does: a named pipe there,
    beside a recording, is never opened (an open that waited for a writer would hang a CI
    job for ever), and the recording replays."""
    os.mkfifo(tmp_path / "p.jsonl")
    (tmp_path / "a.jsonl").write_bytes((REPO / "recordings" / "default.jsonl").read_bytes())
    res = loop("replay", ".", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 recording(s): 1 passed, 0 diverged, 0 error(s)" in res.stdout
