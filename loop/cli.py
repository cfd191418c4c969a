"""The command layer: parse, call, render, exit code. No logic of its own.

Commands are listed in one table with their one-line help; a command's module is
imported only when that command runs, so ``--help`` and each command start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO, cast

from loop import exits
from loop._version import __version__
from loop.errors import LoopError, UsageError

__all__ = ["COMMANDS", "build_parser", "main", "prog_name"]

# command → (``module`` calling ``module.register(sub)``, or ``module:function``; help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("loop.commands.run", "run the loop (or resume a session)"),
    "init": ("loop.commands.init", "write a loop.toml and hat files to start from"),
    "hats": ("loop.commands.hats", "list, validate or graph the hats"),
    "doctor": (
        "loop.commands.doctor",
        "check what a run needs: backends, programs, modules, API keys, folders",
    ),
    "emit": ("", "publish an event from inside an iteration (see emit --help)"),
    "status": ("loop.commands.sessions", "a session's state, derived from its files"),
    "sessions": ("loop.commands.sessions", "every session with its state"),
    "watch": ("loop.commands.watch", "follow a running session from its files until it ends"),
    "task": ("loop.commands.task", "hierarchical tasks: create, start, complete, progress"),
    "theme": (
        "loop.commands.theme",
        "theme lifecycle: preview, start, end, feedback, status",
    ),
    "experience": (
        "loop.commands.experience",
        "export, list and validate AI experiences",
    ),
    "export": (
        "loop.commands.experience:register_export",
        "export a loop session as an experience",
    ),
    "replay": ("loop.commands.replay", "replay recordings through the real engine and compare"),
    "show": ("loop.commands.inspect", "a session at a glance, from its journal or recording"),
    "events": ("loop.commands.inspect", "a session's events, filtered by topic, hat, iteration"),
    "report": ("loop.commands.report", "write a session as one self-contained HTML page"),
    "schema": ("loop.commands.replay", "print a file format's JSON Schema"),
    "mcp": ("loop.commands.mcp", "serve every tool over MCP (stdio) for an agent"),
    "completion": (
        "loop.commands.completion",
        "print a shell completion script: bash, zsh or fish",
    ),
}


def prog_name(argv0: str | None = None) -> str:
    """How the user called hatloop, for usage lines and hints: ``python -m loop`` when run
    as a module, else the script's name (``hatloop``)."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    if name in ("__main__.py", "-m", "-c", ""):
        return "python -m loop"
    return name.removesuffix(".exe")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2: never argparse's usage dump
        raise UsageError(f"{self.prog}: {message}")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, noting the innermost (sub)command's parser that parsed (argparse hands
        arguments it does not know up to the top), so its error names that command."""
        parsed, extra = super().parse_known_args(args, namespace)
        if not hasattr(parsed, _INNERMOST):
            setattr(parsed, _INNERMOST, self)
        return parsed, extra


_INNERMOST = "_innermost_parser"


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args``, where an unknown option is the innermost command's error:
    ``python -m loop show: unrecognized arguments: --bogus (see python -m loop show --help)``."""
    args, extra = parser.parse_known_args(argv)
    innermost = vars(args).pop(_INNERMOST, parser)
    if extra:
        innermost.error(f"unrecognized arguments: {' '.join(extra)} (see {innermost.prog} --help)")
    return args


def _register(sub: argparse._SubParsersAction[_Parser], entry: str) -> None:
    module_name, _, func = entry.partition(":")
    getattr(importlib.import_module(module_name), func or "register")(sub)


def build_parser(
    command: str | None = None, *, all_commands: bool = False
) -> argparse.ArgumentParser:
    """The CLI with ``command``'s module imported; every other command is a placeholder.

    The placeholders carry the one-line help, so ``python -m loop --help`` lists every
    command without importing any of them. ``all_commands``: every command's module is
    imported (what shell completion is generated from).
    """
    parser = _Parser(
        prog=prog_name(),
        description="hatloop: an asynchronous, event-driven agent loop runner.",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hatloop {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    if all_commands:
        for entry in dict.fromkeys(e for e, _ in COMMANDS.values() if e):
            _register(sub, entry)
    elif command in COMMANDS and COMMANDS[command][0]:
        _register(sub, COMMANDS[command][0])
    for name, (_, help_text) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


# The commands that are tools (agents call them): every error says its code, as a refused
# tool call does, and with --json its structured form goes to stdout.
TOOL_COMMANDS = ("task", "theme", "experience")


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _check_utf8(argv: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (they arrive as lone surrogates): every
    name, file and message hatloop writes is UTF-8."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UsageError(f"argument {arg[:60]!r} is not UTF-8 text") from exc


class _Unbroken:
    """A standard stream that outlives its reader (``loop replay ... | head``).

    When the reader has gone, a write fails with ``BrokenPipeError`` (Python ignores
    SIGPIPE). Stopping there would end the command early, before its verdict: a replay
    would write no JUnit file and exit 0, which passes a failing suite in a CI shell run
    with ``-o pipefail``. So the stream is pointed at ``/dev/null``, as the Python docs
    recommend for SIGPIPE, and the command goes on silently and exits with its own code.
    One rule for every command: a listing exits 0 as it would have, only later.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())
        finally:
            os.close(null)
        # what the stream still buffers goes to /dev/null too, not to a later write
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the stream's
        return getattr(self.stream, name)


@contextlib.contextmanager
def _outliving_readers() -> Iterator[None]:
    """stdout and stderr as :class:`_Unbroken` streams while a command runs; flushed
    before they are put back, so no late write finds the reader gone at exit."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (cast(TextIO, _Unbroken(s)) for s in saved)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved


def main(argv: list[str]) -> int:
    """Parse ``argv``, run the command, return its exit code (whether or not anyone
    still reads its output: see :class:`_Unbroken`)."""
    with _outliving_readers():
        return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        _check_utf8(argv)
        parser = build_parser(_command_of(argv))
        args = _parse(parser, argv)
        from loop import _log  # noqa: PLC0415 - only when a command runs

        fmt: _log.LogFormat = getattr(args, "log_format", None) or "auto"
        if getattr(args, "needs_logging", True) or "structlog" in sys.modules:
            import logging  # noqa: PLC0415 - _log imported it: no cost

            # -q: the log says only what went wrong (warnings, errors), as the output does
            level = logging.WARNING if getattr(args, "quiet", False) else logging.INFO
            _log.configure_logging(fmt, level=level, color=getattr(args, "color", None) or "auto")
        else:  # a tool command: structlog is imported if and when something logs
            _log.defer_logging(fmt)
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is None:  # a placeholder: cannot happen for a registered command
            raise UsageError(f"unknown command {args.command!r}")
        return handler(args)
    except LoopError as exc:
        if _command_of(argv) in TOOL_COMMANDS:  # a tool's caller reads codes (and --json)
            from loop.commands.tools import report_tool_error  # noqa: PLC0415 - on error

            return report_tool_error(exc, as_json="--json" in argv)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return exits.EXIT_INTERRUPTED
