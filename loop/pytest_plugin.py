"""A pytest plugin (``pytest11`` entry point ``hatloop``): recordings as regression tests.

Every file matching the ini option ``hatloop_recordings`` (glob patterns relative to
the rootdir; default ``recordings/*.jsonl``) is collected as one test item that replays
the recording through the real engine. A divergence fails the item with the readable
diff as its message; a bad recording is an error naming the file and the line.

Run them with ``pytest recordings`` (or add ``recordings`` to ``testpaths``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loop.errors import LoopError

__all__ = ["INI_OPTION", "RecordingFile", "RecordingItem", "ReplayFailed"]

INI_OPTION = "hatloop_recordings"
DEFAULT_PATTERNS = ["recordings/*.jsonl"]


class ReplayFailed(Exception):
    """A replay diverged; the message is the readable diff."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ``hatloop_recordings`` ini option."""
    parser.addini(
        INI_OPTION,
        type="linelist",
        default=DEFAULT_PATTERNS,
        help="glob patterns (relative to the rootdir) of hatloop recordings to "
        "replay as tests (default: recordings/*.jsonl)",
    )


def matches(path: Path, root: Path, patterns: list[str]) -> bool:
    """Whether ``path`` (relative to ``root``) matches one of the glob ``patterns``."""
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return False
    return any(fnmatch.fnmatch(rel, p) for p in patterns)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> RecordingFile | None:
    """Collect a recording matching ``hatloop_recordings`` as a :class:`RecordingFile`."""
    if file_path.suffix != ".jsonl":
        return None
    patterns = [str(p) for p in parent.config.getini(INI_OPTION)]
    if not matches(file_path, parent.config.rootpath, patterns):
        return None
    return RecordingFile.from_parent(parent, path=file_path)


class RecordingFile(pytest.File):
    """One recording file: one test item."""

    def collect(self) -> Iterator[RecordingItem]:
        """The single replay item of this recording."""
        yield RecordingItem.from_parent(self, name="replay")


class RecordingItem(pytest.Item):
    """Replays one recording; fails with the divergence."""

    def runtest(self) -> None:
        """Replay through the real engine; raise :class:`ReplayFailed` on a divergence."""
        # imported when a recording runs, not when pytest loads the plugin: every pytest
        # run of a project with hatloop installed loads it, and the engine is heavy
        from loop.replay import replay_file  # noqa: PLC0415 - start-up speed, see above

        result = replay_file(self.path)
        notes = list(result.warnings) + (
            [f"prefix only: {result.partial}"] if result.partial else []
        )
        if notes:
            self.add_report_section("call", "replay", "\n".join(notes))
        if result.divergence is not None:
            raise ReplayFailed(f"{self.path}: {result.divergence.render()}")

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | Any:
        """The divergence diff (or the bad-input message) without a traceback."""
        if isinstance(excinfo.value, ReplayFailed | LoopError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the item comes from, for pytest's reports."""
        return self.path, None, f"replay {self.path.name}"
