"""``python -m loop theme ...``: the theme tools as subcommands, plus ``heartbeat``."""

from __future__ import annotations

import argparse
from typing import Any

from loop.commands.tools import (
    add_context_options,
    add_tool_group,
    context_from_args,
    report_tool_error,
)
from loop.errors import LoopError, ToolError
from loop.exits import EXIT_OK
from loop.themes.heartbeat import write_heartbeat
from loop.themes.tools import TOOLS
from loop.themes.workspace import Workspace

__all__ = ["register"]

COMMANDS = {
    "preview": "preview_next_theme",
    "start": "start_theme",
    "end": "end_theme",
    "feedback": "check_and_process_item",
    "status": "get_theme_status",
}


def _with_content(out: dict[str, Any]) -> str:
    text = str(out["message"])
    if out.get("content") is not None:
        text += "\n---\n" + str(out["content"]).rstrip("\n") + "\n---"
    return text


def _message(out: dict[str, Any]) -> str:
    notes = [f"repaired: {r}" for r in out.get("repaired", [])]
    return "\n".join([*notes, str(out["message"])])


def _heartbeat(args: argparse.Namespace) -> int:
    try:
        ctx = context_from_args(args)
        print(write_heartbeat(Workspace(ctx.workspace, ctx.trusted_root(ctx.workspace))))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        err = ToolError("io_error", f"heartbeat: {where}{exc.strerror or exc}")
        return report_tool_error(err, as_json=False)
    except LoopError as exc:
        return report_tool_error(exc, as_json=False)
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``theme`` command group (preview, start, end, feedback, status, heartbeat)."""
    group = add_tool_group(
        subparsers,
        "theme",
        help="theme lifecycle: preview, start, end, feedback, status",
        tools=TOOLS,
        commands=COMMANDS,
        positionals={"start": ["target_filename"], "feedback": ["type"]},
        renderers={
            "preview": _with_content,
            "feedback": _with_content,
            "start": _message,
            "end": _message,
            "status": _message,
        },
    )
    hb = group.subcommands.add_parser(
        "heartbeat",
        help="write the next heartbeat ID (the loop does this at every iteration)",
        description="Write the next heartbeat ID to stats/current_heartbeat_id.txt and print "
        "it. Use it when you drive the theme tools outside the loop.",
    )
    add_context_options(hb)
    hb.set_defaults(handler=_heartbeat)
