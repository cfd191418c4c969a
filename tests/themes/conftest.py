"""Fixtures for the theme tests: workspaces, byte snapshots and a fault-injecting seam."""

from __future__ import annotations

import errno
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from loop.themes import Operations, ThemeService, Workspace, write_heartbeat
from loop.themes.models import StartThemeInput

NOW = datetime(2025, 8, 1, 12, 0, 0)

Snapshot = dict[str, bytes | None]


def snapshot(root: Path) -> Snapshot:
    """Every directory (None) and file (its bytes) under ``root``, by relative path."""
    out: Snapshot = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = None if p.is_dir() else p.read_bytes()
    return out


class FaultyOps(Operations):
    """Operations where the ``nth`` call of step ``fail`` raises an injected ``OSError``."""

    def __init__(self, fail: str | None = None, nth: int = 1, *, partial_history: bool = False):
        self.fail = fail
        self.nth = nth
        self.partial_history = partial_history
        self.calls: Counter[str] = Counter()

    def _tick(self, step: str) -> None:
        self.calls[step] += 1
        if step == self.fail and self.calls[step] == self.nth:
            raise OSError(errno.EIO, f"injected fault in {step}")

    def write_intent(self, path: Path, data: dict[str, Any]) -> None:
        self._tick("write_intent")
        super().write_intent(path, data)

    def write_history(self, path: Path, text: str) -> None:
        if self.partial_history:  # a writer that dies after the temp file: leaves it behind
            path.with_name(f".{path.name}.tmp").write_text(text[:10], encoding="utf-8")
            raise OSError(errno.ENOSPC, "injected: no space left after the temp file")
        self._tick("write_history")
        super().write_history(path, text)

    def make_dir(self, path: Path) -> None:
        self._tick("make_dir")
        super().make_dir(path)

    def mark_processed(self, src: Path, dst: Path) -> None:
        self._tick("mark_processed")
        super().mark_processed(src, dst)

    def remove_intent(self, path: Path) -> None:
        self._tick("remove_intent")
        super().remove_intent(path)

    def unmark_processed(self, dst: Path, src: Path) -> None:
        self._tick("unmark_processed")
        super().unmark_processed(dst, src)

    def remove_dir(self, path: Path) -> None:
        self._tick("remove_dir")
        super().remove_dir(path)

    def remove_history(self, path: Path) -> None:
        self._tick("remove_history")
        super().remove_history(path)

    def remove_history_temp(self, path: Path) -> None:
        self._tick("remove_history_temp")
        super().remove_history_temp(path)


def beat(root: Path, now: datetime = NOW) -> str:
    """Write a heartbeat at a fixed clock time (so same-second beats are the norm)."""
    return write_heartbeat(Workspace(root), now)


def start_input(**overrides: Any) -> StartThemeInput:
    """A valid start_theme input for ``themebox/001_theme.md``."""
    args: dict[str, Any] = {
        "targetFilename": "001_theme.md",
        "themeName": "Study the bus",
        "themeDirectoryPart": "study_bus",
        "reason": "it is next",
        "activityContent": ["read", "write"],
    }
    args.update(overrides)
    return StartThemeInput.model_validate(args)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with a heartbeat, two theme candidates, a draft and earlier history."""
    ws = tmp_path / "works"
    (ws / "themebox").mkdir(parents=True)
    (ws / "themebox" / "001_theme.md").write_text("# Study the bus\nread bus.py\n", "utf-8")
    (ws / "themebox" / "002_other.md").write_text("# Other\n", "utf-8")
    (ws / "themebox" / "draft.000_wip.md").write_text("not yet\n", "utf-8")
    (ws / "artifacts" / "theme_histories").mkdir(parents=True)
    (ws / "artifacts" / "20250101000000_old").mkdir()
    (ws / "artifacts" / "20250101000000_old" / "notes.md").write_text("old work\n", "utf-8")
    (ws / "feedbackbox").mkdir()
    beat(ws, datetime(2025, 7, 1, 9, 0, 0))
    beat(ws)
    return ws


@pytest.fixture
def service(root: Path) -> ThemeService:
    """A service over the populated workspace with the real operations."""
    return ThemeService(root)
