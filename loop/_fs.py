"""File primitives every domain uses: no-follow opens, atomic writes, locks.

Names and paths that come from input are checked in :mod:`loop._names` first.

Rules (DESIGN.md): writes are atomic (temp file, fsync, rename); a read-modify-write
of a shared file happens under an exclusive lock and re-reads inside it; a file that
cannot be parsed is an error that names it; every path built from input stays inside
its root.

**Links are never followed below a root.** An agent may write anywhere in the project
and in ``.loop/``, so it can put a symbolic link where hatloop expects a folder or a
file. Every primitive here takes the ``root`` the path lies in: the root is opened as
configured (links in it and above it are the user's choice), and each component below
it is opened with ``O_NOFOLLOW`` (``O_DIRECTORY`` for folders), one at a time from the
folder descriptor above it, so a link swapped in between two steps is not followed
either. A link is refused with a :class:`~loop.errors.PathError` naming it; a file
where a folder belongs (or the reverse) is a :class:`~loop.errors.StoreError` naming
it. Without ``root``, the folder holding the path is trusted as given and only the
named entry itself is never followed. Files opened here must be regular files (a FIFO
would block), and a file written in place must have no other hard link.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from loop.errors import PathError, StoreError

__all__ = [
    "Entry",
    "append_bytes",
    "atomic_write",
    "file_lock",
    "fsync_dir",
    "json_text",
    "link_error",
    "list_folder",
    "make_folder",
    "make_folders",
    "open_file",
    "open_folder",
    "open_input",
    "read_bytes",
    "read_json",
    "read_text",
    "remove_file",
    "remove_folder",
    "rename",
    "require_folder",
    "stat_nofollow",
    "write_all",
    "write_json",
    "write_new_file",
]


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW
_FILE_FLAGS = os.O_NOFOLLOW | _CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a FIFO never blocks
_WRITE_MODES = os.O_WRONLY | os.O_RDWR


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# Read once at import: os.umask() is process-wide, so calling it from worker threads
# (MCP runs sync tools in threads) could briefly change it for everyone.
_UMASK = _read_umask()


# --- folders, reached without following links -------------------------------------------


def _split(path: Path, root: Path | None, *, folder: bool) -> tuple[Path, tuple[str, ...]]:
    """The trusted folder to start from and the components below it, never followed."""
    full = Path(os.path.abspath(path))  # noqa: PTH100 - lexical: resolving would follow links
    if root is None:
        return (full.parent, (full.name,)) if folder and full.name else (full, ())
    base = Path(os.path.abspath(root))  # noqa: PTH100 - lexical, as above
    if full == base:
        return base, ()
    if base not in full.parents:
        raise PathError(f"{path} is not inside {root}")
    return base, full.relative_to(base).parts


def _link_or_kind(dir_fd: int, name: str, shown: Path, exc: OSError) -> Exception:
    """The error for a component that could not be opened as a folder."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return link_error(shown)
    return StoreError("not a folder (something else is in its place)", file=shown)


def link_error(shown: Path) -> PathError:
    """The error refusing the symbolic link at ``shown`` (raise it)."""
    return PathError(
        f"refusing to follow the symbolic link {shown}: hatloop never follows links "
        "inside its folders (remove the link, or configure the real path)"
    )


def _open_anchor(anchor: Path, create: bool) -> int:
    try:
        return os.open(anchor, _DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError as exc:
        raise StoreError("not a folder (something else is in its place)", file=anchor) from exc
    anchor.mkdir(parents=True, exist_ok=True)  # the trusted root, as configured
    return os.open(anchor, _DIR_FLAGS)


def _descend(fd: int, anchor: Path, parts: tuple[str, ...], create: bool) -> int:
    here = anchor
    for name in parts:
        here = here / name
        try:
            try:
                child = os.open(name, _NOFOLLOW_DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                child = os.open(name, _NOFOLLOW_DIR, dir_fd=fd)
        except OSError as exc:
            error = (
                _link_or_kind(fd, name, here, exc)
                if exc.errno in (errno.ENOTDIR, errno.ELOOP)
                else exc
            )
            os.close(fd)
            if error is exc:
                raise
            raise error from exc
        os.close(fd)
        fd = child
    return fd


@contextlib.contextmanager
def open_folder(path: Path, *, root: Path | None = None, create: bool = False) -> Iterator[int]:
    """Yield a descriptor of the folder ``path``, reached from ``root`` without links.

    Args:
        path: the folder, inside ``root``.
        root: the trusted folder to start from; ``None``: the folder holding ``path``.
        create: create the missing folders on the way (``mkdir -p``).

    Raises:
        FileNotFoundError: a folder is missing (and ``create`` is off).
        PathError: a component below ``root`` is a symbolic link.
        StoreError: a component below ``root`` is not a folder.
    """
    anchor, parts = _split(path, root, folder=True)
    fd = _descend(_open_anchor(anchor, create), anchor, parts, create)
    try:
        yield fd
    finally:
        os.close(fd)


def _folder_of(path: Path, root: Path | None) -> Path | None:
    """The root to open ``path``'s folder from: its folder itself when ``root`` is None."""
    return path.parent if root is None else root


def make_folders(path: Path, *, root: Path | None = None) -> None:
    """Create ``path`` and the missing folders above it below ``root`` (``mkdir -p``)."""
    with open_folder(path, root=root, create=True):
        pass


def make_folder(path: Path, *, root: Path | None = None) -> None:
    """Create the one folder ``path`` (its parent must exist) and flush the parent.

    Raises:
        FileExistsError: something (a link included) is already there.
    """
    with open_folder(path.parent, root=_folder_of(path, root)) as parent:
        os.mkdir(path.name, 0o777, dir_fd=parent)
        os.fsync(parent)


def remove_folder(path: Path, *, root: Path | None = None) -> None:
    """Remove the empty folder ``path`` (a link there is never followed) and flush."""
    with open_folder(path.parent, root=_folder_of(path, root)) as parent:
        os.rmdir(path.name, dir_fd=parent)
        os.fsync(parent)


class Entry(NamedTuple):  # not a dataclass: `emit` imports this module, keep it light
    """One entry of a folder, as :func:`list_folder` saw it (links are not followed)."""

    name: str
    kind: str  # "file", "folder", "link" or "other"
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "link" if stat.S_ISLNK(mode) else "other"


def list_folder(path: Path, *, root: Path | None = None) -> list[Entry]:
    """The entries of the folder ``path``, sorted by name; empty when it does not exist.

    Raises:
        PathError, StoreError: as :func:`open_folder`.
    """
    try:
        with open_folder(path, root=root) as fd, os.scandir(fd) as it:
            entries = []
            for item in it:
                try:
                    st = item.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed while listing
                    continue
                entries.append(Entry(item.name, _kind(st.st_mode), st.st_size))
    except FileNotFoundError:
        return []
    return sorted(entries, key=lambda e: e.name)


def stat_nofollow(path: Path, *, root: Path | None = None) -> os.stat_result | None:
    """What is at ``path`` (``lstat``), reached without links; ``None`` if nothing is.

    A missing folder on the way, a file in a folder's place or a name too long to exist
    all mean nothing is there.

    Raises:
        PathError: a folder on the way is a symbolic link.
    """
    try:
        if root is not None and _split(path, root, folder=True)[1] == ():
            return root.stat()  # the root itself, trusted as configured
        with open_folder(path.parent, root=_folder_of(path, root)) as parent:
            return os.stat(path.name, dir_fd=parent, follow_symlinks=False)
    except StoreError:  # a file where a folder should be: nothing can be below it
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG):
            return None
        raise


def require_folder(path: Path, *, root: Path | None = None) -> bool:
    """Whether the folder ``path`` exists; anything else in its place is an error.

    For commands that list a folder hatloop owns (``.loop/sessions``...): a missing
    folder is simply empty, a file or a link there is a one-line error.

    Raises:
        PathError: ``path`` or a folder above it (below ``root``) is a link.
        StoreError: something that is not a folder is at ``path``.
    """
    st = stat_nofollow(path, root=root)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise link_error(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError("not a folder (something else is in its place)", file=path)
    return True


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (after a rename or a create) to disk."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:  # a platform without directory fds: nothing to flush
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- files ------------------------------------------------------------------------------


def _open_in(parent: int, name: str, flags: int, mode: int, shown: Path) -> int:
    try:
        fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_error(shown) from exc
        raise
    try:
        _check_opened(fd, flags, shown)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_opened(fd: int, flags: int, shown: Path) -> None:
    """Refuse what is not a regular file, and a file with other links opened to write."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StoreError("not a regular file", file=shown)
    if flags & _WRITE_MODES and st.st_nlink > 1:
        raise PathError(
            f"refusing to write {shown}: it has {st.st_nlink} hard links, so writing "
            "it in place would change another file too"
        )


def open_file(
    path: Path,
    flags: int,
    *,
    root: Path | None = None,
    mode: int = 0o644,
    create_folders: bool = False,
) -> int:
    """Open the regular file ``path`` with ``flags`` plus ``O_NOFOLLOW``; return the fd.

    The way to open a state file that is written in place (a journal, a lock, an
    events file): the folders are reached from ``root`` without links, a link at
    ``path`` is refused, and so is anything but a regular file with one link.

    Args:
        path: the file.
        flags: ``os.O_*`` flags (``O_RDONLY``, ``O_WRONLY | O_APPEND | O_CREAT``...).
        root: the trusted folder; ``None``: the folder holding ``path``.
        mode: permissions of a file this creates (the umask applies).
        create_folders: create the missing folders below ``root`` first.

    Raises:
        PathError: a link on the way or at ``path``; a file with other hard links
            opened for writing.
        StoreError: not a regular file, or a folder on the way is not one.
        OSError: as ``os.open`` (``FileNotFoundError``...).
    """
    with open_folder(path.parent, root=_folder_of(path, root), create=create_folders) as parent:
        return _open_in(parent, path.name, flags, mode, path)


def open_input(path: Path, *, buffering: int = -1) -> BinaryIO:
    """Open ``path``, a file a person named (a recording, a journal), to read.

    A link is followed (the file is theirs), but only a regular file is read: a FIFO is
    opened without waiting for a writer and refused, as a socket or a device is, so a
    command given one ends with an error instead of blocking for ever.

    Raises:
        IsADirectoryError: a folder. OSError: as ``os.open``, or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | _CLOEXEC | os.O_NONBLOCK)
    try:
        _check_input(fd, path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=buffering)


def _check_input(fd: int, path: Path) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a pipe, a socket or a device)")


def read_bytes(path: Path, *, root: Path | None = None) -> bytes:
    """The bytes of the regular file ``path``, opened without following links."""
    fd = open_file(path, os.O_RDONLY, root=root)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_text(path: Path, *, root: Path | None = None) -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`).

    Raises:
        FileNotFoundError: ``path`` (or a folder on the way) does not exist.
        StoreError: not UTF-8, not a regular file, or unreadable: names the file.
        PathError: a link on the way or at ``path``.
    """
    try:
        raw = read_bytes(path, root=root)
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(f"not UTF-8 text ({exc.reason})", file=path) from exc
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot read: {exc.strerror or exc}", file=path) from exc


def read_json(path: Path, *, root: Path | None = None, max_depth: int | None = None) -> Any:
    """Read a JSON state file; anything wrong is an error that names it.

    ``max_depth`` defaults to :data:`loop._json.MAX_DEPTH`.

    Raises:
        StoreError: missing, unreadable, not UTF-8, not JSON or nested deeper than
            ``max_depth``.
        PathError: a link on the way or at ``path``.
    """
    from loop import _json  # noqa: PLC0415 - orjson is slow to import; `emit` needs none of it

    try:
        text = read_text(path, root=root)
    except FileNotFoundError as exc:
        raise StoreError("cannot read: no such file", file=path) from exc
    try:
        return _json.loads(text, max_depth=max_depth or _json.MAX_DEPTH)
    except ValueError as exc:
        raise StoreError(f"invalid JSON: {_json.error_text(exc)}", file=path) from exc


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less: a signal, a pipe)."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def append_bytes(
    path: Path, data: bytes, *, root: Path | None = None, create_folders: bool = False
) -> None:
    """Append ``data`` with one ``write`` on an ``O_APPEND`` descriptor (created if missing).

    One write per call keeps concurrent appenders from interleaving within a line.
    """
    fd = open_file(
        path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, root=root, create_folders=create_folders
    )
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def _mode_of(parent: int, name: str) -> int:
    """The mode to give a replacement: the replaced file's, else the umask default."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return 0o666 & ~_UMASK
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~_UMASK


def _create_temp(parent: int, name: str, shown: Path) -> int:
    return _open_in(parent, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, shown)


def atomic_write(
    path: Path,
    data: bytes | str,
    *,
    root: Path | None = None,
    durable: bool = True,
    single_writer: bool = False,
) -> None:
    """Replace ``path`` with ``data`` atomically: readers see old or new, never half.

    The temp file is created (``O_EXCL``, no links) in ``path``'s folder, reached from
    ``root`` without links, and renamed over ``path``: a link at ``path`` is replaced,
    never written through.

    Args:
        path: the file to write; its folder must exist.
        data: the whole new content.
        root: the trusted folder; ``None``: the folder holding ``path``.
        durable: fsync the file and its folder (on by default).
        single_writer: the caller holds a lock that excludes every other writer of
            ``path``; the temp file then has one fixed name (``.<name>.tmp``), and one
            left by a killed writer is replaced, so killed writes never pile up.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open_folder(path.parent, root=_folder_of(path, root)) as parent:
        if single_writer:
            tmp = f".{path.name}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
        else:
            tmp = f".{path.name}.{os.urandom(4).hex()}.tmp"
        fd = _create_temp(parent, tmp, path.with_name(tmp))
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), _mode_of(parent, path.name))
                fh.write(raw)
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
            os.replace(tmp, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
        if durable:
            os.fsync(parent)


def write_new_file(path: Path, text: str, *, root: Path | None = None) -> None:
    """Create ``path`` with ``text`` atomically, never replacing an existing entry.

    The bytes go to ``.<name>.tmp`` first (fsynced), then a hard link publishes them
    under the final name; ``link`` fails with ``FileExistsError`` instead of clobbering
    (a link at ``path`` included). A stale temp file from a killed writer is replaced
    (callers that can race hold a lock).

    Raises:
        FileExistsError: ``path`` already exists.
        OSError: the write failed; no temp file is left behind.
    """
    tmp = f".{path.name}.tmp"
    with open_folder(path.parent, root=_folder_of(path, root)) as parent:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=parent)
        fd = _create_temp(parent, tmp, path.with_name(tmp))
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), 0o644 & ~_UMASK)
                fh.write(text.encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            os.link(tmp, path.name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
        os.fsync(parent)


def remove_file(
    path: Path, *, root: Path | None = None, missing_ok: bool = False, durable: bool = True
) -> None:
    """Remove the entry ``path`` (a link is removed, never its target) and flush."""
    try:
        with open_folder(path.parent, root=_folder_of(path, root)) as parent:
            os.unlink(path.name, dir_fd=parent)
            if durable:
                os.fsync(parent)
    except FileNotFoundError:
        if not missing_ok:
            raise


def rename(src: Path, dst: Path, *, root: Path | None = None, replace: bool = False) -> None:
    """Rename ``src`` to ``dst`` (both below ``root``, reached without links) and flush.

    Raises:
        FileExistsError: ``dst`` exists and ``replace`` is off.
    """
    with (
        open_folder(src.parent, root=_folder_of(src, root)) as sdir,
        open_folder(dst.parent, root=_folder_of(dst, root)) as ddir,
    ):
        if not replace:
            try:
                os.stat(dst.name, dir_fd=ddir, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                raise FileExistsError(errno.EEXIST, f"{dst.name} already exists", str(dst))
        os.rename(src.name, dst.name, src_dir_fd=sdir, dst_dir_fd=ddir)
        os.fsync(ddir)


def json_text(value: Any) -> str:
    """``value`` as the pretty JSON every state file holds (indent 2, trailing newline)."""
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def write_json(path: Path, value: Any, *, root: Path | None = None, durable: bool = True) -> None:
    """Atomically write ``value`` as pretty JSON (UTF-8, trailing newline)."""
    atomic_write(path, json_text(value), root=root, durable=durable)


# --- locks ------------------------------------------------------------------------------


@contextlib.contextmanager
def file_lock(path: Path, *, root: Path | None = None, timeout: float = 30.0) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``<path>.lock`` for a read-modify-write.

    The lock is an ``flock`` on a side file, so the data file itself can be replaced
    atomically while the lock is held. A dead process holds no lock. The lock file is
    opened like every state file: no links, a regular file only.

    Raises:
        StoreError: the lock could not be taken within ``timeout`` seconds, or the lock
            file cannot be opened or locked (the message names it and the cause).
        PathError: a link on the way or at the lock file.
    """
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = open_file(lock_path, os.O_RDONLY | os.O_CREAT, root=root)
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
