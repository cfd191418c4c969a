"""``python -m loop experience ...`` and ``python -m loop export SESSION``.

The tool subcommands are generated from the tools' input models
(:func:`loop.commands.tools.add_tool_group`); ``guide`` prints either guide as Markdown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from loop._names import check_path
from loop.commands.common import add_path_argument
from loop.commands.tools import (
    add_context_options,
    add_tool_group,
    context_from_args,
    report_tool_error,
)
from loop.errors import LoopError
from loop.exits import EXIT_FAILED, EXIT_OK
from loop.experience.tools import TOOLS

__all__ = ["COMMANDS", "register", "register_export"]

COMMANDS: dict[str, str] = {
    "status": "get_export_status",
    "init": "export_experience_init",
    "conversations": "export_experience_conversations",
    "thoughts": "export_experience_thoughts",
    "finalize": "export_experience_finalize",
    "list": "list_experiences",
    "validate": "validate_experience",
}
_POSITIONALS = {
    "status": ["session_id"],
    "conversations": ["session_id"],
    "thoughts": ["session_id"],
    "finalize": ["session_id"],
    "validate": ["directory_path"],
}


def _render_status(out: dict[str, Any]) -> str:
    nxt = out["next_batch_number"]
    files = ", ".join(out["created_files"]) or "none"
    tail = f"; next batch {nxt}" if nxt >= 1 else ""
    return (
        f"{out['session_id']}: {out['status']}{tail}\n  {out['directory_path']}\n  files: {files}"
    )


def _render_list(out: dict[str, Any]) -> str:
    lines = [
        f"{s['directory']}  ({s['file_count']} files)  {s['summary']}"
        for s in out["directory_summaries"]
    ] or ["no experiences found"]
    lines += [f"warning: {w}" for w in out["warnings"]]
    return "\n".join(lines)


def _render_validation(out: dict[str, Any]) -> str:
    head = "valid" if out["valid"] else "INVALID"
    lines = [f"{out['directory_path']}: {head}"]
    lines += [f"  error: {e}" for e in out["errors"]]
    lines += [f"  warning: {w}" for w in out["warnings"]]
    return "\n".join(lines)


def _validation_exit(out: dict[str, Any]) -> int:
    """``experience validate`` exits 1 when the experience is invalid (the report is
    printed all the same), 0 when it is valid, warnings or not."""
    return EXIT_OK if out["valid"] else EXIT_FAILED


def _render_init(out: dict[str, Any]) -> str:
    verb = "resumed" if out["resumed"] else "started"
    return (
        f"export {out['session_id']} {verb}\n  {out['directory_path']}\n"
        f"  expected files: {', '.join(out['expected_files'])}"
    )


def _render_conversations(out: dict[str, Any]) -> str:
    how = (
        " (identical batch already written)"
        if out["already_existed"]
        else " (replaced an earlier batch)"
        if out["overwritten"]
        else ""
    )
    return (
        f"wrote {out['processed_count']} conversation(s), {out['batch_file_size']} bytes{how}\n"
        f"  {out['file_path']}\n  next batch {out['next_batch_number']}"
    )


def _render_thoughts(out: dict[str, Any]) -> str:
    return ("replaced " if out["replaced"] else "wrote ") + str(out["file_path"])


def _render_finalize(out: dict[str, Any]) -> str:
    lines = [
        f"finalized {out['directory_path']}: {out['total_conversations']} conversations, "
        f"{out['total_files']} files, {out['total_size']} bytes"
    ]
    return "\n".join(lines + [f"warning: {w}" for w in out["warnings"]])


def register(subparsers: Any) -> None:
    """Add ``experience status|init|conversations|thoughts|finalize|list|validate|guide``."""
    group = add_tool_group(
        subparsers,
        "experience",
        help="export, list and validate AI experiences",
        tools=TOOLS,
        commands=COMMANDS,
        positionals=_POSITIONALS,
        renderers={
            "status": _render_status,
            "list": _render_list,
            "validate": _render_validation,
            "finalize": _render_finalize,
            "init": _render_init,
            "conversations": _render_conversations,
            "thoughts": _render_thoughts,
        },
        exit_codes={"validate": _validation_exit},
    )
    guide = group.subcommands.add_parser(
        "guide",
        help="print the export guide (source AI) or the import guide (main AI)",
        description="Print a guide for agents, as Markdown.",
    )
    guide.add_argument(
        "kind",
        nargs="?",
        choices=["export", "import"],
        default="export",
        help="export (default) or import",
    )
    guide.add_argument("--lang", choices=["en", "ja"], default="en", help="en (default) or ja")
    guide.add_argument("--json", action="store_true", help="print {success, guide_content}")
    guide.set_defaults(handler=_guide)


def _guide(args: argparse.Namespace) -> int:
    from loop.experience.guides import load_guide  # noqa: PLC0415 - start-up: on use

    text = load_guide(args.kind, args.lang)
    if args.json:
        print(json.dumps({"success": True, "guide_content": text}, ensure_ascii=False, indent=2))
    else:
        print(text, end="")
    return EXIT_OK


def register_export(subparsers: Any) -> None:
    """Add the top-level ``export SESSION``: a loop session becomes an experience."""
    p = subparsers.add_parser(
        "export",
        help="export a loop session as an experience",
        description="Export a loop session (a folder with journal.jsonl, or a session id "
        "under --sessions-dir) as experiences/experience_<session_id>/.",
    )
    p.add_argument(  # checked in the handler: a refusal is a tool error (--json too)
        "session",
        metavar="SESSION",
        help="a session folder, a session id (or a unique prefix of one), or latest",
    )
    add_path_argument(
        p,
        "--sessions-dir",
        metavar="DIR",
        help="where session ids are looked up (default: [loop] sessions_dir of the "
        "config, else .loop/sessions)",
    )
    p.add_argument("--session-id", metavar="ID", help="the experience id (default: the session's)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_context_options(p)
    p.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    # the journal's reader and records: only for this command, not the tool commands
    from loop.experience.session_export import export_session  # noqa: PLC0415 - start-up
    from loop.session.store import require_session  # noqa: PLC0415 - start-up

    try:
        ctx = context_from_args(args)
        candidate = Path(check_path(args.session, "SESSION"))
        if not candidate.is_dir():  # a session id, a unique prefix of one, or latest
            root = Path(args.sessions_dir) if args.sessions_dir else ctx.sessions_dir
            trusted = ctx.trusted_root(root)
            candidate = root / require_session(root, args.session, root=trusted)
        result = export_session(ctx, candidate, session_id=args.session_id)
    except LoopError as exc:
        return report_tool_error(exc, as_json=args.json)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        note = " (already exported)" if result.already_exported else ""
        print(
            f"exported {result.conversations} conversation(s) in {result.batches} batch(es), "
            f"{result.thoughts} thought(s){note}\n  {result.directory_path}"
        )
    return EXIT_OK
