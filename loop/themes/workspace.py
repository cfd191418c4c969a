"""The theme workspace: where its folders are, and the lock every write takes.

Every file and folder of the workspace is reached from :attr:`Workspace.trusted`
without following links (see :mod:`loop._fs`): a link an agent put in place of
``stats/``, ``themebox/``, ``feedbackbox/`` or ``artifacts/`` (or of a file in them)
is refused, so nothing outside the workspace is written, and nothing outside it is read
and shown.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loop import _fs, _names
from loop._log import get_logger
from loop.errors import StoreError
from loop.themes import naming
from loop.themes.models import SkippedItem

__all__ = ["Workspace"]

log = get_logger(__name__)


@dataclass(frozen=True)
class Workspace:
    """Paths of one theme workspace; folders are created on demand, never on a read.

    Attributes:
        root: the workspace folder.
        trusted_root: the folder its paths are reached from without links (the
            project folder when the workspace is inside it); ``None``: ``root``.
    """

    root: Path
    trusted_root: Path | None = None

    @property
    def trusted(self) -> Path:
        """The folder below which no link is followed."""
        return self.trusted_root or self.root

    @property
    def themebox(self) -> Path:
        """Theme candidates (``*.md``)."""
        return self.root / "themebox"

    @property
    def feedbackbox(self) -> Path:
        """Feedback items for the agent (``*.md``; ``interrupt.*`` interrupts)."""
        return self.root / "feedbackbox"

    @property
    def artifacts(self) -> Path:
        """Theme directories."""
        return self.root / "artifacts"

    @property
    def histories(self) -> Path:
        """Start and end history files."""
        return self.artifacts / "theme_histories"

    @property
    def stats(self) -> Path:
        """The heartbeat ID, the lock and the start intent."""
        return self.root / "stats"

    @property
    def heartbeat_file(self) -> Path:
        """``stats/current_heartbeat_id.txt``."""
        return self.stats / "current_heartbeat_id.txt"

    @property
    def heartbeat_call_file(self) -> Path:
        """``stats/heartbeat_call.json``: which session call wrote the current heartbeat."""
        return self.stats / "heartbeat_call.json"

    @property
    def intent_file(self) -> Path:
        """Written before ``start_theme`` creates anything; removed when it is done."""
        return self.stats / "start_theme.intent.json"

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, with ``/`` separators (what replies show)."""
        return path.relative_to(self.root).as_posix()

    def join(self, folder: Path, name: str, what: str) -> Path:
        """A plain name inside ``folder``; traversal, separators, NUL and length refused."""
        return _names.safe_join(folder, name, what=what)

    # --- reads, never through a link ---------------------------------------------------

    def kind(self, path: Path) -> str | None:
        """``"file"``, ``"folder"``, ``"link"`` or ``"other"``; ``None`` when nothing is there.

        Raises:
            PathError: a folder on the way is a link.
        """
        st = _fs.stat_nofollow(path, root=self.trusted)
        if st is None:
            return None
        if stat.S_ISREG(st.st_mode):
            return "file"
        if stat.S_ISDIR(st.st_mode):
            return "folder"
        return "link" if stat.S_ISLNK(st.st_mode) else "other"

    def exists(self, path: Path) -> bool:
        """Whether anything (a link included) is at ``path``."""
        return self.kind(path) is not None

    def read_text(self, path: Path) -> str:
        """A workspace file as UTF-8 text; failure is an error naming the file."""
        try:
            return _fs.read_text(path, root=self.trusted)
        except FileNotFoundError as exc:
            raise StoreError("cannot read: no such file", file=path) from exc

    def list_md(self, folder: Path) -> list[str]:
        """Names of regular files in ``folder`` (empty when it does not exist).

        Links are skipped: a link could expose a file outside the workspace.

        Raises:
            PathError: ``folder`` (or a folder above it) is a link.
            StoreError: ``folder`` is not a folder, or cannot be listed.
        """
        try:
            return [e.name for e in _fs.list_folder(folder, root=self.trusted) if e.kind == "file"]
        except OSError as exc:
            raise StoreError(f"cannot list: {exc.strerror or exc}", file=folder) from exc

    def items(self, folder: Path) -> tuple[list[str], list[SkippedItem]]:
        """The unprocessed items of ``folder`` (themebox or feedbackbox) the tools can
        take, first by name, and the ones they cannot, each logged as a warning.

        Raises:
            PathError, StoreError: as :meth:`list_md`.
        """
        fit, unfit = naming.sort_out(self.list_md(folder))
        skipped = []
        for item in unfit:
            # Shown escaped: a name that is not UTF-8 cannot go into a reply as it is.
            shown = item.name.encode("utf-8", "backslashreplace").decode("utf-8")
            file = f"{self.rel(folder)}/{shown}"
            log.warning("theme item skipped", file=file, reason=item.reason)
            skipped.append(SkippedItem(file=file, reason=item.reason))
        return fit, skipped

    # --- the lock ------------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the workspace lock (``stats/themes.lock``) for a read-modify-write."""
        try:
            _fs.make_folders(self.stats, root=self.trusted)
        except OSError as exc:
            raise StoreError(f"cannot create: {exc.strerror or exc}", file=self.stats) from exc
        with _fs.file_lock(self.stats / "themes", root=self.trusted):
            yield
