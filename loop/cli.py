"""The command layer: parse, call, render, exit code. No logic of its own."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from loop import __version__
from loop._log import configure_logging
from loop.errors import EXIT_OK, EXIT_USAGE, LoopError, UsageError

__all__ = ["build_parser", "main"]

# Modules that add their own command groups: ``module`` calls ``module.register(sub)``,
# ``module:function`` calls that function instead.
COMMAND_MODULES: list[str] = [
    "loop.commands.run",
    "loop.commands.init",
    "loop.commands.hats",
    "loop.commands.sessions",
    "loop.commands.mcp",
    "loop.tasks.cli",
    "loop.themes.cli",
    "loop.experience.cli",
    "loop.experience.cli:register_export",
    "loop.commands.replay",
]

EXIT_CODES_HELP = """exit codes:
  0    completed
  1    failed (repeated failed iterations, unrouted event, backend unavailable)
  2    bad usage or input (arguments, config, files, tool errors)
  3    limit reached (max iterations, max runtime, stale loop, nothing left to do)
  4    replay diverged from its recording
  130  interrupted (SIGINT or SIGTERM)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2: never argparse's usage dump
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The whole CLI."""
    parser = _Parser(
        prog="python -m loop",
        description="hatloop: an asynchronous, event-driven agent loop runner.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hatloop {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    sub.add_parser("emit", help="publish an event from inside an iteration (see emit --help)")
    for entry in COMMAND_MODULES:
        module_name, _, func = entry.partition(":")
        getattr(importlib.import_module(module_name), func or "register")(sub)
    return parser


def main(argv: list[str]) -> int:
    """Parse ``argv``, run the command, return its exit code."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(getattr(args, "log_format", None) or "auto")
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except LoopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def run_async(func: Callable[..., Any], *args: Any) -> Any:
    """Run an async function on asyncio (aiofiles ties hatloop to it)."""
    return anyio.run(func, *args, backend="asyncio")


def print_json(value: Any) -> None:
    """Print a JSON result on stdout."""
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def existing_file(raw: str) -> Path:
    """An argparse type: a path that must exist."""
    path = Path(raw)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"file not found: {raw}")
    return path


__all__ += ["EXIT_OK", "EXIT_USAGE", "existing_file", "print_json", "run_async"]
