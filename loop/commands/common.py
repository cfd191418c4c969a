"""What the commands share: running an async function, printing a JSON result, the
sessions folder."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop._fs import require_folder
from loop._names import check_path
from loop.errors import InputError
from loop.locations import DEFAULT_SESSIONS_DIR

if TYPE_CHECKING:
    from loop.session.preflight import Check

__all__ = [
    "CONFIG_HELP",
    "SESSIONS_DIR_HELP",
    "add_config_argument",
    "add_path_argument",
    "add_sessions_options",
    "check_output_file",
    "print_json",
    "report_checks",
    "run_async",
    "run_interruptible",
    "sessions_root",
]


def run_async(func: Callable[..., Any], *args: Any) -> Any:
    """Run an async function under anyio, on asyncio (the MCP endpoint's server needs it)."""
    # anyio is imported by the commands that run something, not by ``--help``
    import anyio  # noqa: PLC0415 - start-up speed, see above

    return anyio.run(func, *args, backend="asyncio")


def run_interruptible(func: Callable[..., Any], *args: Any) -> Any:
    """:func:`run_async`, where SIGTERM (a CI job's timeout, ``timeout``, ``kill``) and
    SIGHUP (see :mod:`loop._signals`) interrupt as Ctrl-C does: the function is
    cancelled, its cleanup runs (child processes stopped, temporary folders removed, the
    terminal's status line erased), then :class:`KeyboardInterrupt` is raised: exit 130,
    ``error: interrupted``."""
    import signal  # noqa: PLC0415 - see run_async

    import anyio  # noqa: PLC0415 - see run_async
    import anyio.abc  # noqa: PLC0415 - see run_async

    from loop._signals import hung_up, stop_signals  # noqa: PLC0415 - see run_async

    stopped = False
    # SIGINT stays asyncio's: it cancels the function and raises KeyboardInterrupt
    others = [s for s in stop_signals() if s != signal.SIGINT]

    async def on_stop_signal(
        scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        nonlocal stopped
        with anyio.open_signal_receiver(*others) as signals:
            task_status.started()  # the signals are ours before the function starts
            async for signum in signals:
                hung_up(signum)
                stopped = True
                scope.cancel()
                return

    async def until_stopped() -> Any:
        result: Any = None  # cancelled by a signal: KeyboardInterrupt, raised below
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            await group.start(on_stop_signal, group.cancel_scope)
            try:
                result = await func(*args)
            except Exception as exc:  # raised as it is, not inside an exception group
                failure = exc
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return result

    result = anyio.run(until_stopped, backend="asyncio")
    if stopped:
        raise KeyboardInterrupt
    return result


def add_path_argument(
    parser: argparse._ActionsContainer, *names: str, **kwargs: Any
) -> argparse.Action:
    """``parser.add_argument(*names, **kwargs)`` for a path (a file, a folder), checked as
    it is parsed: one no system call takes (empty, a NUL, a name over 255 bytes) is an
    ``invalid_path`` error of one line naming the option (or the argument's metavar),
    before any command touches the file system (:func:`loop._names.check_path`)."""
    shown = names[0] if names[0].startswith("-") else kwargs.get("metavar") or names[0]

    def checked(raw: str) -> str:  # a PathError passes argparse's type handling as it is
        return check_path(raw, shown)

    return parser.add_argument(*names, type=checked, **kwargs)


def check_output_file(path: Path, option: str) -> None:
    """Check, before any work, that a command can write its output file at ``path`` (the
    value of ``option``, such as ``-o`` or ``--junit``), which it replaces atomically and
    whose missing folders it makes: ``path`` is no folder, no symbolic link and nothing
    but a plain file, and its folder is one, or can be made (the nearest one that exists
    is a folder that can be written).

    Raises:
        InputError: one line naming the file and the option.
    """
    if path.is_symlink():
        raise InputError(f"{path}: is a symbolic link; {option} needs a plain file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; {option} needs a file name")
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: is not a regular file; {option} needs a plain file")
    folder = Path(os.path.abspath(path)).parent  # noqa: PTH100 - lexical
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{path}: cannot write it: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write it: the folder {folder} is not writable")


def print_json(value: Any) -> None:
    """Print a JSON result on stdout."""
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


SESSIONS_DIR_HELP = (
    "default: [loop] sessions_dir of the loop.toml found here or in a parent folder "
    "(or given with --config), else .loop/sessions"
)
CONFIG_HELP = (
    "read the settings from this loop.toml, with this folder as the project's, as "
    "`run --config` does (default: the loop.toml here or in a parent folder, if any)"
)


def add_config_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--config PATH``: where a command other than ``run`` reads the project's settings
    (where the sessions and the tool files live), as ``run --config`` does."""
    add_path_argument(parser, "--config", "-c", metavar="PATH", help=CONFIG_HELP)


def add_sessions_options(parser: argparse.ArgumentParser) -> None:
    """``--sessions-dir DIR`` and ``--config PATH``: where a command finds the sessions
    (read by :func:`sessions_root`)."""
    group = parser.add_argument_group("where the sessions live")
    add_path_argument(group, "--sessions-dir", metavar="DIR", help=SESSIONS_DIR_HELP)
    add_config_argument(group)


def sessions_root(args: argparse.Namespace) -> tuple[Path, Path]:
    """The sessions folder (``--sessions-dir``, else ``[loop] sessions_dir`` of the
    ``loop.toml`` given with ``--config`` or found here or in a parent folder, else the
    project's .loop/sessions), and the folder its files are reached from without
    following links.

    Raises:
        StoreError: a file is where the folder belongs; PathError: a link is (inside
            the project, no link is followed); ConfigError: the ``loop.toml`` is not valid.
    """
    from loop.config.project import project_root  # noqa: PLC0415 - on use
    from loop.config.settings import tool_settings_from_project  # noqa: PLC0415 - on use

    flag: str | None = args.sessions_dir
    config: str | None = args.config
    cwd = Path.cwd()
    project = cwd if config else project_root(cwd)
    if flag:
        root = Path(flag)
    else:
        default = DEFAULT_SESSIONS_DIR if project == cwd else str(project / DEFAULT_SESSIONS_DIR)
        root = Path(tool_settings_from_project(cwd, config).get("sessions_dir", default))
    full = Path(os.path.abspath(root))  # noqa: PTH100 - lexical
    trusted = project if project in (full, *full.parents) else full
    require_folder(full, root=trusted)
    return root, trusted


def report_checks(checks: Sequence[Check], *, hint: str) -> bool:
    """Print the preflight's warnings (``warning:``) and failures (``error:``) on stderr,
    one line each, ``hint`` after failures; whether any check failed."""
    for check in checks:
        if check.status == "warn":
            print(f"warning: {check.subject}: {check.detail}", file=sys.stderr)
    failed = [c for c in checks if c.status == "fail"]
    for check in failed:
        print(f"error: {check.subject}: {check.detail}", file=sys.stderr)
    if failed:
        print(hint, file=sys.stderr)
    return bool(failed)
