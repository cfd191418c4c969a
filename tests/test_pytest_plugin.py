"""The pytest plugin: recordings collected as test items, divergences as failures; it claims
the files `replay DIR` replays (or the paths the ini option names) and runs under
pytest-xdist."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from loop.commands.replay_suite import collect_recordings
from loop.pytest_plugin import named
from tests.session.test_recorder import LOOP_TOML, record_session

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


def test_jsonl_files_beside_recordings_are_claimed(pytester: pytest.Pytester) -> None:
    """In a folder that holds a recording, every .jsonl file is an item (one that is no
    recording fails); the JSONL files of a folder without a recording are not."""
    setup(pytester)
    audio_metadata(pytester.path / "recordings" / "audio")
    (pytester.path / "recordings" / "stray.jsonl").write_text('{"file": "a.wav"}\n')
    result = pytester.runpytest("--collect-only", "-q", "recordings")
    result.stdout.fnmatch_lines(
        [
            "recordings/bad.jsonl::replay",
            "recordings/good.jsonl::replay",
            "recordings/stray.jsonl::replay",
            "*3 tests collected*",
        ]
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
    audio_metadata(folder / "audio")
    result = pytester.runpytest_subprocess("-n", "2", "recordings")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        ["*created: 2/2 workers*", "*diverged at iteration 3: hat reviewer: events differ*"]
    )
    result.stdout.no_fnmatch_line("*clips*")


def test_broken_recordings_beside_good_ones_fail(pytester: pytest.Pytester) -> None:
    """Without the ini option, a recording left with git's conflict markers or emptied
    beside good ones is claimed and fails with its one-line error, as `replay DIR` says
    it; it used to drop out of the suite, which stayed green."""
    setup(pytester)
    folder = pytester.path / "recordings"
    (folder / "bad.jsonl").unlink()
    (folder / "conflict.jsonl").write_text(
        "<<<<<<< HEAD\n" + GOOD + "=======\n" + GOOD + ">>>>>>> feature\n", encoding="utf-8"
    )
    (folder / "empty.jsonl").write_text("", encoding="utf-8")
    result = pytester.runpytest("recordings")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*conflict.jsonl:1: not a JSONL recording: the line is not JSON*",
            "*empty.jsonl: empty recording (no records)*",
        ]
    )


def test_a_recording_with_a_large_prompt_is_collected(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A recording whose header line is far longer than what is read to tell a recording
    (a prompt of 1.2 MB: it was past the 1 MiB once read), alone in its folder, is
    collected, and its divergence fails."""
    prompt = "Reverse the words of a sentence. " * (1_200_000 // 33)
    toml = LOOP_TOML.replace('"Reverse the words of a sentence."', json.dumps(prompt))
    path = anyio.run(lambda: record_session(tmp_path, toml=toml))[0]
    pytester.makeini(f"[pytest]\n{INI}")
    folder = pytester.path / "recordings" / "big"
    folder.mkdir(parents=True)
    tampered = path.read_bytes().replace(b'"payload":"approved"', b'"payload":"tampered"')
    (folder / "big.jsonl").write_bytes(tampered)
    result = pytester.runpytest("recordings")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(['*expected: LOOP_COMPLETE "tampered"*'])


def test_pytest_collects_what_replay_replays(pytester: pytest.Pytester) -> None:
    """One rule: `pytest DIR` collects exactly the files `python -m loop replay DIR`
    replays, in the same order: sub-folders, broken recordings beside good ones; neither
    takes another project's JSONL or a hidden folder's."""
    setup(pytester)
    folder = pytester.path / "recordings"
    for sub in ("feature-x", "feature-x/deep", "data", ".git"):
        (folder / sub).mkdir()
    (folder / "feature-x" / "a.jsonl").write_text(diverging(), encoding="utf-8")
    (folder / "feature-x" / "z-empty.jsonl").write_text("", encoding="utf-8")
    (folder / "feature-x" / "deep" / "b.jsonl").write_text(GOOD, encoding="utf-8")
    (folder / "feature-x-c.jsonl").write_text(GOOD, encoding="utf-8")
    (folder / ".git" / "g.jsonl").write_text(GOOD, encoding="utf-8")
    audio_metadata(folder / "data")
    result = pytester.runpytest("--collect-only", "-q", "recordings")
    collected = [line.removesuffix("::replay") for line in result.outlines if "::" in line]
    found = collect_recordings(["recordings"])
    assert collected == [p.as_posix() for p in found.recordings]
    assert collected == [
        "recordings/bad.jsonl",
        "recordings/feature-x/a.jsonl",
        "recordings/feature-x/deep/b.jsonl",
        "recordings/feature-x/z-empty.jsonl",
        "recordings/feature-x-c.jsonl",
        "recordings/good.jsonl",
    ]
    assert [p.name for p in found.skipped] == ["clips0.jsonl", "clips1.jsonl", "clips2.jsonl"]


def test_a_file_named_on_the_command_line_is_claimed(pytester: pytest.Pytester) -> None:
    """`pytest FILE`, as `replay FILE`, runs the file it names: one that is no recording
    fails with the one-line error, rather than pytest finding nothing to collect."""
    pytester.makeini(f"[pytest]\n{INI}")
    audio_metadata(pytester.path / "data")
    result = pytester.runpytest("data/clips0.jsonl")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*clips0.jsonl:1: not a hatloop recording*"])
