"""The red-team corpus' harness: a project, a victim outside it, and the two adapters.

Every case runs an operation as a user or an agent would, through the real CLI entry
point (``loop.cli.main``, in process) or the real MCP server (the SDK's client, in
process), then checks three things: no traceback and a clean error shape, the victim's
bytes and the outside folder unchanged (nothing created there), and nothing outside
printed. Session-level cases (``latest``, the journal, the lock, iteration files) add
rows to the same tables with their own ``prepare`` and commands.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from mcp import Client
from mcp.types import TextContent

from loop.__main__ import main as loop_main
from loop.themes import Workspace, write_heartbeat
from loop.tools.base import ToolContext
from loop.tools.mcp_server import build_server
from loop.tools.registry import call_tool

SECRET = "VICTIM-SECRET-5f1e9c"
HB1 = "20250801120000"
HB2 = "20250801120001"

Snapshot = dict[str, tuple[int, bytes | None]]


def snapshot(folder: Path) -> Snapshot:
    """Every entry under ``folder`` (the folder too) with its modification time and its
    bytes (a link: its target text; a folder: None). A file created and removed again
    still shows, in its folder's time."""
    out: Snapshot = {".": (folder.stat().st_mtime_ns, None)}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        st = p.lstat()
        if p.is_symlink():
            out[rel] = (st.st_mtime_ns, b"-> " + str(p.readlink()).encode())
        else:
            out[rel] = (st.st_mtime_ns, None if p.is_dir() else p.read_bytes())
    return out


@dataclass
class Project:
    """A project folder with hatloop's default layout, and a folder outside it.

    Attributes:
        root: the project (the working folder of every command).
        outside: a folder outside the project; ``outside/victim`` holds :data:`SECRET`.
    """

    root: Path
    outside: Path
    before: Snapshot = field(default_factory=dict)

    @property
    def victim(self) -> Path:
        """A file outside the project that no operation may change or print."""
        return self.outside / "victim"

    @property
    def ctx(self) -> ToolContext:
        """The tool context of the CLI and ``loop mcp`` run in this project."""
        return ToolContext(root=self.root, tasks_file=Path(".loop/tasks.json"))

    @property
    def works(self) -> Path:
        """The theme workspace."""
        return self.root / ".loop" / "works"

    def tool(self, tool: str, /, **args: Any) -> dict[str, Any]:
        """Call a tool directly (to prepare a state)."""
        return call_tool(self.ctx, tool, args)

    def heartbeat(self, hb: str = HB1) -> None:
        """Write the heartbeat ``hb`` (the loop writes one per iteration)."""
        write_heartbeat(Workspace(self.works), datetime.strptime(hb, "%Y%m%d%H%M%S"))

    def plant(self, rel: str, kind: str) -> None:
        """Put a link at ``rel`` and remember the outside state.

        ``file``: a link to the victim. ``missing``: a link to a file that does not
        exist outside (a write through it would create it). ``dir``: a link to an
        outside folder holding what was there (moved: what an agent does to redirect
        hatloop's writes) and a ``000_secret.md`` holding the secret (a read through the
        link would show it).
        """
        at = self.root / rel
        if kind in ("file", "missing"):
            if at.is_dir() and not at.is_symlink():
                shutil.rmtree(at)
            elif at.exists() or at.is_symlink():
                at.unlink()
            at.parent.mkdir(parents=True, exist_ok=True)
            at.symlink_to(self.victim if kind == "file" else self.outside / "created")
        else:
            moved = self.outside / "moved"
            if at.exists():
                shutil.move(at, moved)
            else:
                moved.mkdir()
            (moved / "000_secret.md").write_text(SECRET + "\n")
            at.parent.mkdir(parents=True, exist_ok=True)
            at.symlink_to(moved, target_is_directory=True)
        self.before = snapshot(self.outside)

    def check_outside(self, *texts: str) -> None:
        """The victim and the outside folder are as they were; no text shows the secret."""
        assert self.victim.read_text() == SECRET + "\n"
        assert snapshot(self.outside) == self.before, "something changed outside the project"
        for text in texts:
            assert SECRET not in text, "an outside file's content was shown"


def new_project(tmp_path: Path) -> Project:
    """A fresh project and an outside folder holding the victim."""
    root, outside = tmp_path / "project", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "victim").write_text(SECRET + "\n")
    project = Project(root, outside)
    project.before = snapshot(outside)
    return project


@dataclass(frozen=True)
class Outcome:
    """What one command or tool call did, as its caller sees it."""

    code: int  # the exit code; over MCP 0 for a result, 2 for a tool error
    out: str
    err: str
    error_code: str | None = None  # the structured error's code, when there is one

    def check_clean(self) -> None:
        """No traceback; success, a report of an invalid experience (``experience
        validate`` exits 1 with it, and no error), or one error line (CLI) / a structured
        error (MCP)."""
        assert "Traceback" not in self.out + self.err, self.err
        assert self.code in (0, 1, 2), (self.code, self.err)
        if self.code == 1:
            assert ": INVALID\n" in self.out or '"valid": false' in self.out, self.out
            assert not any(line.startswith("error:") for line in self.err.splitlines())
        elif self.code:
            errors = [line for line in self.err.splitlines() if line.startswith("error:")]
            assert len(errors) == 1, self.err
            assert self.error_code != "internal_error", self.err


@contextlib.contextmanager
def _in(folder: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old)


def run_cli(
    project: Project, argv: list[str], *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> Outcome:
    """``python -m loop ARGV`` in the project, in process (the real entry point, ``emit``
    included); its exit code and output."""
    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    saved, logging = dict(os.environ), structlog.get_config()  # main configures logging
    with (
        _in(project.root),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        structlog.testing.capture_logs(),
    ):
        real_stdin, sys.stdin = sys.stdin, fake_stdin
        os.environ.update(env or {})
        try:
            code = loop_main(argv)
        finally:
            sys.stdin = real_stdin
            os.environ.clear()
            os.environ.update(saved)
            structlog.configure(**logging)
    return Outcome(code, out.getvalue(), err.getvalue())


async def run_mcp(project: Project, calls: list[tuple[str, dict[str, Any]]]) -> list[Outcome]:
    """Call tools over the real MCP server for the project (in-process client)."""
    outcomes = []
    with structlog.testing.capture_logs():
        async with Client(build_server(project.ctx)) as client:
            for name, args in calls:
                result = await client.call_tool(name, args)
                block = result.content[0]
                assert isinstance(block, TextContent)
                if not result.is_error:
                    outcomes.append(Outcome(0, block.text, ""))
                    continue
                body = json.loads(block.text)  # always the structured shape
                assert set(body) == {"error"}, block.text
                code = body["error"]["code"]
                outcomes.append(Outcome(2, "", f"error: {code}: {body['error']['message']}", code))
    return outcomes


Prepare = Callable[[Project], None]


def nothing(project: Project) -> None:
    """No state before the link is planted."""


def _commands() -> dict[str, tuple[str, str]]:
    from loop.commands.experience import COMMANDS as EXPERIENCE
    from loop.commands.task import COMMANDS as TASKS
    from loop.commands.theme import COMMANDS as THEMES

    out: dict[str, tuple[str, str]] = {}
    for group, table in (("task", TASKS), ("theme", THEMES), ("experience", EXPERIENCE)):
        out.update({tool: (group, command) for command, tool in table.items()})
    return out


CLI_COMMANDS = _commands()


def _kebab(name: str) -> str:
    out = "".join(f"-{c.lower()}" if c.isupper() else c for c in name)
    return out.replace("_", "-")


def cli_argv(tool: str, args: dict[str, Any]) -> list[str]:
    """The command line that calls ``tool`` with ``args``: one ``--flag`` per argument,
    as a person types it (text as it is, anything else as JSON)."""
    group, command = CLI_COMMANDS[tool]
    argv = [group, command]
    for key, value in args.items():
        flag = "--" + _kebab(key)
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv += [flag, value if isinstance(value, str) else json.dumps(value)]
    return argv
