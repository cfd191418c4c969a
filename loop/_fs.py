"""File primitives every domain uses: atomic writes, exclusive locks, safe paths.

Rules (DESIGN.md): writes are atomic (temp file, fsync, rename); a read-modify-write
of a shared file happens under an exclusive lock and re-reads inside it; a file that
cannot be parsed is an error that names it; every path built from input stays inside
its root.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loop.errors import PathError, StoreError

__all__ = [
    "atomic_write",
    "check_name",
    "file_lock",
    "fsync_dir",
    "inside_root",
    "json_text",
    "read_json",
    "safe_join",
    "write_all",
    "write_json",
    "write_new_file",
]


def write_new_file(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` atomically, never replacing an existing file.

    The bytes go to ``.<name>.tmp`` first (fsynced), then a hard link publishes them
    under the final name; ``link`` fails with ``FileExistsError`` instead of clobbering.
    A stale temp file from a killed writer is replaced (callers that can race hold a lock).

    Raises:
        FileExistsError: ``path`` already exists.
        OSError: the write failed; no temp file is left behind.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(path.parent)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less: a signal, a pipe)."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (after a rename or a create) to disk."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # a platform without directory fds: nothing to flush
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once at import: os.umask() is process-wide, so calling it from worker threads
# (MCP runs sync tools in threads) could briefly change it for everyone.
_UMASK = _read_umask()


def atomic_write(path: Path, data: bytes | str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: readers see old or new, never half.

    Args:
        path: the file to write; its parent must exist.
        data: the whole new content.
        durable: fsync the file and its directory (on by default).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes 0600 files: keep the replaced file's mode, else the umask default
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_UMASK
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    if durable:
        fsync_dir(path.parent)


def json_text(value: Any) -> str:
    """``value`` as the pretty JSON every state file holds (indent 2, trailing newline)."""
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    """Atomically write ``value`` as pretty JSON (UTF-8, trailing newline)."""
    atomic_write(path, json_text(value), durable=durable)


def read_json(path: Path) -> Any:
    """Read a JSON file; an unreadable or unparsable file is a ``StoreError`` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(f"not UTF-8 text ({exc.reason})", file=path) from exc
    except OSError as exc:
        raise StoreError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=path
        ) from exc


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float = 30.0) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``<path>.lock`` for a read-modify-write.

    The lock is an ``flock`` on a side file, so the data file itself can be replaced
    atomically while the lock is held. A dead process holds no lock.

    Raises:
        StoreError: the lock could not be taken within ``timeout`` seconds, or the lock
            file cannot be opened or locked (the message names it and the cause).
    """
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(
            f"cannot open the lock file {lock_path.name}: {exc.strerror or exc}", file=path
        ) from exc
    try:
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise StoreError(
                        f"cannot lock {lock_path.name}: {exc.strerror or exc}", file=path
                    ) from exc
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"another process holds the lock {lock_path.name} (waited {timeout:g}s)",
                        file=path,
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def check_name(part: str, what: str = "name") -> str:
    """Refuse anything but a plain single path component; return it unchanged.

    Refused: empty, ``.``, ``..``, absolute paths, ``/`` or ``\\`` separators, NUL.
    """
    if not isinstance(part, str) or part == "":
        raise PathError(f"{what} must be a non-empty name")
    if "\x00" in part:
        raise PathError(f"{what} must not contain NUL: {part!r}")
    if "/" in part or "\\" in part:
        raise PathError(f"{what} must be a plain name without path separators: {part!r}")
    if part in (".", ".."):
        raise PathError(f"{what} must not be {part!r}")
    return part


def safe_join(root: Path, *parts: str, what: str = "name") -> Path:
    """Join plain name components under ``root`` and check the result stays inside it."""
    for part in parts:
        check_name(part, what)
    candidate = root.joinpath(*parts)
    resolved_root = root.resolve()
    resolved = candidate.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise PathError(f"{what} leaves its root {root}: {'/'.join(parts)!r}")
    return candidate


def inside_root(root: Path, path: Path | str, *, what: str = "path") -> Path:
    """Check that a user-supplied (possibly relative) path stays inside ``root``.

    Relative paths are taken relative to ``root``; absolute ones must already lie in it.
    """
    raw = str(path)
    if "\x00" in raw:
        raise PathError(f"{what} must not contain NUL")
    p = Path(raw)
    candidate = p if p.is_absolute() else root / p
    resolved_root = root.resolve()
    resolved = candidate.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise PathError(f"{what} must stay inside {root}: {raw!r}")
    return resolved
