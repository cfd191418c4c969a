"""Sessions on disk: ids, the list of sessions, and each one's status.

The status of a session is derived from its files alone (the journal and the lock, see
:mod:`loop.engine.session_dir`), on every call, the way an experience export derives
its status: nothing lives only in memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from loop._fs import link_error, list_folder, read_text, stat_nofollow
from loop._names import check_name
from loop._prefix import MIN_PREFIX, matches, shown
from loop.engine.decide import check_limits, limits_from
from loop.engine.journal import read_journal
from loop.engine.progress import resume_after, resume_command
from loop.engine.resume import journaled_limits
from loop.engine.session_dir import JOURNAL_NAME, LATEST, SessionPaths, is_locked
from loop.engine.state import LoopState, RouteContext, fold
from loop.errors import InputError, LoopError, PathError, SessionError
from loop.exits import EXIT_LIMIT, REASONS_FINAL, exit_code_for
from loop.records import SessionStart
from loop.session.runtime import ElapsedAsOf, status_elapsed

__all__ = [
    "MIN_PREFIX",
    "PendingSummary",
    "SessionState",
    "SessionStatus",
    "find_session",
    "latest_session",
    "list_sessions",
    "list_statuses",
    "new_session_id",
    "require_session",
    "session_status",
    "status_elapsed",
    "validate_session_id",
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")  # with fullmatch: no final newline


def new_session_id() -> str:
    """A fresh, sortable session id: ``YYYYMMDD-HHMMSS-xxxxxx``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def validate_session_id(session_id: str) -> str:
    """Refuse ids that are not plain names of letters, digits, ``_ . -`` (max 128), and
    ``latest``, the name of the pointer to the most recent session."""
    check_name(session_id, "session id")
    if session_id == LATEST:
        raise PathError(
            f"invalid session id {LATEST!r}: it names the most recent session; choose another id"
        )
    if not _ID.fullmatch(session_id):
        raise PathError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits, "
            "'_', '.' or '-', starting with a letter or digit"
        )
    return session_id


def _journal_stat(sessions_dir: Path, sid: str, root: Path | None) -> float | None:
    """The modification time of session ``sid``'s journal, if there is one: whatever is
    there (a link, a folder, a pipe in its place) makes the folder a session, which its
    readers then refuse naming it, rather than a session that seems not to exist."""
    st = stat_nofollow(sessions_dir / sid / JOURNAL_NAME, root=root or sessions_dir)
    return st.st_mtime if st is not None else None


def latest_session(sessions_dir: Path, *, root: Path | None = None) -> str | None:
    """The most recent session id, or ``None`` when there is none.

    ``latest`` is read without following a link and its content is checked exactly as
    a session id given on the command line (an absolute path or ``..`` is refused);
    when it names no session, the newest journal decides. ``root``: see
    :class:`~loop.engine.session_dir.SessionPaths`.

    Raises:
        PathError: ``latest`` is a link, or does not hold a valid session id, or the
            journal of the session it names is a link.
        StoreError: ``latest`` is not a regular file, or not UTF-8.
    """
    pointer = sessions_dir / LATEST
    try:
        sid = read_text(pointer, root=root or sessions_dir).strip()
    except FileNotFoundError:
        sid = ""
    if sid:
        try:
            validate_session_id(sid)
        except PathError as exc:
            raise PathError(f"{pointer}: {exc.message}") from None
        journal = sessions_dir / sid / JOURNAL_NAME
        st = stat_nofollow(journal, root=root or sessions_dir)
        if st is not None and stat.S_ISLNK(st.st_mode):  # named, and refused: never skipped
            raise link_error(journal)
        if st is not None and stat.S_ISREG(st.st_mode):
            return sid
    ids = list_sessions(sessions_dir, root=root)
    return ids[-1] if ids else None


def list_sessions(sessions_dir: Path, *, root: Path | None = None) -> list[str]:
    """Every session id, oldest first (by the journal's modification time).

    Only folders with a valid session id and a journal count (a hidden folder is no
    session: a prune cut short leaves one); links are never followed (from ``root``).
    """
    found: list[tuple[float, str]] = []
    for entry in list_folder(sessions_dir, root=root or sessions_dir):
        name = entry.name
        if entry.kind != "folder" or name.startswith(".") or not _ID.fullmatch(name):
            continue
        mtime = _journal_stat(sessions_dir, name, root)
        if mtime is not None:
            found.append((mtime, name))
    return [name for _, name in sorted(found)]


def find_session(sessions_dir: Path, given: str, *, root: Path | None = None) -> str | None:
    """The session ``given`` names: its id, a unique prefix of one, or ``latest`` (the
    most recent session, see :func:`latest_session`); ``None``: none.

    An exact id wins over a prefix. A prefix shorter than :data:`MIN_PREFIX` is not
    looked up.

    Raises:
        PathError: not a plain name. InputError: a prefix that several sessions share
            (the message lists them).
    """
    if given == LATEST:
        return latest_session(sessions_dir, root=root)
    validate_session_id(given)
    if _journal_stat(sessions_dir, given, root) is not None:
        return given
    ids = list_sessions(sessions_dir, root=root) if len(given) >= MIN_PREFIX else []
    found = matches(given, ids)
    if len(found) > 1:
        raise InputError(f"session id prefix {given!r} is ambiguous: {shown(found)}")
    return found[0] if found else None


def require_session(sessions_dir: Path, given: str, *, root: Path | None = None) -> str:
    """:func:`find_session`, or an :class:`InputError` (exit 2) for an unknown session."""
    sid = find_session(sessions_dir, given, root=root)
    if sid is None and given == LATEST:
        raise InputError(f"no session in {sessions_dir}")
    if sid is None:
        short = (
            f" (a prefix needs at least {MIN_PREFIX} characters)" if len(given) < MIN_PREFIX else ""
        )
        raise InputError(f"unknown session {given!r} in {sessions_dir}{short}")
    return sid


class PendingSummary(BaseModel):
    """An event waiting for a hat."""

    topic: str
    hat: str | None = None
    source: str | None = None
    taken_by: int | None = Field(
        default=None,
        description="the iteration in flight that runs on it (a running session's); it "
        "stays pending until that iteration commits",
    )


SessionState = Literal[
    "not_found",
    "running",
    "interrupted",
    "completed",
    "cancelled",
    "limit_reached",
    "failed",
    "unreadable",
]


class SessionStatus(BaseModel):
    """A session's state, derived from its journal and lock (``status``, ``sessions``,
    ``get_session_status`` all return this)."""

    session_id: str | None = Field(description="the session id; null when there is no session")
    status: SessionState
    started_at: float | None = Field(
        default=None, description="when the session started (its session.start, epoch s)"
    )
    iterations: int = 0
    last_hat: str | None = None
    in_flight: int | None = Field(
        default=None, description="the first iteration started and not ended (see in_flight_all)"
    )
    in_flight_all: list[int] = Field(
        default_factory=list,
        description="every iteration started and not ended, oldest first (parallel hats: "
        "several at once)",
    )
    pending: list[PendingSummary] = Field(default_factory=list)
    termination: str | None = Field(default=None, description="why the session ended")
    unrouted_topic: str | None = Field(
        default=None, description="the topic no hat takes (a session ended by unrouted_event)"
    )
    elapsed: float = 0.0
    elapsed_as_of: ElapsedAsOf | None = Field(
        default=None,
        description="end: the session.end's figure; now: a running session's runtime so "
        "far; last_commit: a run that stopped without an end record",
    )
    failed_iterations: int = 0
    cost_usd: float = 0.0
    tokens: int = Field(default=0, description="input plus output tokens, where reported")
    waiting_until: float | None = Field(
        default=None, description="a rate or usage limit is waited out until then (epoch s)"
    )
    waiting_for: str | None = Field(default=None, description="the limit being waited out")
    resumes: int = 0
    torn_journal: bool = False
    resume_command: str | None = None
    resume_after: str | None = Field(
        default=None,
        description="what loop.toml needs first, for resume_command to go on (a stale loop, "
        "an unrouted topic, an exhausted hat's event no hat takes): as it is, the resume "
        "stops again at once",
    )
    directory: str | None = None
    error: str | None = Field(default=None, description="why an unreadable session is")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return self.model_dump(mode="json")

    @classmethod
    def no_session(cls) -> SessionStatus:
        """The report when there is no session at all: ``not_found`` with every field,
        the one answer of both ``status --json`` and ``get_session_status``."""
        return cls(session_id=None, status="not_found")


def _absolute(folder: Path) -> str:
    # Lexical, as every path hatloop reaches: a relative sessions folder (the command's
    # default) and the tools' absolute one report the same directory.
    return os.path.abspath(folder)  # noqa: PTH100


def session_status(
    sessions_dir: Path, session_id: str, *, root: Path | None = None
) -> SessionStatus:
    """Derive a session's status from its directory alone (no link followed from
    ``root``: a link at the journal is an error naming it, never read)."""
    validate_session_id(session_id)
    paths = SessionPaths(sessions_dir, session_id, root=root)
    if stat_nofollow(paths.journal, root=paths.trusted) is None:
        return SessionStatus(session_id=session_id, status="not_found")
    contents = read_journal(paths.journal, root=paths.trusted)
    start = next((r for r in contents.records if isinstance(r, SessionStart)), None)
    state = LoopState() if start is None else fold(contents.records, RouteContext.from_start(start))
    status = _state_of(state.termination, locked=is_locked(paths.lock, root=paths.trusted))
    if start is None and status != "running":  # a run killed before its first record
        raise InputError(
            f"{paths.journal}: holds no session start (a run killed before its first "
            "record): there is nothing to resume; start a new run"
        )
    resume = after = None
    if status != "running" and status not in REASONS_FINAL:
        limits = None
        if start is not None:
            with contextlib.suppress(SessionError):  # no hint beyond a plain resume
                limits = limits_from(journaled_limits(state, start))
        reason = state.termination or "interrupted"
        if state.termination is None and limits is not None:  # its end lost (a torn line)
            reached = check_limits(state, limits, state.elapsed)
            if (
                reached is not None and reached not in REASONS_FINAL
            ):  # a limit: the resume raises it
                reason = reached  # (a completion still needs the resume to journal it)
        resume = resume_command(session_id, reason, state, limits)
        after = resume_after(reason, state) if resume is not None else None
    taken = (  # what a stopped session had in flight runs again: it is only pending
        {seq: n for n, flight in state.in_flight.items() for seq in flight.triggers}
        if status == "running"
        else {}
    )
    waiting = state.waiting
    elapsed, as_of = status_elapsed(contents.records, running=status == "running", now=time.time())
    return SessionStatus(
        session_id=session_id,
        status=status,
        started_at=start.ts if start is not None else None,
        iterations=state.iteration,
        last_hat=state.last_hat,
        in_flight=min(state.in_flight, default=None),
        in_flight_all=sorted(state.in_flight),
        pending=[
            PendingSummary(
                topic=p.event.topic, hat=p.hat, source=p.event.source, taken_by=taken.get(p.seq)
            )
            for p in state.pending
        ],
        termination=state.termination,
        unrouted_topic=state.unrouted if state.termination == "unrouted_event" else None,
        elapsed=round(elapsed, 6),  # as recorded: show and status format the same figure
        elapsed_as_of=as_of,
        failed_iterations=state.failed_iterations,
        cost_usd=round(state.cost_usd, 6),
        tokens=state.tokens,
        waiting_until=waiting.until if waiting is not None else None,
        waiting_for=f"{waiting.limit}: {waiting.message}" if waiting is not None else None,
        resumes=state.resumes,
        torn_journal=contents.torn,
        resume_command=resume,
        resume_after=after,
        directory=_absolute(paths.dir),
    )


def _state_of(termination: str | None, *, locked: bool) -> SessionState:
    """A session's state from how it ended: the exit code's class of its reason."""
    if locked:
        return "running"
    if termination is None or termination == "interrupted":
        return "interrupted"
    if termination == "completed":
        return "completed"
    if termination == "cancelled":
        return "cancelled"
    return "limit_reached" if exit_code_for(termination) == EXIT_LIMIT else "failed"


def list_statuses(sessions_dir: Path, *, root: Path | None = None) -> list[SessionStatus]:
    """Every session's status, oldest first; one whose journal cannot be read is listed
    as ``unreadable`` with the reason, and the others still are."""
    out: list[SessionStatus] = []
    for sid in list_sessions(sessions_dir, root=root):
        try:
            out.append(session_status(sessions_dir, sid, root=root))
        except (LoopError, OSError) as exc:
            reason = exc.message if isinstance(exc, LoopError) else str(exc)
            out.append(
                SessionStatus(
                    session_id=sid,
                    status="unreadable",
                    error=reason,
                    directory=_absolute(sessions_dir / sid),
                )
            )
    return out
