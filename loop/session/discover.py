"""Which ``.jsonl`` files are recordings to run: the one rule that ``replay DIR`` and the
pytest plugin share, so that both run the same suite.

A ``.jsonl`` file is a recording to run when

- its first bytes start a recording header (:func:`starts_recording`), or
- it sits in a folder that holds such a file: a broken recording there (empty, torn, with
  git's conflict markers) is claimed and fails with its one-line error, rather than
  dropping out of the suite.

Any other ``.jsonl`` file (another project's data, in a folder that holds no recording)
is no recording: pytest leaves it alone, and ``replay DIR`` skips it and says how many
it skipped. A folder is walked as pytest walks it: its entries sorted by name, its
sub-folders included, hidden ones (``.git``) left out.

Standard library only (and hatloop's leaf modules): the pytest plugin uses this in every
pytest run of a project with hatloop installed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from loop import _fs, _json

__all__ = ["SNIFF_BYTES", "Found", "RecordingRule", "is_jsonl", "starts_recording"]

SNIFF_BYTES = 64 * 1024  # of a file's first line, read to tell a recording (never a limit on one)

# how the recorder begins every header (its first member is the kind), spaces allowed
_HEADER_START = re.compile(rb'\s*\{\s*"kind"\s*:\s*"header"\s*,')


def is_jsonl(path: Path) -> bool:
    """Whether ``path`` is named ``*.jsonl``."""
    return path.suffix == ".jsonl"


def starts_recording(path: Path) -> bool:
    """Whether ``path``'s first bytes start a hatloop recording header.

    At most :data:`SNIFF_BYTES` of the first line are read (a UTF-8 byte order mark before
    it is skipped). A first line that ends within them starts a recording when it is a
    JSON object with ``"kind": "header"`` and a ``schema_version``. A longer one (the
    header of a session with a large prompt) does when it begins as the recorder begins
    a header, ``{"kind":"header",``: the replay reads it whole. A file that is not a
    regular file (a FIFO is never waited on) or cannot be read does not.
    """
    try:
        with _fs.open_input(path) as fh:
            raw = fh.readline(SNIFF_BYTES)
    except OSError:
        return False
    line = _json.without_bom(raw)
    if len(raw) == SNIFF_BYTES and not raw.endswith(b"\n"):  # longer than what was read
        return _HEADER_START.match(line) is not None
    try:
        data = _json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("kind") == "header" and "schema_version" in data


@dataclass(frozen=True)
class Found:
    """The recordings to run, in order, and the ``.jsonl`` files skipped as no
    recording (those of folders that hold none)."""

    recordings: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


class RecordingRule:
    """The rule, for one run (a pytest session, a ``replay`` command).

    What it learns of a file or a folder is kept, so each is read once, however many
    files of a folder ask about it.
    """

    def __init__(self) -> None:
        self._starts: dict[Path, bool] = {}
        self._holds: dict[Path, bool] = {}

    def claims(self, path: Path) -> bool:
        """Whether the ``.jsonl`` file ``path`` is a recording to run: it starts a
        recording header, or its folder holds a file that does."""
        return self._starts_recording(path) or self.holds_recording(path.parent)

    def holds_recording(self, folder: Path) -> bool:
        """Whether ``folder`` itself (not a sub-folder) holds a file that starts a
        recording header."""
        held = self._holds.get(folder)
        if held is None:
            try:
                files = _jsonl_files(folder)
            except OSError:
                files = []
            held = self._holds[folder] = any(self._starts_recording(p) for p in files)
        return held

    def find(self, folder: Path) -> Found:
        """The ``.jsonl`` files in ``folder`` and its sub-folders, in pytest's order
        (each folder's entries sorted by name; hidden folders left out; a folder
        reached again through a link walked once), told apart by :meth:`claims`.

        Raises:
            OSError: ``folder``, or one of its sub-folders, cannot be read.
        """
        found = Found()
        walked: set[tuple[int, int]] = set()

        def walk(here: Path) -> None:
            st = here.stat()
            if (st.st_dev, st.st_ino) in walked:
                return
            walked.add((st.st_dev, st.st_ino))
            for entry in _entries(here):
                path = Path(entry.path)
                if entry.is_dir():
                    if not entry.name.startswith("."):
                        walk(path)
                elif entry.is_file() and is_jsonl(path):
                    (found.recordings if self.claims(path) else found.skipped).append(path)

        walk(folder)
        return found

    def _starts_recording(self, path: Path) -> bool:
        starts = self._starts.get(path)
        if starts is None:
            starts = self._starts[path] = starts_recording(path)
        return starts


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """``folder``'s entries, sorted by name (as pytest visits them)."""
    with os.scandir(folder) as it:
        return sorted(it, key=lambda entry: entry.name)


def _jsonl_files(folder: Path) -> list[Path]:
    """The ``*.jsonl`` files right in ``folder`` (links to files included), by name."""
    return [Path(e.path) for e in _entries(folder) if e.is_file() and is_jsonl(Path(e.path))]
