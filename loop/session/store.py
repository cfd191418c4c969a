"""Sessions on disk: ``.loop/sessions/<id>/`` with the journal, a lock, iteration folders.

The status of a session is derived from these files alone, on every call (the way
seed 000 derives an export's status): nothing lives only in memory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from loop._fs import atomic_write, check_name
from loop.engine.routing import HatSpec
from loop.engine.state import LoopState, RouteContext, fold
from loop.errors import PathError, SessionError
from loop.session.journal import read_journal

__all__ = [
    "PendingSummary",
    "SessionLock",
    "SessionPaths",
    "SessionState",
    "SessionStatus",
    "latest_session",
    "list_sessions",
    "new_session_id",
    "route_context_from_start",
    "session_status",
    "validate_session_id",
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")  # with fullmatch: no final newline
LATEST = "latest"


def new_session_id() -> str:
    """A fresh, sortable session id: ``YYYYMMDD-HHMMSS-xxxxxx``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def validate_session_id(session_id: str) -> str:
    """Refuse ids that are not plain names of letters, digits, ``_ . -`` (max 128)."""
    check_name(session_id, "session id")
    if not _ID.fullmatch(session_id) or session_id == LATEST:
        raise PathError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits, "
            "'_', '.' or '-', starting with a letter or digit"
        )
    return session_id


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
        return self.dir / "journal.jsonl"

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


def latest_session(sessions_dir: Path) -> str | None:
    """The most recent session id, or ``None`` when there is none."""
    with contextlib.suppress(OSError):
        sid = (sessions_dir / LATEST).read_text().strip()
        if sid and (sessions_dir / sid / "journal.jsonl").exists():
            return sid
    ids = list_sessions(sessions_dir)
    return ids[-1] if ids else None


def list_sessions(sessions_dir: Path) -> list[str]:
    """Every session id, oldest first (by the journal's modification time)."""
    if not sessions_dir.is_dir():
        return []
    found = [p for p in sessions_dir.iterdir() if (p / "journal.jsonl").exists()]
    found.sort(key=lambda p: ((p / "journal.jsonl").stat().st_mtime, p.name))
    return [p.name for p in found]


def route_context_from_start(record: dict[str, Any]) -> RouteContext:
    """The routing context recorded in a ``session.start`` record."""
    hats = tuple(
        HatSpec(
            name=name,
            triggers=tuple(h.get("triggers", ())),
            publishes=tuple(h.get("publishes", ())),
            default_publishes=h.get("default_publishes"),
            max_activations=h.get("max_activations"),
        )
        for name, h in record.get("hats", {}).items()
    )
    return RouteContext(
        hats=hats,
        completion_event=record.get("completion_event", "LOOP_COMPLETE"),
        fallback=record.get("fallback_hat"),
        starting_event=record.get("starting_event"),
    )


class PendingSummary(BaseModel):
    """An event waiting for a hat."""

    topic: str
    hat: str | None = None
    source: str | None = None


SessionState = Literal["not_found", "running", "interrupted", "completed", "failed"]


class SessionStatus(BaseModel):
    """A session's state, derived from its journal and lock (``status``, ``sessions``,
    ``get_session_status`` all return this)."""

    session_id: str | None = Field(description="the session id; null when there is no session")
    status: SessionState
    iterations: int = 0
    last_hat: str | None = None
    in_flight: int | None = Field(default=None, description="an iteration started, not ended")
    pending: list[PendingSummary] = Field(default_factory=list)
    termination: str | None = Field(default=None, description="why the session ended")
    elapsed: float = 0.0
    failed_iterations: int = 0
    cost_usd: float = 0.0
    resumes: int = 0
    torn_journal: bool = False
    resume_command: str | None = None
    directory: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return self.model_dump(mode="json")


def session_status(sessions_dir: Path, session_id: str) -> SessionStatus:
    """Derive a session's status from its directory alone."""
    validate_session_id(session_id)
    paths = SessionPaths(sessions_dir, session_id)
    if not paths.journal.exists():
        return SessionStatus(session_id=session_id, status="not_found")
    contents = read_journal(paths.journal)
    start = next((r for r in contents.records if r.get("kind") == "session.start"), None)
    if start is None:
        state = LoopState()
    else:
        state = fold(contents.records, route_context_from_start(start))
    if is_locked(paths.lock):
        status = "running"
    elif state.termination is None or state.termination == "interrupted":
        status = "interrupted"
    elif state.termination == "completed":
        status = "completed"
    else:
        status = "failed"
    resume = None
    if status in ("interrupted", "failed"):
        resume = f"python -m loop run --resume {session_id}"
    return SessionStatus(
        session_id=session_id,
        status=status,
        iterations=state.iteration,
        last_hat=state.last_hat,
        in_flight=state.in_flight,
        pending=[
            PendingSummary(topic=p.event.topic, hat=p.hat, source=p.event.source)
            for p in state.pending
        ],
        termination=state.termination,
        elapsed=round(state.elapsed, 3),
        failed_iterations=state.failed_iterations,
        cost_usd=round(state.cost_usd, 6),
        resumes=state.resumes,
        torn_journal=contents.torn,
        resume_command=resume,
        directory=str(paths.dir),
    )
