"""Every change ``start_theme`` makes on disk, one method per step.

The service calls these and nothing else to change the workspace, so a test (or a
child process killed with SIGKILL) can replace any single step with one that fails
or stops: the seam plays the part httpx's transports play for requests.

Each step reaches its paths from :attr:`Operations.root` without following links
(:mod:`loop._fs`); the service sets it to its workspace's trusted root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loop import _fs
from loop._fs import write_new_file

__all__ = ["Operations", "write_new_file"]


class Operations:
    """The real file operations; subclass and override one to inject a fault.

    Attributes:
        root: the folder below which no link is followed (``None``: each path's own
            folder is trusted); :class:`~loop.themes.service.ThemeService` sets it.
    """

    root: Path | None = None

    # --- the forward steps --------------------------------------------------------

    def write_intent(self, path: Path, data: dict[str, Any]) -> None:
        """Record what the start is about to create (before stage 3)."""
        _fs.write_json(path, data, root=self.root)

    def write_history(self, path: Path, text: str) -> None:
        """Stage 3: create the start history file (never replacing one)."""
        _fs.write_new_file(path, text, root=self.root)

    def make_dir(self, path: Path) -> None:
        """Stage 4: create one directory that does not exist yet."""
        _fs.make_folder(path, root=self.root)

    def mark_processed(self, src: Path, dst: Path) -> None:
        """Stage 5: rename the themebox file to its ``processed.`` name."""
        _fs.rename(src, dst, root=self.root)

    def remove_intent(self, path: Path) -> None:
        """Last step of a success or of a clean-up: the start is settled."""
        _fs.remove_file(path, root=self.root)

    # --- the clean-up steps, in the order they run -------------------------------

    def unmark_processed(self, dst: Path, src: Path) -> None:
        """Clean-up: give the themebox file its name back."""
        _fs.rename(dst, src, root=self.root)

    def remove_dir(self, path: Path) -> None:
        """Clean-up: remove a directory this start created (only if it is empty)."""
        _fs.remove_folder(path, root=self.root)

    def remove_history(self, path: Path) -> None:
        """Clean-up: remove the start history file this start created."""
        _fs.remove_file(path, root=self.root)

    def remove_history_temp(self, path: Path) -> None:
        """Clean-up: remove the history's temp file left by a killed writer."""
        _fs.remove_file(path, root=self.root, durable=False)
