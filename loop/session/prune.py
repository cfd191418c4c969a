"""``sessions prune``: remove old sessions, never a running one, each whole or not at all.

Which sessions go is decided in pure code (:func:`select`) over what is on disk (each
session's last journal write); :func:`remove` then takes each one's run lock, so a
session that is running, or is resumed meanwhile, stays. A session folder is first
renamed to a hidden name in the same folder (one atomic step: from then on no command
sees it), then deleted. A deletion cut short (a crash, a file that cannot be removed)
leaves only a hidden ``.pruning-*`` folder, which the next prune finishes.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loop._fs import fsync_dir
from loop.engine.session_dir import SessionLock, SessionPaths, is_locked
from loop.errors import SessionError, UsageError
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


def candidates(sessions_dir: Path) -> list[Candidate]:
    """Every session with the time of its last journal write."""
    out = []
    for sid in list_sessions(sessions_dir):
        try:
            out.append(Candidate(sid, (SessionPaths(sessions_dir, sid).journal).stat().st_mtime))
        except FileNotFoundError:  # removed meanwhile
            continue
    return out


def _finish_leftovers(sessions_dir: Path) -> None:
    """Delete the hidden folders of a prune that was cut short."""
    for entry in sessions_dir.iterdir():
        if entry.name.startswith(TRASH_PREFIX) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _remove_one(sessions_dir: Path, sid: str) -> None:
    """Remove one session, whole: lock it, rename it out of sight, delete it.

    Raises:
        SessionError: it is running (its lock is held). OSError: it could not be renamed.
    """
    paths = SessionPaths(sessions_dir, sid)
    lock = SessionLock(paths.lock)
    lock.acquire()  # a running session, or one resumed meanwhile, raises here
    try:
        trash = sessions_dir / f"{TRASH_PREFIX}{sid}-{secrets.token_hex(4)}"
        os.rename(paths.dir, trash)  # noqa: PTH104 - the atomic step, named as such
    finally:
        lock.release()
    fsync_dir(sessions_dir)
    shutil.rmtree(trash, ignore_errors=True)


def prune(
    sessions_dir: Path,
    *,
    now: float,
    older_than: float | None,
    keep: int | None,
    dry_run: bool = False,
) -> PruneResult:
    """Remove the sessions :func:`select` picks, except the running ones."""
    if older_than is None and keep is None:
        raise UsageError("sessions prune: give --older-than AGE, --keep N, or both")
    if not sessions_dir.is_dir():
        return PruneResult([], [], {}, 0, dry_run)
    if not dry_run:
        _finish_leftovers(sessions_dir)
    found = candidates(sessions_dir)
    chosen = select(found, now=now, older_than=older_than, keep=keep)
    removed: list[Candidate] = []
    running: list[str] = []
    failed: dict[str, str] = {}
    for cand in chosen:
        if dry_run:
            lock = SessionPaths(sessions_dir, cand.session_id).lock
            (running.append(cand.session_id) if is_locked(lock) else removed.append(cand))
            continue
        try:
            _remove_one(sessions_dir, cand.session_id)
        except SessionError:
            running.append(cand.session_id)
        except OSError as exc:
            failed[cand.session_id] = exc.strerror or str(exc)
        else:
            removed.append(cand)
    return PruneResult(removed, running, failed, len(found) - len(removed), dry_run)
