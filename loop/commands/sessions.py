"""``loop status [ID]`` and ``loop sessions``: state derived from disk only."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from loop._text import iterations_text, iterations_were
from loop.commands.common import (
    add_sessions_options,
    print_json,
    sessions_root,
)
from loop.engine.progress import spent_text
from loop.errors import UsageError
from loop.exits import EXIT_USAGE
from loop.session.store import (
    SessionStatus,
    latest_session,
    list_statuses,
    require_session,
    session_status,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``status`` and ``sessions``."""
    p = sub.add_parser("status", help="a session's state, derived from its files")
    p.add_argument(
        "session_id",
        nargs="?",
        metavar="ID",
        help="a session id or a unique prefix of one (default: the most recent)",
    )
    add_sessions_options(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="follow the session until it ends, as `watch` does (exit: the session's code)",
    )
    p.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="with --follow: colour, and the live status line on a terminal",
    )
    p.set_defaults(handler=_status)
    s = sub.add_parser(
        "sessions",
        help="every session with its state",
        description="Every session with its state; `sessions prune` removes old ones.",
    )
    add_sessions_options(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_sessions)
    s_sub = s.add_subparsers(dest="sessions_command", metavar="COMMAND")
    pr = s_sub.add_parser(
        "prune",
        help="remove old sessions (never a running one)",
        description="Remove old sessions, each folder whole or not at all. A running "
        "session (its lock is held) is never removed. Give --older-than, --keep, or both.",
    )
    pr.add_argument(
        "--older-than",
        metavar="AGE",
        help="remove sessions last written more than AGE ago: 90s, 30m, 12h, 7d, 2w",
    )
    pr.add_argument(
        "--keep", type=int, metavar="N", help="keep the N most recent sessions whatever their age"
    )
    pr.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    add_sessions_options(pr)
    pr.add_argument("--json", action="store_true")
    pr.set_defaults(handler=_prune)


_ELAPSED_AS_OF = {
    "now": " so far",
    "last_commit": " at the last commit (the run stopped without an end record)",
}


def _in_flight_text(st: dict[str, Any]) -> str:
    """`` (iterations 3 and 4 in flight)`` while the session runs; ``was``/``were`` once
    it stopped (killed: those run again on a resume)."""
    numbers = st.get("in_flight_all") or ([st["in_flight"]] if st.get("in_flight") else [])
    if not numbers:
        return ""
    if st["status"] == "running":
        return f" ({iterations_text(numbers)} in flight)"
    return f" ({iterations_were(numbers)} in flight)"


def _pending_text(p: dict[str, Any]) -> str:
    """``task.start→builder``, and `` (#3 runs on it)`` while an iteration does."""
    taken = f" (#{p['taken_by']} runs on it)" if p.get("taken_by") is not None else ""
    return f"{p['topic']}→{p['hat']}{taken}"


def _render(st: dict[str, Any]) -> str:
    lines = [f"session     {st['session_id']}", f"status      {st['status']}"]
    if st["status"] == "not_found":
        return "\n".join(lines)
    if st.get("started_at") is not None:
        lines.append(f"started     {_local(st['started_at'], seconds=True)}")
    lines += [
        f"iterations  {st['iterations']}" + _in_flight_text(st),
        f"last hat    {st['last_hat'] or '-'}",
        "pending     " + (", ".join(_pending_text(p) for p in st["pending"]) or "-"),
        f"ended by    {st['termination'] or '-'}"
        + (f" (topic {st['unrouted_topic']})" if st.get("unrouted_topic") else ""),
        f"elapsed     {st['elapsed']:.2f}s" + _ELAPSED_AS_OF.get(st.get("elapsed_as_of") or "", ""),
    ]
    if spent := spent_text(st.get("cost_usd") or 0.0, st.get("tokens") or 0):
        lines.append(f"spent       {spent}")
    if st.get("waiting_until"):
        until = _local(st["waiting_until"], seconds=True)
        lines.append(f"waiting     until {until} ({st['waiting_for']})")
    if st.get("resume_command"):
        after = f" (once {st['resume_after']})" if st.get("resume_after") else ""
        lines.append(f"resume with {st['resume_command']}{after}")
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    if args.follow:
        from loop.commands.watch import watch  # noqa: PLC0415 - rich and anyio, on use

        return watch(args)
    root, trusted = sessions_root(args)
    if args.session_id:
        sid: str | None = require_session(root, args.session_id, root=trusted)
    else:
        sid = latest_session(root, root=trusted)
    if sid is None:
        if args.json:  # the same report get_session_status gives
            print_json(SessionStatus.no_session().to_dict())
        else:
            print(f"no session in {root}")
        return 0
    st = session_status(root, sid, root=trusted).to_dict()
    if args.json:
        print_json(st)
    else:
        print(_render(st))
    return 0


def _sessions(args: argparse.Namespace) -> int:
    root, trusted = sessions_root(args)
    rows = [st.to_dict() for st in list_statuses(root, root=trusted)]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no session in {root}")
        return 0
    print(_table(rows))
    for st in rows:  # the reason on stderr: the table stays one line per session
        if st["status"] == "unreadable":
            print(
                f"warning: session {st['session_id']} is unreadable: {st['error']}", file=sys.stderr
            )
    return 0


def _local(ts: float, *, seconds: bool = False) -> str:
    """An epoch time in this machine's time zone, as a person reads it."""
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.localtime(ts))


_HEADER = ("SESSION", "STATUS", "ITERATIONS", "ENDED BY", "LAST HAT", "STARTED")


def _table(rows: list[dict[str, Any]]) -> str:
    """One line per session under a header row, columns as wide as their longest cell."""
    cells = [_HEADER]
    for st in rows:
        if st["status"] == "unreadable":
            cells.append((st["session_id"], "unreadable", "-", "-", "-", "-"))
            continue
        cells.append(
            (
                st["session_id"],
                st["status"],
                str(st["iterations"]),
                st["termination"] or "-",
                st["last_hat"] or "-",
                _local(st["started_at"]) if st.get("started_at") is not None else "-",
            )
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(_HEADER) - 1)]
    return "\n".join(
        "  ".join(
            (c.rjust(widths[i]) if i == 2 else c.ljust(widths[i])) for i, c in enumerate(r[:-1])
        )
        + "  "
        + r[-1]
        for r in cells
    )


def _prune(args: argparse.Namespace) -> int:
    from loop.session.prune import parse_age, prune  # noqa: PLC0415 - on use

    if args.keep is not None and args.keep < 0:
        raise UsageError("--keep N: N must be 0 or more")
    older = parse_age(args.older_than) if args.older_than is not None else None
    root, trusted = sessions_root(args)
    now = time.time()
    result = prune(
        root, now=now, older_than=older, keep=args.keep, dry_run=args.dry_run, root=trusted
    )
    if args.json:
        print_json(
            {
                "dry_run": result.dry_run,
                "removed": [c.session_id for c in result.removed],
                "running": result.running,
                "failed": result.failed,
                "kept": result.kept,
            }
        )
    else:
        verb = "would remove" if result.dry_run else "removed"
        for c in result.removed:
            print(f"{verb} {c.session_id}  (last written {_age(now - c.mtime)} ago)")
        for sid in result.running:
            print(f"kept {sid}: it is running")
        for sid, why in result.failed.items():
            print(f"error: {sid}: not removed: {why}", file=sys.stderr)
        print(
            f"{verb} {len(result.removed)} session(s), kept {result.kept}"
            + (" (dry run: nothing removed)" if result.dry_run else "")
        )
    return EXIT_USAGE if result.failed else 0


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
