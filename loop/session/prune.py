"""``sessions prune``: remove old sessions, never a running one, each whole or not at all.

Which sessions go is decided in pure code (:func:`select`) over what is on disk (each
session's last journal write); :func:`remove` then takes each one's run lock, so a
session that is running, or is resumed meanwhile, stays. A session folder is first
renamed to a hidden name in the same folder (one atomic step: from then on no command
sees it), then deleted. A deletion cut short (a crash, a file that cannot be removed)
leaves only a hidden ``.pruning-*`` folder, which the next prune finishes.

Every file is reached from the trusted root without following links, as everywhere
else: a session folder swapped for a link (to a folder outside) is never locked,
entered or deleted through; the link itself is what gets renamed and removed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loop._fs import list_folder, open_folder, rename, require_folder, stat_nofollow
from loop.engine.session_dir import SessionLock, SessionPaths, is_locked
from loop.errors import PathError, SessionError, StoreError, UsageError
from loop.session.store import list_sessions

__all__ = ["TRASH_PREFIX", "Candidate", "PruneResult", "parse_age", "prune", "select"]

TRASH_PREFIX = ".pruning-"
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w`` as seconds.

    Raises:
        UsageError: anything else.
    """
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"--older-than {text!r}: give a number and a unit: s, m, h, d or w (e.g. 7d)"
        )
    return float(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A session on disk: its id and the time of its last journal write."""

    session_id: str
    mtime: float


def select(
    sessions: Sequence[Candidate], *, now: float, older_than: float | None, keep: int | None
) -> list[Candidate]:
    """The sessions to remove, oldest first: not among the ``keep`` most recent, and (with
    ``older_than``) last written more than that many seconds before ``now``."""
    ordered = sorted(sessions, key=lambda c: (c.mtime, c.session_id))
    spared = len(ordered) if keep is None else max(0, len(ordered) - keep)
    old = ordered[:spared]
    if older_than is not None:
        old = [c for c in old if now - c.mtime > older_than]
    return old


@dataclass
class PruneResult:
    """What a prune did (or, dry, would do)."""

    removed: list[Candidate]
    running: list[str]
    failed: dict[str, str]
    kept: int
    dry_run: bool


def candidates(sessions_dir: Path, *, root: Path | None = None) -> list[Candidate]:
    """Every session with the time of its last journal write (``root``: as for
    :class:`~loop.engine.session_dir.SessionPaths`)."""
    out = []
    for sid in list_sessions(sessions_dir, root=root):
        st = stat_nofollow(SessionPaths(sessions_dir, sid).journal, root=root or sessions_dir)
        if st is not None and stat.S_ISREG(st.st_mode):  # else removed meanwhile
            out.append(Candidate(sid, st.st_mtime))
    return out


def _delete(sessions_dir: Path, name: str, root: Path) -> None:
    """Delete the entry ``name`` of the sessions folder: a folder with everything in it,
    a link (never its target) or a file. Best effort: what stays, a next prune finishes."""
    try:
        with open_folder(sessions_dir, root=root) as fd:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, ignore_errors=True, dir_fd=fd)  # never follows links
            else:
                os.unlink(name, dir_fd=fd)
    except OSError:
        return


def _finish_leftovers(sessions_dir: Path, root: Path) -> None:
    """Delete the hidden entries of a prune that was cut short."""
    for entry in list_folder(sessions_dir, root=root):
        if entry.name.startswith(TRASH_PREFIX):
            _delete(sessions_dir, entry.name, root)


def _remove_one(sessions_dir: Path, sid: str, root: Path) -> None:
    """Remove one session, whole: lock it, rename it out of sight, delete it.

    Raises:
        SessionError: it is running (its lock is held). PathError: its folder is a link
        now (it was a folder when listed). OSError: it could not be renamed.
    """
    paths = SessionPaths(sessions_dir, sid, root=root)
    lock = SessionLock(paths.lock, root=root)
    lock.acquire()  # a running session, or one resumed meanwhile, raises here
    trash = sessions_dir / f"{TRASH_PREFIX}{sid}-{secrets.token_hex(4)}"
    try:
        rename(paths.dir, trash, root=root)  # the atomic step: from now on nobody sees it
    finally:
        lock.release()
    _delete(sessions_dir, trash.name, root)


def prune(
    sessions_dir: Path,
    *,
    now: float,
    older_than: float | None,
    keep: int | None,
    dry_run: bool = False,
    root: Path | None = None,
) -> PruneResult:
    """Remove the sessions :func:`select` picks, except the running ones.

    ``root``: the folder every file is reached from without following links (default:
    ``sessions_dir`` itself).

    Raises:
        UsageError: neither ``older_than`` nor ``keep``. PathError, StoreError: the
        sessions folder is a link or not a folder.
    """
    if older_than is None and keep is None:
        raise UsageError("sessions prune: give --older-than AGE, --keep N, or both")
    trusted = root or sessions_dir
    if not require_folder(sessions_dir, root=trusted):
        return PruneResult([], [], {}, 0, dry_run)
    if not dry_run:
        _finish_leftovers(sessions_dir, trusted)
    found = candidates(sessions_dir, root=trusted)
    chosen = select(found, now=now, older_than=older_than, keep=keep)
    removed: list[Candidate] = []
    running: list[str] = []
    failed: dict[str, str] = {}
    for cand in chosen:
        if dry_run:
            lock = SessionPaths(sessions_dir, cand.session_id).lock
            locked = is_locked(lock, root=trusted)
            (running.append(cand.session_id) if locked else removed.append(cand))
            continue
        try:
            _remove_one(sessions_dir, cand.session_id, trusted)
        except SessionError:
            running.append(cand.session_id)
        except (PathError, StoreError) as exc:  # swapped for a link or a file meanwhile
            failed[cand.session_id] = str(exc)
        except OSError as exc:
            failed[cand.session_id] = exc.strerror or str(exc)
        else:
            removed.append(cand)
    return PruneResult(removed, running, failed, len(found) - len(removed), dry_run)
