"""``loop status [ID]`` and ``loop sessions``: state derived from disk only."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from loop.commands.common import SESSIONS_DIR_HELP, print_json, sessions_root
from loop.engine.progress import spent_text
from loop.session.store import latest_session, list_statuses, require_session, session_status

__all__ = ["SESSIONS_DIR_HELP", "register", "sessions_root"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``status`` and ``sessions``."""
    p = sub.add_parser("status", help="a session's state, derived from its files")
    p.add_argument(
        "session_id",
        nargs="?",
        metavar="ID",
        help="a session id or a unique prefix of one (default: the most recent)",
    )
    p.add_argument("--sessions-dir", metavar="DIR", help=SESSIONS_DIR_HELP)
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
    s = sub.add_parser("sessions", help="every session with its state")
    s.add_argument("--sessions-dir", metavar="DIR", help=SESSIONS_DIR_HELP)
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_sessions)


def _render(st: dict[str, Any]) -> str:
    lines = [f"session     {st['session_id']}", f"status      {st['status']}"]
    if st["status"] == "not_found":
        return "\n".join(lines)
    lines += [
        f"iterations  {st['iterations']}"
        + (f" (iteration {st['in_flight']} was in flight)" if st.get("in_flight") else ""),
        f"last hat    {st['last_hat'] or '-'}",
        "pending     " + (", ".join(f"{p['topic']}→{p['hat']}" for p in st["pending"]) or "-"),
        f"ended by    {st['termination'] or '-'}"
        + (f" (topic {st['unrouted_topic']})" if st.get("unrouted_topic") else ""),
        f"elapsed     {st['elapsed']:.2f}s",
    ]
    if spent := spent_text(st.get("cost_usd") or 0.0, st.get("tokens") or 0):
        lines.append(f"spent       {spent}")
    if st.get("waiting_until"):
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st["waiting_until"]))
        lines.append(f"waiting     until {until} ({st['waiting_for']})")
    if st.get("resume_command"):
        lines.append(f"resume with {st['resume_command']}")
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    if args.follow:
        from loop.commands.watch import watch  # noqa: PLC0415 - rich and anyio, on use

        return watch(args)
    root = sessions_root(args.sessions_dir)
    sid = require_session(root, args.session_id) if args.session_id else latest_session(root)
    if sid is None:
        st: dict[str, Any] = {"session_id": None, "status": "not_found"}
        if args.json:
            print_json(st)
        else:
            print(f"no session in {root}")
        return 0
    st = session_status(root, sid).to_dict()
    if args.json:
        print_json(st)
    else:
        print(_render(st))
    return 0


def _sessions(args: argparse.Namespace) -> int:
    root = sessions_root(args.sessions_dir)
    rows = [st.to_dict() for st in list_statuses(root)]
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


_HEADER = ("SESSION", "STATUS", "ITERATIONS", "ENDED BY", "LAST HAT")


def _table(rows: list[dict[str, Any]]) -> str:
    """One line per session under a header row, columns as wide as their longest cell."""
    cells = [_HEADER]
    for st in rows:
        if st["status"] == "unreadable":
            cells.append((st["session_id"], "unreadable", "-", "-", "-"))
            continue
        cells.append(
            (
                st["session_id"],
                st["status"],
                str(st["iterations"]),
                st["termination"] or "-",
                st["last_hat"] or "-",
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
