"""A folder as one suite, the pure parts: shards, --jobs, order, exit code, summary, JUnit."""

from __future__ import annotations

import random
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from loop.commands.replay_suite import (
    InOrder,
    ReplayOutcome,
    Shard,
    collect_recordings,
    exit_code,
    junit_xml,
    parse_jobs,
    summary_lines,
)
from loop.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "recordings" / "default.jsonl").read_text(encoding="utf-8")


def outcome(index: int, status: str = "passed", duration: float = 0.1) -> ReplayOutcome:
    """An outcome for recording ``r{index}.jsonl``."""
    detail = {"passed": "", "diverged": "diverged at iteration 2: a different hat ran"}.get(
        status, f"r{index}.jsonl:1: not a JSONL recording"
    )
    return ReplayOutcome.model_validate(
        {
            "index": index,
            "path": f"r{index}.jsonl",
            "status": status,
            "line": f"{status} r{index}.jsonl",
            "detail": detail,
            "duration": duration,
        }
    )


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("size", [0, 1, 4, 7, 20])
def test_shards_hold_every_recording_exactly_once(count: int, size: int) -> None:
    """Shards 1..N are disjoint, cover the list, and differ in size by one at most."""
    items = [f"r{i:02d}.jsonl" for i in range(size)]
    shards = [Shard(k, count).select(items) for k in range(1, count + 1)]
    flat = [x for shard in shards for x in shard]
    assert sorted(flat) == items
    assert len(set(flat)) == len(flat)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1


def test_a_shard_is_the_same_on_every_machine() -> None:
    """Parsing is exact and selection depends only on the list (round-robin by position)."""
    assert Shard.parse("2/3") == Shard(2, 3)
    assert Shard.parse(" 1 / 1 ") == Shard(1, 1)
    assert Shard(2, 3).select(list("abcdefg")) == ["b", "e"]
    assert str(Shard(2, 3)) == "2/3"


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "x", "1/", "/2", "-1/2", "1.5/2", ""])
def test_a_bad_shard_is_a_one_line_usage_error(text: str) -> None:
    """Anything but K/N with 1 <= K <= N is refused, in one line."""
    with pytest.raises(UsageError) as info:
        Shard.parse(text)
    assert "--shard" in str(info.value)
    assert "\n" not in str(info.value)


def test_jobs_auto_and_zero_are_the_cpu_count() -> None:
    """--jobs N, 0 and auto (the CPUs), and refusals."""
    assert parse_jobs("3", 8) == 3
    assert parse_jobs("0", 8) == 8
    assert parse_jobs("auto", 4) == 4
    assert parse_jobs("AUTO", None) == 1
    for bad in ("-1", "two", "1.5", ""):
        with pytest.raises(UsageError, match="--jobs"):
            parse_jobs(bad, 4)


def test_outcomes_are_released_in_order_whatever_order_they_arrive_in() -> None:
    """Each outcome comes out once, all in index order, as soon as its turn comes."""
    arrivals = list(range(2, 40))
    random.Random(7).shuffle(arrivals)
    order = InOrder(first=2)
    released: list[int] = []
    for index in arrivals:
        ready = order.add(outcome(index))
        released += [o.index for o in ready]
        assert released == list(range(2, 2 + len(released)))
    assert released == list(range(2, 40))


def test_exit_code_bad_input_then_crash_then_divergence() -> None:
    """2 for bad input, else 1 for a dead worker, else 4 for a divergence, else 0."""
    assert exit_code([]) == 0
    assert exit_code([outcome(0), outcome(1)]) == 0
    assert exit_code([outcome(0), outcome(1, "diverged")]) == 4
    assert exit_code([outcome(0, "crashed"), outcome(1, "diverged")]) == 1
    assert exit_code([outcome(0, "error"), outcome(1, "crashed"), outcome(2, "diverged")]) == 2


def test_the_summary_counts_names_and_times() -> None:
    """Counts, wall and replay time, the slowest three, what diverged and what failed."""
    outcomes = [
        outcome(0, duration=0.5),
        outcome(1, "diverged", 2.0),
        outcome(2, "error", 0.0),
        outcome(3, duration=1.0),
        outcome(4, "crashed", 0.25),
    ]
    lines = summary_lines(outcomes, 3.0, jobs=2, shard=Shard(1, 2))
    assert lines[0] == (
        "5 recording(s): 2 passed, 1 diverged, 2 error(s) in 3.00s "
        "(2 jobs, 3.75s of replays, shard 1/2)"
    )
    assert lines[1] == "slowest: r1.jsonl 2.00s, r3.jsonl 1.00s, r0.jsonl 0.50s"
    assert lines[2:] == ["diverged: r1.jsonl", "errors: r2.jsonl, r4.jsonl"]
    cut = summary_lines(outcomes[:2], 1.0, jobs=1, total=5)
    assert cut[1] == "interrupted: 3 of 5 recording(s) not replayed"


def test_the_summary_counts_the_jsonl_files_it_skipped() -> None:
    """The .jsonl files a folder held that are no recording are counted, the first few
    named: nothing under a folder vanishes without a word."""
    skipped = [f"data/clip{i}.jsonl" for i in range(5)]
    lines = summary_lines([outcome(0)], 1.0, jobs=1, skipped=skipped)
    assert lines[1] == (
        "skipped 5 *.jsonl file(s) in folders that hold no recording: "
        "data/clip0.jsonl, data/clip1.jsonl, data/clip2.jsonl and 2 more"
    )
    assert summary_lines([outcome(0)], 1.0, jobs=1, skipped=skipped[:1])[1] == (
        "skipped 1 *.jsonl file(s) in folders that hold no recording: data/clip0.jsonl"
    )
    assert len(summary_lines([outcome(0)], 1.0, jobs=1)) == 1


def test_junit_has_one_case_per_recording(tmp_path: Path) -> None:
    """A failure carries the diff, bad input and crashes are errors, notes go to system-out."""
    outcomes = [
        outcome(2, "crashed"),
        outcome(0),
        outcome(1, "diverged"),
        ReplayOutcome(index=3, path="r3.jsonl", status="passed", line="ok", partial="no footer"),
    ]
    root = ET.fromstring(junit_xml(outcomes, 1.5, shard=Shard(1, 4)))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    assert [c.get("name") for c in suite.iter("testcase")] == [f"r{i}.jsonl" for i in range(4)]
    failure = suite.find("testcase[@name='r1.jsonl']/failure")
    assert failure is not None
    assert failure.text == "diverged at iteration 2: a different hat ran"
    assert suite.find("testcase[@name='r2.jsonl']/error") is not None
    assert suite.find("testcase[@name='r0.jsonl']/*") is None
    out = suite.find("testcase[@name='r3.jsonl']/system-out")
    assert out is not None
    assert out.text == "prefix only: no footer"
    prop = suite.find("properties/property[@name='shard']")
    assert prop is not None
    assert prop.get("value") == "1/4"


def test_collect_expands_folders_and_replays_a_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders give their *.jsonl sorted; a file named twice is listed once, however it
    is named (relative, absolute, through a link); a missing file is listed (its replay
    says so); a folder without recordings is a usage error."""
    (tmp_path / "b.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(GOOD, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    found = collect_recordings(
        [str(tmp_path), str(tmp_path / "a.jsonl"), str(tmp_path / "missing.jsonl")]
    )
    assert found.recordings == [
        tmp_path / "a.jsonl",
        tmp_path / "b.jsonl",
        tmp_path / "missing.jsonl",
    ]
    (tmp_path / "link.jsonl").symlink_to("b.jsonl")
    monkeypatch.chdir(tmp_path)
    found = collect_recordings(
        [
            "a.jsonl",
            str(tmp_path / "a.jsonl"),
            "./a.jsonl",
            "b.jsonl",
            "link.jsonl",
            "missing.jsonl",
            str(tmp_path / "missing.jsonl"),
        ]
    )
    assert found.recordings == [Path("a.jsonl"), Path("b.jsonl"), Path("missing.jsonl")]
    with pytest.raises(UsageError, match=r"^no recordings in .*empty \(no \*\.jsonl file"):
        collect_recordings([str(tmp_path), str(tmp_path / "empty")])


def test_collect_walks_sub_folders_and_keeps_apart_what_is_no_recording(
    tmp_path: Path,
) -> None:
    """A folder's sub-folders are replayed too (a suite organised in folders is replayed
    whole, as pytest runs it); a .jsonl in a folder without a recording is skipped and
    listed apart, once, unless it is named on its own; a tree without a recording is a
    usage error that says what it found."""
    (tmp_path / "top.jsonl").write_text(GOOD, encoding="utf-8")
    (tmp_path / "feature-x").mkdir()
    (tmp_path / "feature-x" / "nested.jsonl").write_text(GOOD, encoding="utf-8")
    (tmp_path / "data").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "data" / name).write_text('{"file": "a.wav"}\n', encoding="utf-8")
    data = tmp_path / "data"
    found = collect_recordings([str(tmp_path), str(tmp_path), str(data / "a.jsonl")])
    assert found.recordings == [
        tmp_path / "feature-x" / "nested.jsonl",
        tmp_path / "top.jsonl",
        data / "a.jsonl",
    ]
    assert found.skipped == [data / "b.jsonl"]
    assert collect_recordings([str(tmp_path)]).skipped == [data / "a.jsonl", data / "b.jsonl"]
    with pytest.raises(
        UsageError,
        match=r"^no recordings in .*data \(none of its 2 \*\.jsonl file\(s\) starts with a "
        r"recording header\)$",
    ):
        collect_recordings([str(data)])
