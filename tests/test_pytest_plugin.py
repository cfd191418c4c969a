"""The pytest plugin: recordings collected as test items, divergences as failures; it claims
only hatloop recordings (or the paths the ini option names) and runs under pytest-xdist."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loop.pytest_plugin import HEADER_LIMIT, is_recording, named

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
# The inner runs use only this plugin's own needs (the outer run disables pytest-asyncio too).
INI = "addopts = -p no:asyncio -p no:cacheprovider\n"
GOOD = (REPO / "recordings" / "default.jsonl").read_text(encoding="utf-8")


def diverging() -> str:
    """The default recording with one event payload edited (iteration 3)."""
    records = [json.loads(line) for line in GOOD.splitlines()]
    records[3]["events"][0]["payload"] = "edited by hand"
    return "".join(json.dumps(r) + "\n" for r in records)


def setup(pytester: pytest.Pytester, ini: str = "") -> None:
    """A project with a good and a diverging recording under recordings/."""
    pytester.makeini(f"[pytest]\n{INI}{ini}")
    folder = pytester.path / "recordings"
    folder.mkdir()
    (folder / "good.jsonl").write_text(GOOD, encoding="utf-8")
    (folder / "bad.jsonl").write_text(diverging(), encoding="utf-8")


def test_collects_one_item_per_recording(pytester: pytest.Pytester) -> None:
    """recordings/*.jsonl are collected by default, one item each."""
    setup(pytester)
    result = pytester.runpytest("--collect-only", "-q", "recordings")
    result.stdout.fnmatch_lines(
        ["recordings/bad.jsonl::replay", "recordings/good.jsonl::replay", "*2 tests collected*"]
    )


def test_a_divergence_fails_its_item_with_the_diff(pytester: pytest.Pytester) -> None:
    """The good recording passes; the diverging one fails with the readable diff."""
    setup(pytester)
    result = pytester.runpytest("recordings")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*diverged at iteration 3: hat reviewer: events differ*",
            '*expected: review.rejected "edited by hand"*',
            '*actual  : review.rejected "missing test: extra spaces between words"*',
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_ini_option_chooses_the_recordings(pytester: pytest.Pytester) -> None:
    """`hatloop_recordings` replaces the default glob: only the matching files are items."""
    setup(pytester, "hatloop_recordings =\n    golden/*.jsonl\n")
    golden = pytester.path / "golden"
    golden.mkdir()
    (golden / "one.jsonl").write_text(GOOD, encoding="utf-8")
    result = pytester.runpytest("recordings", "golden")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*bad.jsonl*")


def test_a_bad_recording_fails_with_file_and_line(pytester: pytest.Pytester) -> None:
    """A file in a folder the ini option names is claimed: bad input fails its item with
    the one-line error (it is not skipped)."""
    pytester.makeini(f"[pytest]\n{INI}hatloop_recordings = recordings\n")
    folder = pytester.path / "recordings"
    folder.mkdir()
    (folder / "broken.jsonl").write_text("not json at all\n", encoding="utf-8")
    result = pytester.runpytest("recordings")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*broken.jsonl:1: not a JSONL recording*"])


def test_named_paths_are_folders_files_or_globs_relative_to_the_root(tmp_path: Path) -> None:
    """Entries name folders (and what is under them), files or glob patterns, from the root."""
    rec = tmp_path / "recordings" / "a.jsonl"
    assert named(rec, tmp_path, ["recordings"])
    assert named(rec, tmp_path, ["./recordings/"])
    assert named(tmp_path / "recordings" / "deep" / "b.jsonl", tmp_path, ["recordings"])
    assert named(rec, tmp_path, ["recordings/a.jsonl"])
    assert named(rec, tmp_path, ["recordings/*.jsonl"])
    assert not named(tmp_path / "recordingsX" / "a.jsonl", tmp_path, ["recordings"])
    assert not named(tmp_path / "x" / "recordings" / "a.jsonl", tmp_path, ["recordings/*.jsonl"])
    assert not named(Path("/elsewhere/recordings/a.jsonl"), tmp_path, ["recordings"])


def test_a_recording_is_told_by_its_first_line_only(tmp_path: Path) -> None:
    """A hatloop header as the first line, and nothing else, makes a file a recording."""
    cases = {
        "recording.jsonl": GOOD,
        "other_version.jsonl": '{"kind": "header", "schema_version": 99}\n',
        "audio.jsonl": '{"file": "a.wav", "duration": 3.2, "kind": "speech"}\n',
        "header_later.jsonl": '{"file": "a.wav"}\n' + GOOD,
        "list.jsonl": "[1, 2]\n",
        "text.jsonl": "not json\n",
        "empty.jsonl": "",
        "long.jsonl": '{"kind": "header", "schema_version": 1, "pad": "'
        + "x" * HEADER_LIMIT
        + '"}\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    os.mkfifo(tmp_path / "fifo.jsonl")  # never opened: it is not a regular file
    found = sorted(p.name for p in tmp_path.iterdir() if is_recording(p))
    assert found == ["other_version.jsonl", "recording.jsonl"]


def audio_metadata(folder: Path) -> None:
    """Another project's JSONL files: audio metadata, one object per clip."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(3):
        lines = [
            json.dumps({"file": f"clip{i}_{j}.wav", "seconds": 1.5 * j, "speaker": "a"})
            for j in range(4)
        ]
        (folder / f"clips{i}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_other_projects_jsonl_files_are_never_claimed(pytester: pytest.Pytester) -> None:
    """The issue's case: a project with hatloop installed and a folder of audio-metadata
    JSONL files under recordings/. pytest runs its own tests and nothing else."""
    pytester.makeini(f"[pytest]\n{INI}")
    audio_metadata(pytester.path / "recordings")
    pytester.makepyfile(test_audio="def test_clips():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*not a hatloop recording*")
    result.stdout.no_fnmatch_line("*clips*::replay*")


def test_recordings_beside_other_jsonl_files_are_told_apart(pytester: pytest.Pytester) -> None:
    """In one folder, the files with a hatloop header are items; the others are not."""
    setup(pytester)
    audio_metadata(pytester.path / "recordings")
    result = pytester.runpytest("--collect-only", "-q", "recordings")
    result.stdout.fnmatch_lines(
        ["recordings/bad.jsonl::replay", "recordings/good.jsonl::replay", "*2 tests collected*"]
    )
    result.stdout.no_fnmatch_line("*clips*")


def test_named_paths_narrow_collection(pytester: pytest.Pytester) -> None:
    """With the ini option, recordings outside the named paths are not collected."""
    setup(pytester, "hatloop_recordings = golden/\n")
    golden = pytester.path / "golden"
    golden.mkdir()
    (golden / "one.jsonl").write_text(GOOD, encoding="utf-8")
    result = pytester.runpytest("--collect-only", "-q", "recordings", "golden")
    result.stdout.fnmatch_lines(["golden/one.jsonl::replay", "*1 test collected*"])


def test_recordings_run_under_xdist(pytester: pytest.Pytester) -> None:
    """`pytest -n 2` (pytest-xdist, real worker processes): the good recordings pass, the
    diverging one fails with its diff, other JSONL files are left alone."""
    setup(pytester)
    folder = pytester.path / "recordings"
    for i in range(3):
        (folder / f"good{i}.jsonl").write_text(GOOD, encoding="utf-8")
    audio_metadata(folder)
    result = pytester.runpytest_subprocess("-n", "2", "recordings")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        ["*created: 2/2 workers*", "*diverged at iteration 3: hat reviewer: events differ*"]
    )
    result.stdout.no_fnmatch_line("*clips*")
