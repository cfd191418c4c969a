"""The CLI adapter: every tool becomes a subcommand, generated from its input model.

``python -m loop task create --title "Write docs" --parent-id ID`` calls ``createTask``
with ``{"title": ..., "parent_id": ...}``. Field names become ``--kebab-case`` options
(camelCase too: ``themeName`` → ``--theme-name``); strings, numbers and choices are
typed options, booleans are ``--flag/--no-flag``, anything structured takes JSON.
``--input JSON`` (or ``@file``, or ``-`` for stdin) gives the whole input at once; a field
given there and as an option or an argument too (or as both of those) must have the same
value each time, else the call is a usage error naming the field.
``--json`` prints the result as JSON; otherwise a renderer prints it for a person.
An error prints ``error: <code>: <message>`` on stderr and exits with the error's exit
code, 2 for a refused call (with ``--json`` the structured error also goes to stdout).
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic.fields import FieldInfo

from loop import _json
from loop.commands.common import add_config_argument, add_path_argument
from loop.config.project import project_root
from loop.config.settings import tool_settings_from_project
from loop.errors import LoopError, UsageError
from loop.exits import EXIT_OK
from loop.locations import DEFAULT_EXPERIENCES_DIR, DEFAULT_TASKS_FILE, DEFAULT_WORKSPACE
from loop.tools.base import Tool, ToolContext
from loop.tools.calls import Channel

__all__ = [
    "ExitCode",
    "Renderer",
    "ToolGroup",
    "add_context_options",
    "add_tool_group",
    "cli_wording",
    "context_from_args",
    "report_tool_error",
]

# A tool's name → its command line (``completeTask`` → ``hatloop task complete``), for the
# groups this process registered: messages name tools the MCP way, a person types commands.
_COMMAND_LINES: dict[str, str] = {}
_BOOL_ARG = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(true|false)\b")

Renderer = Callable[[dict[str, Any]], str]
# A successful call's exit code, from its output (``experience validate``: 1 when invalid).
ExitCode = Callable[[dict[str, Any]], int]


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).replace("_", "-").lower()


def _unwrap_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _add_field_option(parser: argparse.ArgumentParser, name: str, info: FieldInfo) -> None:
    ann = _unwrap_optional(info.annotation)
    flag = "--" + _kebab(name)
    help_text = (info.description or "").replace("%", "%%") or None
    kwargs: dict[str, Any] = {"dest": f"field__{name}", "default": None, "help": help_text}
    if ann is bool:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        return
    if ann in (str, int, float):
        parser.add_argument(
            flag, type=ann, metavar=_kebab(name).upper().replace("-", "_"), **kwargs
        )
        return
    if typing.get_origin(ann) is Literal:
        parser.add_argument(flag, choices=[str(c) for c in typing.get_args(ann)], **kwargs)
        return
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        parser.add_argument(flag, choices=[str(m.value) for m in ann], **kwargs)
        return
    parser.add_argument(flag, type=_json_arg, metavar="JSON", **kwargs)


def _json_arg(raw: str) -> Any:
    try:
        return _json.loads(raw, max_depth=_json.INPUT_DEPTH)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {_json.error_text(exc)}") from exc


def add_context_options(parser: argparse.ArgumentParser) -> None:
    """The options that say where tool files live (they override env and config), and
    ``--config``: the ``loop.toml`` whose settings give the defaults."""
    group = parser.add_argument_group("where the files live")
    add_path_argument(
        group,
        "--tasks-file",
        metavar="PATH",
        help="tasks JSON file (default: $FILE_PATH, [tasks] file, .loop/tasks.json)",
    )
    add_path_argument(
        group,
        "--workspace",
        metavar="DIR",
        help="theme workspace (default: $LOOP_WORKSPACE, [themes] workspace, .loop/works)",
    )
    add_path_argument(
        group,
        "--experiences-dir",
        metavar="DIR",
        help="experiences base folder (default: $LOOP_EXPERIENCES_DIR, "
        "[experience] base_directory, .loop/experiences)",
    )
    add_config_argument(group)


def context_from_args(args: argparse.Namespace, *, channel: Channel = "cli") -> ToolContext:
    """Build the tool context: flags, then environment, then ``loop.toml``, then defaults.

    Inside a loop iteration the calls made with it are journaled as part of the
    iteration, as made over ``channel`` (see :meth:`ToolContext.from_env`).
    """
    config = getattr(args, "config", None)
    project = tool_settings_from_project(Path.cwd(), config)
    return ToolContext.from_env(
        root=Path.cwd() if config else project_root(Path.cwd()),
        tasks_file=getattr(args, "tasks_file", None),
        workspace=getattr(args, "workspace", None),
        experiences_base=getattr(args, "experiences_dir", None),
        sessions_dir=project.get("sessions_dir"),
        default_tasks_file=project.get("tasks_file", DEFAULT_TASKS_FILE),
        default_workspace=project.get("workspace", DEFAULT_WORKSPACE),
        default_experiences_base=project.get("experiences_base", DEFAULT_EXPERIENCES_DIR),
        channel=channel,
    )


def cli_wording(text: str) -> str:
    """A tool's message worded for the command line: ``pass cascade=true`` becomes
    ``pass --cascade``, ``call completeTask`` becomes ``call hatloop task complete``
    (over MCP, the same message keeps the tool's own wording)."""
    text = _BOOL_ARG.sub(
        lambda m: f"--{'' if m.group(2) == 'true' else 'no-'}{_kebab(m.group(1))}", text
    )
    for tool_name, command_line in _COMMAND_LINES.items():
        # a name as a word of the sentence, not inside a file name (start_theme.intent.json)
        text = re.sub(rf"(?<![\w./-]){tool_name}(?!\w|[./-]\w)", f"`{command_line}`", text)
    return text


def report_tool_error(exc: LoopError, *, as_json: bool) -> int:
    """Print a tool command's error; return its exit code (the error's own).

    Every error prints ``error: <code>: <message>`` on stderr and, when ``as_json``,
    its structured form (:meth:`~loop.errors.LoopError.to_dict`) on stdout, with the one
    message both places: worded for the command line (:func:`cli_wording`).
    """
    message = cli_wording(exc.message)
    if as_json:
        shown = exc.to_dict()
        shown["error"]["message"] = message
        print(json.dumps(shown, ensure_ascii=False, indent=2))
    print(f"error: {exc.code}: {message}", file=sys.stderr)
    return exc.exit_code


class ToolGroup(NamedTuple):
    """A command group made by :func:`add_tool_group`.

    Attributes:
        parser: the group's parser (``task``, ``theme``, ``experience``).
        subcommands: its subcommands action; a domain adds its commands that are not
            tools here (argparse has no public way to reach it from ``parser``).
    """

    parser: argparse.ArgumentParser
    subcommands: argparse._SubParsersAction[argparse.ArgumentParser]


def add_tool_group(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    group: str,
    *,
    help: str,
    tools: Sequence[Tool],
    commands: dict[str, str],
    positionals: dict[str, list[str]] | None = None,
    renderers: dict[str, Renderer] | None = None,
    exit_codes: dict[str, ExitCode] | None = None,
) -> ToolGroup:
    """Add ``group`` with one subcommand per tool.

    Args:
        subparsers: the top-level subparsers.
        group: the group's command name (``task``, ``theme``, ``experience``).
        help: one line for ``--help``.
        tools: the domain's tools (only that domain is imported).
        commands: subcommand name → tool name.
        positionals: subcommand name → fields that may also be given positionally.
        renderers: subcommand name → function that renders the output for a person.
        exit_codes: subcommand name → function that gives the exit code of a call that
            returned (0 when not given): a result that reports a failure, not an error.

    Returns:
        The group's parser and its subcommands action (see :class:`ToolGroup`).
    """
    parent = subparsers.add_parser(group, help=help, description=help)
    # Logging is set up only if a module of the command uses it (the task tools do not).
    parent.set_defaults(needs_logging=False)
    sub = parent.add_subparsers(dest="tool_command", metavar="COMMAND", required=True)
    by_name = {t.name: t for t in tools}
    for command, tool_name in commands.items():
        _COMMAND_LINES[tool_name] = f"{parent.prog} {command}"
        tool = by_name[tool_name]
        summary = tool.description.strip().splitlines()[0]
        p = sub.add_parser(
            command,
            help=summary,
            description=tool.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        for field_name in (positionals or {}).get(command, []):
            p.add_argument(
                f"pos__{field_name}",
                nargs="?",
                metavar=_kebab(field_name).upper(),
                default=None,
                help=f"same as --{_kebab(field_name)}",
            )
        for name, info in tool.input_model.model_fields.items():
            _add_field_option(p, info.alias or name, info)
        p.add_argument(
            "--input", metavar="JSON", help="the whole input as JSON, @FILE or - (stdin)"
        )
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        add_context_options(p)
        p.set_defaults(
            handler=_make_handler(
                tool, (renderers or {}).get(command), (exit_codes or {}).get(command)
            )
        )
    return ToolGroup(parent, sub)


def _input_bytes(spec: str) -> bytes:
    """The bytes ``--input`` names: inline JSON, ``@FILE`` or ``-`` (stdin)."""
    if spec == "-":
        return sys.stdin.buffer.read()
    if spec.startswith("@"):
        try:
            return Path(spec[1:]).read_bytes()
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise UsageError(f"--input {spec[:80]!r}: {reason or exc}") from exc
    return spec.encode("utf-8", "surrogateescape")


def _input_object(spec: str) -> dict[str, Any]:
    """The JSON object ``--input`` gives (inline, ``@FILE`` or ``-``)."""
    raw = _input_bytes(spec)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--input is not UTF-8 text ({exc.reason})") from exc
    try:
        loaded = _json.loads(text, max_depth=_json.INPUT_DEPTH)
    except ValueError as exc:
        raise UsageError(f"--input is not valid JSON: {_json.error_text(exc)}") from exc
    if not isinstance(loaded, dict):
        raise UsageError("--input must be a JSON object")
    return loaded


def _same(a: Any, b: Any) -> bool:
    """Whether two values of a field are the same JSON (``1`` is not ``true`` nor ``1.0``)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _collect_input(args: argparse.Namespace) -> dict[str, Any]:
    """The tool's input: ``--input``'s object, and each field given as a flag or an
    argument. A field given twice (in ``--input`` and as a flag, or as a flag and an
    argument) with different values is a usage error naming it: neither silently wins."""
    data = _input_object(args.input) if args.input else {}
    given = dict.fromkeys(data, "--input")
    for key, value in vars(args).items():
        if value is None:
            continue
        if key.startswith("pos__"):
            name, where = key[5:], f"the {_kebab(key[5:]).upper()} argument"
        elif key.startswith("field__"):
            name, where = key[7:], f"--{_kebab(key[7:])}"
        else:
            continue
        if name in given and not _same(data[name], value):
            raise UsageError(
                f"{name} is given twice with different values ({given[name]} and "
                f"{where}): give it once, not both"
            )
        data.setdefault(name, value)
        given.setdefault(name, where)
    return data


def _make_handler(
    tool: Tool, renderer: Renderer | None, exit_code: ExitCode | None = None
) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        try:
            ctx = context_from_args(args)
            result = tool.run(ctx, _collect_input(args))
        except LoopError as exc:
            return report_tool_error(exc, as_json=args.json)
        out = result.model_dump(mode="json", by_alias=True)
        if args.json:
            print(json.dumps(out, ensure_ascii=False, indent=2))
        else:
            print(cli_wording((renderer or render_fields)(out)))
        return EXIT_OK if exit_code is None else exit_code(out)

    return handler


def render_fields(out: dict[str, Any]) -> str:
    """A result for a person, when its command has no renderer of its own: one
    ``name: value`` line per field (``success`` left out: an error is an exit code)."""
    lines = []
    for key, value in out.items():
        if key == "success" or value is None:
            continue
        if isinstance(value, list):
            text = ", ".join(
                str(v) if not isinstance(v, dict | list) else json.dumps(v) for v in value
            )
        elif isinstance(value, dict):
            text = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        lines.append(f"{key.replace('_', ' ')}: {text or '-'}")
    return "\n".join(lines)
