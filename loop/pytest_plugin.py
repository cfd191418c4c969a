"""A pytest plugin (``pytest11`` entry point ``hatloop``): recordings as regression tests.

Each recording is one test item, ``<file>::replay``, that replays it through the real
engine: a divergence fails the item with the readable diff as its message, a bad
recording fails it with the one-line error naming the file and the line.

Which files are recordings, among the ``.jsonl`` files pytest visits (its ``testpaths``
or the paths on its command line):

- with the ini option ``hatloop_recordings`` (folders, files or glob patterns, relative
  to the rootdir): exactly the ``.jsonl`` files under those paths, each one claimed (a
  broken one fails rather than being skipped);
- without it: the ones ``python -m loop replay`` takes, by the same rule
  (:mod:`loop.session.discover`): a file named on the command line, a file whose first
  bytes start a hatloop recording header, and any ``.jsonl`` file in a folder that holds
  one (a broken recording there fails with its one-line error). Any other JSONL
  (another project's data) is left alone.

Items are independent and collected in the same order in every process, so they run
under pytest-xdist (``pytest -n auto``). ``-p no:hatloop`` turns the plugin off.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from loop.errors import LoopError
from loop.session.discover import RecordingRule, is_jsonl

__all__ = [
    "EXTENSIONS_OPTION",
    "INI_OPTION",
    "RecordingFile",
    "RecordingItem",
    "ReplayFailed",
    "named",
]

INI_OPTION = "hatloop_recordings"
EXTENSIONS_OPTION = "hatloop_extensions"
_GLOB = frozenset("*?[")
_RULE = pytest.StashKey[RecordingRule]()  # one per session: each folder is read once


class ReplayFailed(Exception):
    """A replay diverged; the message is the readable diff."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ``hatloop_recordings`` and ``hatloop_extensions`` ini options."""
    parser.addini(
        INI_OPTION,
        type="linelist",
        default=[],
        help="folders, files or glob patterns (relative to the rootdir) whose .jsonl files "
        "are hatloop recordings to replay as tests (default: the .jsonl files that start "
        "with a hatloop recording header, and the others in their folders)",
    )
    parser.addini(
        EXTENSIONS_OPTION,
        type="linelist",
        default=[],
        help="extensions of your own (module:factory, imported from the rootdir) that took "
        "part in the recorded runs, made anew for each recording's replay",
    )


def named(path: Path, root: Path, entries: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``entries`` or under one (relative to ``root``).

    An entry with ``*``, ``?`` or ``[`` is a glob pattern matched against the whole
    relative path; any other is a folder or a file.
    """
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return False
    for raw in entries:
        entry = raw.strip().removeprefix("./").rstrip("/")
        if not entry:
            continue
        if _GLOB & set(entry):
            if fnmatch.fnmatch(rel, entry):
                return True
        elif entry in (".", rel) or rel.startswith(entry + "/"):
            return True
    return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> RecordingFile | None:
    """Collect a recording (see the module's docstring) as a :class:`RecordingFile`."""
    if not is_jsonl(file_path):
        return None
    config = parent.config
    entries = [str(p) for p in config.getini(INI_OPTION)]
    if entries:
        claimed = named(file_path, config.rootpath, entries)
    else:
        rule = config.stash.setdefault(_RULE, RecordingRule())
        claimed = parent.session.isinitpath(file_path) or rule.claims(file_path)
    return RecordingFile.from_parent(parent, path=file_path) if claimed else None


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
        from loop.extensions import extensions_from  # noqa: PLC0415 - start-up speed
        from loop.replay import replay_file  # noqa: PLC0415 - start-up speed, see above

        config = self.config
        names = [str(n) for n in config.getini(EXTENSIONS_OPTION)]
        made = extensions_from(names, where=config.rootpath, option=EXTENSIONS_OPTION)
        result = replay_file(self.path, made)
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
