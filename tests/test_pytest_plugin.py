"""The pytest plugin: recordings collected as test items, divergences as failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.pytest_plugin import matches

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
    """A recording that is bad input fails its item with the one-line error."""
    pytester.makeini(f"[pytest]\n{INI}")
    folder = pytester.path / "recordings"
    folder.mkdir()
    (folder / "broken.jsonl").write_text("not json at all\n", encoding="utf-8")
    result = pytester.runpytest("recordings")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*broken.jsonl:1: not a JSONL recording*"])


def test_matches_globs_relative_to_the_root(tmp_path: Path) -> None:
    """Patterns match paths relative to the rootdir, not anywhere."""
    assert matches(tmp_path / "recordings" / "a.jsonl", tmp_path, ["recordings/*.jsonl"])
    assert not matches(tmp_path / "x" / "recordings" / "a.jsonl", tmp_path, ["recordings/*.jsonl"])
    assert not matches(Path("/elsewhere/recordings/a.jsonl"), tmp_path, ["recordings/*.jsonl"])
