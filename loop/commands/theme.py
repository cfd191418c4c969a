"""``python -m loop theme ...``: the theme tools as subcommands, plus ``heartbeat``.

``heartbeat`` calls the heartbeat tool (:data:`loop.themes.tools.HEARTBEAT`) through
:meth:`~loop.tools.base.Tool.run`, as every tool command does, so an agent's heartbeat
is a tool call of its iteration (journaled, recorded, replayed). It leaves the interrupt
items to the loop, which turns them into events.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loop.commands.tools import (
    add_context_options,
    add_tool_group,
    context_from_args,
    report_tool_error,
)
from loop.errors import LoopError
from loop.exits import EXIT_OK
from loop.themes.models import HeartbeatOutput
from loop.themes.tools import HEARTBEAT, TOOLS

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
    """Print the new heartbeat ID (a repair the call made goes to stderr)."""
    try:
        out = HEARTBEAT.run(context_from_args(args), {"interrupts": False})
    except LoopError as exc:
        return report_tool_error(exc, as_json=False)
    assert isinstance(out, HeartbeatOutput)
    for note in out.repaired:
        print(f"repaired: {note}", file=sys.stderr)
    print(out.heartbeatId)
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
