"""Where an experience lives and what its files say about its state (seed 000).

There is no export manager: the ``session_id`` names the directory, and the state
of an export is derived from the files in it on every call. :func:`scan` reads the
directory listing once; :func:`derive_status` is a pure function of that listing.

Every file and folder of an experience is reached from its trusted root without
following links (:mod:`loop._fs`): a link in place of ``experience_<id>/`` or of a
file in it is refused or skipped, never followed.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from loop._fs import link_error, list_folder, stat_nofollow
from loop._names import check_path, inside_root
from loop.errors import PathError, ToolError
from loop.tools.base import ToolContext

__all__ = [
    "BATCH_RE",
    "COMPLETED_NEXT_BATCH",
    "CONVERSATION_BATCH_LIMIT",
    "DIR_PREFIX",
    "MANIFEST",
    "MAX_DIRECTORY_BYTES",
    "MAX_FILE_BYTES",
    "SESSION_ID_MAX",
    "SUMMARY",
    "THOUGHTS",
    "DirState",
    "ExportStatus",
    "batch_file_name",
    "check_session_id",
    "derive_status",
    "experience_dir",
    "resolve_in_roots",
    "scan",
    "trusted_root",
]

ExportStatus = Literal["not_found", "initializing", "in_progress", "completed"]

MANIFEST = "manifest.json"
THOUGHTS = "thoughts.json"
SUMMARY = "summary.json"
DIR_PREFIX = "experience_"
BATCH_RE = re.compile(r"conversations_([0-9]{3,})\.json")  # with fullmatch

# Limits the original declared but never enforced.
CONVERSATION_BATCH_LIMIT = 50
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_DIRECTORY_BYTES = 100 * 1024 * 1024
SESSION_ID_MAX = 100

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # with fullmatch: no final newline


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a safe directory-name part.

    Allowed: 1 to 100 characters of letters, digits, ``.``, ``_`` and ``-``, starting
    with a letter or digit, without ``..``.

    Raises:
        ToolError: ``invalid_session_id`` naming what is wrong.
    """
    if not session_id:
        raise ToolError("invalid_session_id", "session_id must not be empty")
    if len(session_id) > SESSION_ID_MAX:
        raise ToolError(
            "invalid_session_id",
            f"session_id is {len(session_id)} characters long; at most {SESSION_ID_MAX} allowed",
        )
    if ".." in session_id or not _SESSION_ID.fullmatch(session_id):
        raise ToolError(
            "invalid_session_id",
            f"invalid session_id {session_id!r}: use letters, digits, '.', '_' and '-' only, "
            "starting with a letter or digit (e.g. 20250101-120000-feature)",
        )
    return session_id


def trusted_root(ctx: ToolContext) -> Path:
    """The folder below which no link of the experiences base is followed."""
    return ctx.trusted_root(ctx.experiences_base)


def experience_dir(ctx: ToolContext, session_id: str) -> Path:
    """The directory of ``session_id`` under the configured experiences base.

    Raises:
        ToolError: ``invalid_session_id`` for a bad id, or when a link stands in the
            directory's place (it is never followed).
    """
    check_session_id(session_id)
    directory = ctx.experiences_base / (DIR_PREFIX + session_id)
    st = stat_nofollow(directory, root=trusted_root(ctx))
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise ToolError("invalid_session_id", link_error(directory).message)
    return directory


def resolve_in_roots(ctx: ToolContext, raw: str, *, what: str) -> Path:
    """Resolve a user-supplied directory; it must lie in the experiences base or the project.

    Relative paths are taken relative to the project folder (``ctx.root``).

    Raises:
        ToolError: ``path_outside_roots`` when it leaves both roots.
    """
    try:
        check_path(raw, what)
    except PathError as exc:
        raise ToolError("invalid_path", exc.message) from exc
    path = Path(raw).expanduser()
    candidate = path if path.is_absolute() else ctx.root / path
    for root in (ctx.experiences_base, ctx.root):
        try:
            return inside_root(root, candidate, what=what)
        except PathError:
            continue
    raise ToolError(
        "path_outside_roots",
        f"{what} {raw!r} is outside the experiences base {ctx.experiences_base} "
        f"and the project {ctx.root}",
    )


def batch_file_name(batch_number: int) -> str:
    """``conversations_001.json`` for batch 1 (zero-padded to 3 digits)."""
    return f"conversations_{batch_number:03d}.json"


@dataclass(frozen=True)
class DirState:
    """What one listing of an experience directory shows."""

    exists: bool
    files: dict[str, int] = field(default_factory=dict)  # visible file name -> size in bytes

    @property
    def batches(self) -> dict[int, str]:
        """Batch number -> file name, for every ``conversations_NNN.json``."""
        out: dict[int, str] = {}
        for name in self.files:
            match = BATCH_RE.fullmatch(name)
            if match:
                out[int(match.group(1))] = name
        return dict(sorted(out.items()))

    @property
    def total_bytes(self) -> int:
        """The size of the visible files together."""
        return sum(self.files.values())

    def size_of(self, name: str) -> int:
        """The size of ``name``, or 0 when it does not exist."""
        return self.files.get(name, 0)


def scan(directory: Path, *, root: Path | None = None) -> DirState:
    """List the visible regular files of ``directory`` (lock and temp files are hidden).

    ``directory`` is reached from ``root`` without links (``None``: its parent is
    trusted); links inside it are not files, so they are never listed or read.

    Raises:
        PathError: ``directory`` or a folder above it is a link.
        StoreError: ``directory`` is a file.
    """
    st = stat_nofollow(directory, root=root)
    if st is None:
        return DirState(exists=False)
    if stat.S_ISLNK(st.st_mode):
        raise link_error(directory)
    files = {
        e.name: e.size
        for e in list_folder(directory, root=root)
        if e.kind == "file" and not e.name.startswith(".")
    }
    return DirState(exists=True, files=files)


COMPLETED_NEXT_BATCH = -1  # next_batch_number of a completed export (the original's value)


def derive_status(state: DirState) -> tuple[ExportStatus, int]:
    """The seed-000 status and the next batch number to send.

    * ``not_found``: no directory (next batch 1);
    * ``completed``: manifest.json exists (next batch ``-1``: nothing more to send);
    * ``in_progress``: any file in the directory, summary.json included, so an export
      is in progress right after init (next batch: the highest batch + 1, or 1);
    * ``initializing``: the directory exists and holds no file yet.

    Hidden files (the lock, temp files) are not part of the export and do not count.
    """
    if not state.exists:
        return "not_found", 1
    if MANIFEST in state.files:
        return "completed", COMPLETED_NEXT_BATCH
    batches = state.batches
    next_batch = max(batches) + 1 if batches else 1
    if state.files:
        return "in_progress", next_batch
    return "initializing", next_batch
