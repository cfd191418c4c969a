"""The file a recording goes to: the user names it, an agent may plant something there.

The folder is the user's choice (``--record-session PATH``); the file itself is never a
link, a FIFO or a file with other hard links. A character device (``/dev/null``,
``/dev/full``) is the user's choice too.

One run writes a recording at a time: the writer holds an ``flock`` on the open file for
its run (the kernel lets go of it when the process dies, even by ``kill -9``), and a
second writer is refused before its run starts, without touching the file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

import structlog

from loop import _json
from loop._fs import link_error
from loop.errors import InputError, PathError

__all__ = [
    "check_same_session",
    "check_target",
    "claim_target",
    "cut_torn_tail",
    "open_recording",
    "prepare_target",
    "tool_state_before",
]

log = structlog.get_logger("loop.recorder")


def _make_parent(path: Path) -> None:
    """Make the recording's folder and the missing ones above it (the user's choice of
    place). A file in the way is ``Not a directory`` (``Path.mkdir`` says ``File exists``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from None


def check_target(path: Path, *, force: bool, append: bool, session_id: str | None = None) -> None:
    """Check that the recording can go to ``path``, before the run starts: open it for
    writing as the recorder will, and leave it as it was.

    What ``path`` is comes first: a symbolic link, a folder, a pipe and a socket are
    refused whatever the flags. Then an existing file is refused unless ``force`` or
    ``append``; with one, it is opened for appending and left untouched (a device such
    as ``/dev/null`` is accepted). A new file is created and removed again, and so are
    the folders made for it. ``run`` and ``doctor`` both check with this.
    ``session_id`` (with ``append``): the session resumed, which an existing recording
    must be of (see :func:`check_same_session`).

    Raises:
        InputError: one line saying why the file cannot be written.
    """
    if path.is_symlink():
        raise InputError(f"{path}: is a symbolic link; --record-session needs a plain file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; --record-session needs a file")
    if path.is_fifo() or path.is_socket():  # opening one would block or fail
        raise InputError(f"{path}: is a pipe or a socket; --record-session needs a file")
    existed = path.exists()
    if existed and _written_by_another_run(path):
        raise _another_run(path)
    if existed and not (force or append) and not _empty(path):
        raise _exists(path)
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_APPEND if existed else os.O_CREAT | os.O_EXCL)
    try:
        _make_parent(path)
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        _remove_folders(missing)
        raise InputError(f"{path}: cannot write the recording: {exc.strerror or exc}") from None
    os.close(fd)
    if not existed:
        path.unlink(missing_ok=True)
    _remove_folders(missing)
    if existed and append and session_id is not None:
        check_same_session(path, session_id)


def _empty(path: Path) -> bool:
    """Whether ``path`` is an empty file: there is nothing in it to keep (a run killed
    as it began left it), so a new recording takes it without ``--force``."""
    try:
        return path.lstat().st_size == 0 and path.is_file()
    except OSError:
        return False


def _exists(path: Path) -> InputError:
    return InputError(
        f"{path}: recording already exists; pass --force to overwrite it or choose another file"
    )


def _another_run(path: Path) -> InputError:
    return InputError(
        f"{path}: another run writes this recording; wait for it to end or choose another file"
    )


def _written_by_another_run(path: Path) -> bool:
    """Whether a live process holds the recording's lock (a file that cannot be opened
    is left to the checks that say why)."""
    try:
        fd = open_recording(path, os.O_RDONLY)
    except (OSError, InputError):
        return False
    try:
        return not _lock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def _lock(fd: int, how: int) -> bool:
    """Take an ``flock`` on a regular file without waiting; ``False``: another holds it.
    A device (``/dev/null``) is not locked: no one reads a recording back from it, and
    two runs may both throw theirs away."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return True
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders a check made, deepest first (each only if still empty)."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return


# The longest first line read to find whose recording a file is: a header with its
# configuration is a few kilobytes.
FIRST_LINE_LIMIT = 1024 * 1024


def check_same_session(path: Path, session_id: str) -> None:
    """Refuse to append session ``session_id`` (resumed) to ``path`` unless the file is
    empty, holds only a torn first line (the recorder cuts it), or starts with the header
    of that same session.

    Raises:
        InputError: the file holds another session's recording, or is not a recording.
    """
    try:
        fd = open_recording(path, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the recording: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        first = fh.readline(FIRST_LINE_LIMIT)
        torn = not first.endswith(b"\n") and not fh.read(1)
    if not first or torn:
        return
    try:
        header = _json.loads(first)
    except (ValueError, RecursionError):
        header = None
    if not (isinstance(header, dict) and header.get("kind") == "header"):
        raise InputError(
            f"{path}: is not a recording (its first line is no recording header); "
            "choose another file for --record-session"
        )
    if header.get("session_id") != session_id:
        raise InputError(
            f"{path}: holds the recording of session {header.get('session_id')}, not of "
            f"session {session_id} (the one resumed); choose another file for --record-session"
        )


def open_recording(path: Path, flags: int) -> int:
    """Open the recording without following a link (an agent may plant one in the
    project) or blocking on a FIFO; a file with other hard links is refused (writing it
    would change another file); a character device (``/dev/null``) is the user's choice.

    Raises:
        PathError: a link, or a file with other hard links.
        InputError: a FIFO, a socket or a folder.
        OSError: as ``os.open``.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_error(path) from exc
        raise
    try:
        _check_recording(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_recording(path: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise PathError(
            f"refusing to write {path}: it has {st.st_nlink} hard links, so writing "
            "it would change another file too"
        )
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise InputError(f"{path}: not a regular file; --record-session needs a file")


def claim_target(path: Path, *, append: bool, force: bool) -> tuple[int, bool]:
    """Open the recording to write and lock it for this run, before the run starts (see
    :func:`open_recording`): a new file, created here, or with ``force`` or ``append`` the
    file already there; the descriptor, and whether the file was created. Nothing in the
    file changes here (see :func:`prepare_target`): a refused run leaves it as it was.

    The create is exclusive, so of two runs that both found no file, one creates it and
    the other is refused, as if the file had been there before it started.

    Raises:
        InputError: the file is there (without ``force`` or ``append``), or another run
            holds its lock; a FIFO, a socket or a folder (as :func:`open_recording`).
        PathError, OSError: as :func:`open_recording`.
    """
    flags = os.O_RDWR | os.O_APPEND
    _make_parent(path)
    try:
        fd, created = open_recording(path, flags | os.O_CREAT | os.O_EXCL), True
    except FileExistsError:
        if _written_by_another_run(path):
            raise _another_run(path) from None
        if not (append or force) and not _empty(path):
            raise _exists(path) from None
        fd, created = open_recording(path, flags), False
    try:
        locked = _lock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    if not locked:  # another run opened it first: it is that run's, never touched here
        os.close(fd)
        raise _another_run(path)
    return fd, created


def prepare_target(fd: int, path: Path, *, append: bool, force: bool) -> int:
    """Make the claimed recording ready for the session's first record, once the run has
    started: with ``force`` cut it, with ``append`` cut its torn last line; its size.

    Raises:
        OSError: the file cannot be cut.
    """
    if force and not append and stat.S_ISREG(os.fstat(fd).st_mode):  # not /dev/null
        os.ftruncate(fd, 0)
    size = os.fstat(fd).st_size
    if size and append:
        size = cut_torn_tail(fd, size, path)
    return size


def cut_torn_tail(fd: int, size: int, path: Path) -> int:
    """Drop a torn last line left by a crash, so appended records start on a new line;
    the file's new size."""
    good = 0
    end = size
    while end > 0:  # back from the end, a block at a time, to the last newline
        start = max(0, end - 65536)
        block = os.pread(fd, end - start, start)
        if end == size and block.endswith(b"\n"):
            return size
        cut = block.rfind(b"\n")
        if cut >= 0:
            good = start + cut + 1
            break
        end = start
    os.ftruncate(fd, good)
    log.warning("recording: dropped a torn last line before appending", file=str(path))
    return good


def tool_state_before(tasks_file: Path | None, workspace: Path, experiences: Path) -> list[str]:
    """What the tools already hold as a new session is recorded: a replay starts without
    it (in an empty scratch folder), so a recorded call that reads it will differ. One
    line each, for a warning; nothing when the tools hold nothing."""
    found = []
    if tasks_file is not None and tasks_file.is_file() and not tasks_file.is_symlink():
        try:
            tasks = _json.loads(tasks_file.read_bytes())
        except (OSError, ValueError):
            tasks = None
        if not isinstance(tasks, list) or tasks:
            count = f"{len(tasks)} task(s)" if isinstance(tasks, list) else "tasks"
            found.append(f"{count} in {tasks_file}")
    for folder, what in ((workspace, "the theme workspace"), (experiences, "experiences")):
        try:
            held = folder.is_dir() and any(folder.iterdir())
        except OSError:
            held = False
        if held:
            found.append(f"{what} in {folder}")
    return found
