"""``loop mcp``: serve every hatloop tool over MCP (stdio) for an agent."""

from __future__ import annotations

import argparse

from loop.commands.common import run_async
from loop.commands.tools import add_context_options, context_from_args
from loop.exits import EXIT_INTERRUPTED, EXIT_OK

__all__ = ["register"]

DESCRIPTION = """\
Serve hatloop's tools (tasks, themes, experience, emit_event, get_session_status) over
the Model Context Protocol on stdin/stdout, for Claude Code, Gemini CLI, Codex or any
MCP client. stdout carries only the protocol; logs go to stderr.

Where the files live: flags, then $FILE_PATH / $LOOP_WORKSPACE / $LOOP_EXPERIENCES_DIR,
then loop.toml ([tasks] file, [themes] workspace, [experience] base_directory), then
defaults. Inside a loop iteration, $LOOP_EVENTS_FILE and $LOOP_SESSION_DIR (set by the
engine) give emit_event and get_session_status the running session, and every other
call is journaled as part of the iteration ($LOOP_SESSION_ID, $LOOP_ITERATION).

The server stops when the client closes stdin (exit 0), or on Ctrl-C / SIGINT or
SIGTERM (exit 130).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp``."""
    p = sub.add_parser(
        "mcp",
        help="serve every tool over MCP (stdio) for an agent",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_context_options(p)
    p.add_argument(
        "--log-format",
        choices=["auto", "console", "json"],
        default="auto",
        help="how logs are written to stderr",
    )
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from loop.tools.stdio import serve_stdio  # noqa: PLC0415 - the SDK is heavy

    ctx = context_from_args(args, channel="mcp")
    stopped_by = run_async(serve_stdio, ctx)
    return EXIT_OK if stopped_by is None else EXIT_INTERRUPTED
