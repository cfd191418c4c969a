"""start_theme is all or nothing: a fault at any stage or clean-up step leaves no trace."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loop.errors import StoreError, ToolError
from loop.themes import ThemeService

from .conftest import FaultyOps, snapshot, start_input

SUB = {
    "parentThemeStartId": "20250101000000",
    "parentThemeDirectoryPart": "old",
    "targetFilename": None,
    "themeDirectoryPart": "sub",
}


def _fail_start(root: Path, ops: FaultyOps, **overrides: object) -> ToolError:
    with pytest.raises(ToolError) as info:
        ThemeService(root, ops).start(start_input(**overrides))
    return info.value


@pytest.mark.parametrize(
    ("fail", "nth", "overrides", "stage", "code"),
    [
        ("write_intent", 1, {}, 3, "history_write_failed"),
        ("write_history", 1, {}, 3, "history_write_failed"),
        ("make_dir", 1, {}, 4, "theme_directory_failed"),  # the theme directory itself
        ("make_dir", 2, {}, 4, "theme_directory_failed"),  # its histories/ (half-made)
        ("mark_processed", 1, {}, 5, "mark_processed_failed"),
        ("make_dir", 1, SUB, 4, "theme_directory_failed"),  # the parent's subthemes/
        ("make_dir", 3, SUB, 4, "theme_directory_failed"),  # the subtheme's histories/
    ],
)
def test_fault_at_each_stage_leaves_workspace_byte_identical(  # noqa: PLR0917 - one argument per parametrised field
    root: Path, fail: str, nth: int, overrides: dict[str, object], stage: int, code: str
) -> None:
    """Each injected stage failure names its stage and leaves every byte as before."""
    before = snapshot(root)
    err = _fail_start(root, FaultyOps(fail, nth), **overrides)
    assert err.code == code
    assert err.message.startswith(f"stage {stage}/5")
    assert "injected fault" in err.message
    assert err.details["stage"] == stage
    assert snapshot(root) == before
    # and a retry with healthy operations succeeds
    assert ThemeService(root).start(start_input(**overrides)).themeStartId == "20250801120000"


@pytest.mark.parametrize(("nth", "stage"), [(1, 3), (2, 3), (3, 4), (4, 4)])
def test_fault_in_fresh_workspace_removes_created_folders(
    tmp_path: Path, nth: int, stage: int
) -> None:
    """In a workspace without artifacts/, the folders a failed start made are removed too."""
    ws = tmp_path / "w"
    (ws / "themebox").mkdir(parents=True)
    (ws / "themebox" / "001_theme.md").write_text("theme\n")
    ThemeService(ws).heartbeat()
    before = snapshot(ws)
    err = _fail_start(ws, FaultyOps("make_dir", nth))
    assert err.details["stage"] == stage
    assert snapshot(ws) == before


def test_partial_history_temp_file_is_removed(root: Path) -> None:
    """A history writer that dies after its temp file leaves nothing behind."""
    before = snapshot(root)
    err = _fail_start(root, FaultyOps(partial_history=True))
    assert err.details["stage"] == 3
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("step", "nth", "forward", "partial"),
    [
        ("remove_dir", 1, "mark_processed", False),
        ("remove_dir", 2, "mark_processed", False),
        ("remove_history", 1, "mark_processed", False),
        ("remove_history_temp", 1, None, True),
        ("remove_intent", 1, "mark_processed", False),
    ],
)
def test_fault_in_each_cleanup_step_says_what_to_check_then_repairs(
    root: Path, step: str, nth: int, forward: str | None, partial: bool
) -> None:
    """A failed clean-up step is named for a manual check; the next call finishes the job."""
    before = snapshot(root)

    class TwoFaults(FaultyOps):
        def _tick(self, name: str) -> None:
            self.calls[name] += 1
            if name == forward or (name == step and self.calls[name] == nth):
                raise OSError(5, f"injected fault in {name}")

    err = _fail_start(root, TwoFaults(partial_history=partial))
    assert err.code == "cleanup_failed"
    assert "check by hand" in err.message
    assert err.details["manualCheck"]
    assert snapshot(root) != before
    assert (root / "stats" / "start_theme.intent.json").exists()
    # the next theme call (here: the feedback tool with nothing to do) repairs first
    out = ThemeService(root).process_feedback("feedbackbox")
    assert out.repaired and "interrupted start_theme" in out.repaired[0]
    assert snapshot(root) == before


def test_unmark_cleanup_fault_during_repair(root: Path) -> None:
    """A start whose intent survived is undone later; a failing rename-back is reported."""
    before = snapshot(root)
    with pytest.raises(ToolError) as info:  # everything done, only the marker is left over
        ThemeService(root, FaultyOps("remove_intent")).start(start_input())
    assert info.value.code == "cleanup_failed"
    with pytest.raises(ToolError) as info:
        ThemeService(root, FaultyOps("unmark_processed")).repair()
    assert info.value.code == "cleanup_failed"
    assert "processed.001_theme.md" in info.value.message
    assert ThemeService(root).repair()
    assert snapshot(root) == before


def test_repair_never_leaves_the_workspace(root: Path, tmp_path: Path) -> None:
    """A hand-edited intent naming a path outside the workspace is refused, not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "stats" / "start_theme.intent.json").write_text(
        '{"version": 1, "heartbeatId": "20250801120000", "historyFile": "../outside/x.md",'
        ' "historyTemp": "artifacts/theme_histories/.x.tmp", "themeDirectory": "artifacts/x",'
        ' "createDirs": ["../outside"]}'
    )
    with pytest.raises(StoreError, match=r"start_theme\.intent\.json: not a start intent .*'\.\.'"):
        ThemeService(root).repair()
    assert outside.is_dir()


def test_repair_with_unparsable_intent_names_the_file(root: Path) -> None:
    """A corrupt intent file is an error naming it, never silently ignored."""
    (root / "stats" / "start_theme.intent.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"start_theme\.intent\.json"):
        ThemeService(root).repair()


def test_copy_of_workspace_is_independent(root: Path, tmp_path: Path) -> None:
    """Snapshots compare bytes and folders: a copy differs once one file changes."""
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert snapshot(copy) == snapshot(root)
    (copy / "themebox" / "001_theme.md").write_text("changed")
    assert snapshot(copy) != snapshot(root)
