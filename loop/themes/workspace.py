"""The theme workspace: where its folders are, and the lock every write takes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loop._fs import file_lock, safe_join
from loop.errors import StoreError

__all__ = ["Workspace", "read_text"]


def read_text(path: Path) -> str:
    """A workspace file as UTF-8 text; failure is a ``StoreError`` naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read: {exc}", file=path) from exc


@dataclass(frozen=True)
class Workspace:
    """Paths of one theme workspace; folders are created on demand, never on a read."""

    root: Path

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
    def intent_file(self) -> Path:
        """Written before ``start_theme`` creates anything; removed when it is done."""
        return self.stats / "start_theme.intent.json"

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, with ``/`` separators (what replies show)."""
        return path.relative_to(self.root).as_posix()

    def join(self, folder: Path, name: str, what: str) -> Path:
        """A plain name inside ``folder``; traversal, separators and NUL are refused."""
        return safe_join(folder, name, what=what)

    def list_md(self, folder: Path) -> list[str]:
        """Names of regular files in ``folder`` (empty when it does not exist)."""
        if not folder.is_dir():
            return []
        try:
            # Symlinks are skipped: a link could expose a file outside the workspace.
            return [p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink()]
        except OSError as exc:
            raise StoreError(f"cannot list: {exc.strerror or exc}", file=folder) from exc

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the workspace lock (``stats/themes.lock``) for a read-modify-write."""
        try:
            self.stats.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create: {exc.strerror or exc}", file=self.stats) from exc
        with file_lock(self.stats / "themes"):
            yield
