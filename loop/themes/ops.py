"""Every change ``start_theme`` makes on disk, one method per step.

The service calls these and nothing else to change the workspace, so a test (or a
child process killed with SIGKILL) can replace any single step with one that fails
or stops: the seam plays the part httpx's transports play for requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loop._fs import fsync_dir, write_json, write_new_file

__all__ = ["Operations", "write_new_file"]


class Operations:
    """The real file operations; subclass and override one to inject a fault."""

    # --- the forward steps --------------------------------------------------------

    def write_intent(self, path: Path, data: dict[str, Any]) -> None:
        """Record what the start is about to create (before stage 3)."""
        write_json(path, data)

    def write_history(self, path: Path, text: str) -> None:
        """Stage 3: create the start history file (never replacing one)."""
        write_new_file(path, text)

    def make_dir(self, path: Path) -> None:
        """Stage 4: create one directory that does not exist yet."""
        path.mkdir()
        fsync_dir(path.parent)

    def mark_processed(self, src: Path, dst: Path) -> None:
        """Stage 5: rename the themebox file to its ``processed.`` name."""
        if dst.exists():
            raise FileExistsError(f"{dst.name} already exists")
        src.rename(dst)
        fsync_dir(dst.parent)

    def remove_intent(self, path: Path) -> None:
        """Last step of a success or of a clean-up: the start is settled."""
        path.unlink()
        fsync_dir(path.parent)

    # --- the clean-up steps, in the order they run -------------------------------

    def unmark_processed(self, dst: Path, src: Path) -> None:
        """Clean-up: give the themebox file its name back."""
        dst.rename(src)
        fsync_dir(src.parent)

    def remove_dir(self, path: Path) -> None:
        """Clean-up: remove a directory this start created (only if it is empty)."""
        path.rmdir()
        fsync_dir(path.parent)

    def remove_history(self, path: Path) -> None:
        """Clean-up: remove the start history file this start created."""
        path.unlink()
        fsync_dir(path.parent)

    def remove_history_temp(self, path: Path) -> None:
        """Clean-up: remove the history's temp file left by a killed writer."""
        path.unlink()
