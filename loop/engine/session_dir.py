"""A session's folder as the engine keeps it: the layout, the run lock, the latest pointer.

``<sessions_dir>/<session_id>/`` holds the append-only journal, the lock a running
process holds, and one folder per iteration (its events file, prompt, MCP config);
``<sessions_dir>/latest`` names the most recent session.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from loop._fs import atomic_write
from loop.errors import SessionError

__all__ = [
    "JOURNAL_NAME",
    "LATEST",
    "SessionLock",
    "SessionPaths",
    "is_locked",
    "mark_latest",
]

JOURNAL_NAME = "journal.jsonl"
LATEST = "latest"


@dataclass(frozen=True)
class SessionPaths:
    """The files of one session."""

    sessions_dir: Path
    session_id: str

    @property
    def dir(self) -> Path:
        """The session's folder."""
        return self.sessions_dir / self.session_id

    @property
    def journal(self) -> Path:
        """The append-only journal."""
        return self.dir / JOURNAL_NAME

    @property
    def lock(self) -> Path:
        """The lock file a running process holds."""
        return self.dir / "lock"

    def iteration_dir(self, iteration: int) -> Path:
        """The folder of one iteration (events file, prompt, MCP config)."""
        return self.dir / "iterations" / f"{iteration:06d}"


class SessionLock:
    """An ``flock`` on the session's lock file: one live runner per session.

    The kernel releases it when the holder dies, even by ``kill -9``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``SessionError`` naming the holder."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                holder = _read_pid(self.path)
                raise SessionError(
                    f"session {self.path.parent.name} is already running"
                    + (f" (pid {holder})" if holder else "")
                ) from exc
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def is_locked(path: Path) -> bool:
    """Whether a live process holds the lock at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def mark_latest(sessions_dir: Path, session_id: str) -> None:
    """Record ``session_id`` as the most recent session."""
    atomic_write(sessions_dir / LATEST, session_id + "\n", durable=False)
