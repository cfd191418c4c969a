"""A session's folder as the engine keeps it: the layout, the run lock, the latest pointer.

``<sessions_dir>/<session_id>/`` holds the append-only journal, the lock a running
process holds, and one folder per attempt at an iteration
(``iterations/NNNNNN/attempt-K/``: its events file, prompt, agent config files);
``<sessions_dir>/latest`` names the most recent session.

Agents may write in the session's folder, so none of these files is reached through a
link: every one is opened with :mod:`loop._fs`'s no-follow primitives from the
session's trusted root (:attr:`SessionPaths.trusted`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from loop._fs import atomic_write, open_file, open_folder, read_text
from loop.errors import InputError, SessionError

__all__ = [
    "ATTEMPT_PREFIX",
    "EVENTS_FILE_NAME",
    "JOURNAL_NAME",
    "LATEST",
    "LOCK_NAME",
    "SessionLock",
    "SessionPaths",
    "is_locked",
    "mark_latest",
]

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"  # held by the process that runs the session
LATEST = "latest"


ATTEMPT_PREFIX = "attempt-"
EVENTS_FILE_NAME = "events.jsonl"  # in the attempt's folder; LOOP_EVENTS_FILE names it
# an earlier call's events file, set aside when the attempt's backend is called again
# after a rate-limit wait: events.cut-1.jsonl, events.cut-2.jsonl...
_CUT = re.compile(r"events\.cut-([1-9][0-9]*)\.jsonl")


@dataclass(frozen=True)
class SessionPaths:
    """The files of one session.

    ``root``: the folder they are reached from without following links (the project
    folder when the sessions folder is inside it); ``None``: the sessions folder itself.
    """

    sessions_dir: Path
    session_id: str
    root: Path | None = None

    @property
    def trusted(self) -> Path:
        """The folder below which no link is followed."""
        return self.root if self.root is not None else self.sessions_dir

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
        return self.dir / LOCK_NAME

    def iteration_dir(self, iteration: int) -> Path:
        """The folder of one iteration: one folder per attempt in it."""
        return self.dir / "iterations" / f"{iteration:06d}"

    def attempt_dir(self, iteration: int, attempt: int) -> Path:
        """The folder of one attempt at an iteration (events file, prompt, MCP config)."""
        return self.iteration_dir(iteration) / f"{ATTEMPT_PREFIX}{attempt}"

    def events_path(self, iteration: int, attempt: int) -> str:
        """The attempt's events file, as text (the engine's hot path builds no Path)."""
        return f"{self._iterations}/{iteration:06d}/{ATTEMPT_PREFIX}{attempt}/{EVENTS_FILE_NAME}"

    def events_file(self, iteration: int, attempt: int) -> Path:
        """The attempt's events file (:meth:`events_path`), joined to the session's
        ``iterations`` folder, which is built once: one per iteration, parsing only the
        parts below it."""
        return self._iterations_dir.joinpath(
            f"{iteration:06d}", f"{ATTEMPT_PREFIX}{attempt}", EVENTS_FILE_NAME
        )

    @functools.cached_property
    def _iterations(self) -> str:
        return f"{self.dir}/iterations"

    @functools.cached_property
    def _iterations_dir(self) -> Path:
        return self.dir / "iterations"

    def make_attempt(self, iteration: int, attempt: int) -> int:
        """Create the folder of ``iteration``'s ``attempt`` and its empty events file,
        both new; return the attempt's number.

        A folder already there (a crash came after its creation and before its
        ``iteration.start`` reached the disk) is never reused: the number moves past
        it. Nothing is reached through a link.

        Raises:
            PathError: a link on the way; StoreError: a file where a folder belongs.
        """
        with open_folder(self.iteration_dir(iteration), root=self.trusted, create=True) as fd:
            while True:
                try:
                    os.mkdir(f"{ATTEMPT_PREFIX}{attempt}", 0o777, dir_fd=fd)
                    break
                except FileExistsError:
                    attempt += 1
        events = self.attempt_dir(iteration, attempt) / EVENTS_FILE_NAME
        os.close(open_file(events, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=self.trusted))
        return attempt

    def set_aside_events(self, iteration: int, attempt: int) -> None:
        """Give the attempt's next backend call (after a rate-limit wait) a new, empty
        events file, and keep the earlier call's as ``events.cut-N.jsonl``: its events are
        void (its child is gone), the tool calls in it stay made (``lost_calls``)."""
        with open_folder(self.attempt_dir(iteration, attempt), root=self.trusted) as fd:
            names = os.listdir(fd)  # noqa: PTH208 - the folder by its descriptor: no link
            taken = {int(m.group(1)) for n in names if (m := _CUT.fullmatch(n))}
            cut = f"events.cut-{max(taken, default=0) + 1}.jsonl"
            with contextlib.suppress(FileNotFoundError):
                os.rename(EVENTS_FILE_NAME, cut, src_dir_fd=fd, dst_dir_fd=fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(EVENTS_FILE_NAME, flags, 0o666, dir_fd=fd))

    def cut_events_files(self, iteration: int, attempt: int) -> list[str]:
        """The events files set aside in an attempt (:meth:`set_aside_events`), in the
        order they were cut."""
        try:
            with open_folder(self.attempt_dir(iteration, attempt), root=self.trusted) as fd:
                names = os.listdir(fd)  # noqa: PTH208 - the folder by its descriptor: no link
            found = [(int(m.group(1)), n) for n in names if (m := _CUT.fullmatch(n))]
        except FileNotFoundError:
            return []
        folder = self.attempt_dir(iteration, attempt)
        return [str(folder / name) for _, name in sorted(found)]


class SessionLock:
    """An ``flock`` on the session's lock file: one live runner per session.

    The kernel releases it when the holder dies, even by ``kill -9``. The file is
    opened without following links (from ``root``): a link there is refused, never
    written through.
    """

    def __init__(self, path: Path, *, root: Path | None = None, run_id: str = "") -> None:
        self.path = path
        self.root = root
        self.run_id = run_id  # written after the pid: the agents this run starts check it
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``SessionError`` naming the holder.

        Raises:
            SessionError: another process holds it.
            PathError: a link is at the lock or on the way to it.
            StoreError: something else than a regular file is there.
        """
        fd = open_file(self.path, os.O_RDWR | os.O_CREAT, root=self.root)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                holder = _read_pid(self.path, self.root)
                raise SessionError(
                    f"session {self.path.parent.name} is already running"
                    + (f" (pid {holder})" if holder else "")
                ) from exc
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.run_id}".strip().encode() + b"\n")
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(path: Path, root: Path | None) -> str | None:
    try:
        text = read_text(path, root=root).split(maxsplit=1)
    except (OSError, InputError):
        return None
    return text[0][:20] if text and text[0].isdigit() else None


def is_locked(path: Path, *, root: Path | None = None) -> bool:
    """Whether a live process holds the lock at ``path`` (a link there: none can)."""
    try:
        fd = open_file(path, os.O_RDONLY, root=root)
    except (OSError, InputError):  # missing, a link, not a file: no runner holds it
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


def mark_latest(sessions_dir: Path, session_id: str, *, root: Path | None = None) -> None:
    """Record ``session_id`` as the most recent session (a link there is replaced)."""
    atomic_write(sessions_dir / LATEST, session_id + "\n", root=root, durable=False)
