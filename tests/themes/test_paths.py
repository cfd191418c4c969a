"""Every name and path from input stays inside the workspace."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from loop.errors import ToolError

from .conftest import NOW, beat, snapshot
from .test_tools import START, error, run

BAD = ["../escape", "../../escape", "/tmp/abs_escape", "a/b", "a\\b", "x\x00y", "..", "."]

END = {
    "themeStartId": "20250801120000",
    "themeDirectoryPart": "study_bus",
    "themeName": "n",
    "reason": "r",
}
PARENT = {"parentThemeStartId": "20250101000000", "parentThemeDirectoryPart": "old"}


def _outside(tmp_path: Path) -> set[str]:
    return {
        p.relative_to(tmp_path).as_posix()
        for p in tmp_path.rglob("*")
        if "works" not in p.relative_to(tmp_path).parts
    }


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    ("tool", "base", "field"),
    [
        ("start_theme", START, "targetFilename"),
        ("start_theme", START, "themeDirectoryPart"),
        ("start_theme", {**START, **PARENT}, "parentThemeDirectoryPart"),
        ("start_theme", {**START, **PARENT}, "parentThemeStartId"),
        ("end_theme", END, "themeDirectoryPart"),
        ("end_theme", END, "themeStartId"),
        ("end_theme", {**END, **PARENT}, "parentThemeDirectoryPart"),
        ("end_theme", {**END, **PARENT}, "parentThemeStartId"),
        ("check_and_process_item", {}, "type"),
    ],
)
def test_path_parameters_refuse_traversal(  # noqa: PLR0917 - one argument per parametrised field
    root: Path, tmp_path: Path, tool: str, base: dict[str, Any], field: str, bad: str
) -> None:
    """Traversal, absolute paths, separators and NUL are refused; nothing changes."""
    before = snapshot(root)
    outside = _outside(tmp_path)
    err = error(root, tool, {**base, field: bad})
    assert err.code in {"invalid_path", "invalid_input", "unsupported_type"}
    assert snapshot(root) == before
    assert _outside(tmp_path) == outside


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("field", ["themeName", "reason", "activityContent"])
def test_text_parameters_are_content_only(root: Path, tmp_path: Path, field: str, bad: str) -> None:
    """Names, reasons and lists are written into the history, never used as paths."""
    outside = _outside(tmp_path)
    value: Any = [bad] if field == "activityContent" else bad
    out = run(root, "start_theme", {**START, field: value})
    assert out["themeDirectory"] == "artifacts/20250801120000_study_bus"
    assert _outside(tmp_path) == outside


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("field", ["themeName", "reason", "achievements"])
def test_end_text_parameters_are_content_only(
    root: Path, tmp_path: Path, field: str, bad: str
) -> None:
    """End-history text fields never become paths either."""
    run(root, "start_theme", START)
    beat(root)
    outside = _outside(tmp_path)
    value: Any = [bad] if field == "achievements" else bad
    out = run(root, "end_theme", {**END, field: value})
    assert out["historyFile"] == "artifacts/theme_histories/20250801120001_end_study_bus.md"
    assert _outside(tmp_path) == outside


def test_symlink_out_of_themebox_is_refused(root: Path, tmp_path: Path) -> None:
    """A themebox entry linking outside is neither previewed nor started."""
    secret = tmp_path / "secret.md"
    secret.write_text("secret\n")
    (root / "themebox" / "000_link.md").symlink_to(secret)
    assert run(root, "preview_next_theme")["filename"] == "001_theme.md"
    with pytest.raises(ToolError) as info:
        run(root, "start_theme", {**START, "targetFilename": "000_link.md"})
    assert info.value.code == "invalid_path"
    assert secret.read_text() == "secret\n"


def test_the_longest_names_start_and_end_a_subtheme(root: Path) -> None:
    """A 200-byte part (the longest accepted) starts and ends a theme and a subtheme of
    it, in a themebox file of a 200-byte name: the names made from it (the histories,
    their temp files, ``processed.``) are longer, and a file system takes them."""
    part, sub = "p" * 200, "s" * 200
    target = "t" * 197 + ".md"
    (root / "themebox" / target).write_text("# long\n", encoding="utf-8")
    started = run(
        root, "start_theme", {**START, "targetFilename": target, "themeDirectoryPart": part}
    )
    parent = {"parentThemeStartId": started["themeStartId"], "parentThemeDirectoryPart": part}
    beat(root, NOW + timedelta(seconds=1))
    own = {k: v for k, v in START.items() if k != "targetFilename"}  # a theme of its own
    child = run(root, "start_theme", {**own, "themeDirectoryPart": sub, **parent})
    assert child["themeDirectory"].endswith(f"/subthemes/{child['themeStartId']}_{sub}")
    beat(root, NOW + timedelta(seconds=2))
    run(
        root,
        "end_theme",
        {**END, "themeStartId": child["themeStartId"], "themeDirectoryPart": sub, **parent},
    )
    beat(root, NOW + timedelta(seconds=3))
    run(
        root,
        "end_theme",
        {**END, "themeStartId": started["themeStartId"], "themeDirectoryPart": part},
    )
    names = sorted(p.name for p in (root / "artifacts" / "theme_histories").iterdir())
    assert [n.split("_")[1] for n in names] == ["start", "start", "end", "end"]
    assert (root / "themebox" / f"processed.{target}").is_file()
    too_long = error(root, "start_theme", {**START, "themeDirectoryPart": "p" * 201})
    assert too_long.code == "invalid_path"
    assert "at most 200" in too_long.message
