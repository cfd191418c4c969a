"""kill -9 during start_theme: the next call detects the half state, repairs it, says so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loop.themes import ThemeService

from .conftest import snapshot, start_input

# The child runs the real service with operations that stop at one point: it reports
# READY on stdout (the parent blocks on that line, no sleeps) and waits to be killed.
CHILD = r"""
import sys, time
from pathlib import Path
from loop.themes import Operations, ThemeService
from loop.themes.models import StartThemeInput

point = sys.argv[2]

def stop(name):
    if name == point:
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        time.sleep(600)

class Stopping(Operations):
    def write_intent(self, path, data):
        super().write_intent(path, data); stop("after_intent")
    def write_history(self, path, text):
        if point == "mid_history":
            path.with_name("." + path.name + ".tmp").write_text(text[:5])
            stop("mid_history")
        super().write_history(path, text); stop("after_history")
    def make_dir(self, path):
        super().make_dir(path); stop("after_dir:" + path.name)
    def mark_processed(self, src, dst):
        super().mark_processed(src, dst); stop("after_rename")

ThemeService(Path(sys.argv[1]), Stopping()).start(StartThemeInput(
    targetFilename="001_theme.md", themeName="Study the bus", themeDirectoryPart="study_bus",
    reason="it is next", activityContent=["read", "write"]))
"""

POINTS = [
    "after_intent",
    "mid_history",
    "after_history",
    "after_dir:20250801120000_study_bus",
    "after_dir:histories",
    "after_rename",
]


def _kill_child_at(root: Path, point: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), point],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # structlog may print first; wait for our line
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"child exited before reaching {point} (rc {proc.wait()})")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("point", POINTS)
def test_kill_during_start_is_detected_and_repaired(root: Path, tmp_path: Path, point: str) -> None:
    """After SIGKILL at any point, status flags it, a repair restores every byte, and the
    next start_theme call undoes the half start, says so, and succeeds."""
    before = snapshot(root)
    _kill_child_at(root, point)
    assert (root / "stats" / "start_theme.intent.json").exists()
    assert snapshot(root) != before

    service = ThemeService(root)
    assert service.status().pendingRepair
    assert service.preview().pendingRepair

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    notes = ThemeService(copy).repair()
    assert notes and "interrupted start_theme" in notes[0]
    assert snapshot(copy) == before

    out = service.start(start_input())
    assert out.repaired and "interrupted start_theme" in out.repaired[0]
    assert out.themeStartId == "20250801120000"
    assert (root / "themebox" / "processed.001_theme.md").is_file()
    assert not (root / "stats" / "start_theme.intent.json").exists()
    assert not list((root / "artifacts" / "theme_histories").glob(".*.tmp"))
