"""Hostile names in every name and id a tool or command takes: one clean refusal each.

Each name (300 characters, a final newline, NUL, ``..``, separators, an absolute path,
digits of another script...) goes into each field through the CLI and through MCP. The
outcome is a success or one error line / one structured error, never a traceback or
``internal_error``; nothing outside the project changes; no start intent is left
behind, and a normal start still works afterwards. Ids and names with a final newline
or non-ASCII digits are refused wherever a shape is required.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.security.harness import (
    CLI_COMMANDS,
    HB1,
    Outcome,
    Project,
    cli_argv,
    new_project,
    nothing,
    run_cli,
    run_mcp,
    snapshot,
)
from tests.security.test_links import BATCH, END, START, SUMMARY, exported, started, tasks, themes

HOSTILE: dict[str, str] = {
    "long": "x" * 300,
    "long-utf8": "é" * 150,
    "final-newline": "n1\n",
    "newline": "\n",
    "nul": "a\x00b",
    "dotdot": "..",
    "dot": ".",
    "traversal": "../../outside/victim",
    "separator": "a/b",
    "backslash": "a\\b",
    "absolute": "{victim}",
    "arabic-digits": "٢٠٢٥٠٨٠١١٢٠٠٠٠",
    "fullwidth": "ｘ１",
    "empty": "",
    "blank": " ",
    "dash": "-rf",
    "control": "a\x1b[2Jb",
}
ALL = frozenset(HOSTILE)
# what no plain name may be (a name that sanitising maps to [a-z0-9_] may be the rest)
NOT_A_NAME = frozenset(
    {"long", "long-utf8", "nul", "dotdot", "dot", "traversal", "separator", "backslash",
     "absolute", "empty"}
)  # fmt: skip
# what no path inside the project may be
NOT_INSIDE = frozenset({"long", "long-utf8", "nul", "dotdot", "traversal", "absolute"})


@dataclass(frozen=True)
class Field:
    """A name or id field of a tool: the other arguments, the state before, and which
    hostile names must be refused there (the others may be accepted, sanitised or not
    found, but never crash)."""

    tool: str
    field: str
    args: dict[str, Any]
    prepare: Callable[[Project], None] = nothing
    refused: frozenset[str] = ALL

    @property
    def id(self) -> str:
        return f"{self.tool}.{self.field}"


PARENT = {"parentThemeStartId": HB1, "parentThemeDirectoryPart": "x"}
EXPORT_ARGS = {"batch_number": 2, "conversations_batch": BATCH}
FIELDS = [
    Field("start_theme", "themeDirectoryPart", START, themes, NOT_A_NAME),
    Field("start_theme", "targetFilename", START, themes),
    Field("start_theme", "parentThemeDirectoryPart", {**START, **PARENT}, started),
    Field("start_theme", "parentThemeStartId", {**START, **PARENT}, started),
    Field("start_theme", "themeName", START, themes, frozenset({"empty"})),
    Field("end_theme", "themeStartId", END, started),
    Field("end_theme", "themeDirectoryPart", END, started),
    Field("end_theme", "parentThemeStartId", {**END, **PARENT}, started),
    Field("check_and_process_item", "type", {}, themes),
    Field("get_export_status", "session_id", {}, exported),
    Field("export_experience_init", "session_id", {"summary": SUMMARY}),
    Field("export_experience_conversations", "session_id", EXPORT_ARGS, exported),
    Field("export_experience_thoughts", "session_id", {"thoughts": {"a": 1}}, exported),
    Field("export_experience_finalize", "session_id", {}, exported),
    Field("validate_experience", "directory_path", {}, exported, ALL - {"dot"}),
    Field("list_experiences", "base_directory", {}, exported, NOT_INSIDE),
    Field("getTask", "id", {}, tasks),
    Field("updateTask", "id", {"name": "renamed"}, tasks),
    Field("deleteTask", "id", {}, tasks),
    Field("startTask", "id", {}, tasks),
    Field("completeTask", "id", {"resolution": "done"}, tasks),
    Field("createTask", "parent_id", {"name": "child"}, tasks, ALL - {"empty"}),
    Field("createTask", "name", {}, tasks, frozenset()),
    Field("listTasks", "parent_id", {}, tasks, ALL - {"empty"}),
    Field("get_session_status", "session_id", {}, nothing, ALL - {"empty"}),
]
CASES = [(f, name) for f in FIELDS for name in HOSTILE]
CLI_CASES = [(f, name) for f, name in CASES if f.tool in CLI_COMMANDS]


def _value(project: Project, name: str) -> str:
    return HOSTILE[name].replace("{victim}", str(project.victim))


def _after(project: Project, field: Field, outcome: Outcome, name: str) -> None:
    """The checks every hostile call passes."""
    outcome.check_clean()
    project.check_outside(outcome.out, outcome.err)
    assert not (project.works / "stats" / "start_theme.intent.json").exists()
    if name in field.refused:
        assert outcome.code == 2, f"{name!r} accepted in {field.id}: {outcome.out[:200]}"


def _still_works(project: Project) -> None:
    """A refused or sanitised start never blocks the next one."""
    if not (project.works / "stats").exists():
        return
    project.heartbeat("20250801130000")
    project.tool("start_theme", **{**START, "themeDirectoryPart": "after"})


def _project(tmp_path: Path, field: Field) -> Project:
    project = new_project(tmp_path)
    field.prepare(project)
    project.before = snapshot(project.outside)
    return project


@pytest.mark.parametrize(("field", "name"), CLI_CASES, ids=[f"{f.id}-{n}" for f, n in CLI_CASES])
def test_hostile_name_through_the_cli(field: Field, name: str, tmp_path: Path) -> None:
    """``python -m loop <group> <command> --<field> NAME``: one line, exit 0 or 2."""
    project = _project(tmp_path, field)
    value = _value(project, name)
    outcome = run_cli(project, cli_argv(field.tool, {**field.args, field.field: value}))
    _after(project, field, outcome, name)
    _still_works(project)


@pytest.mark.parametrize(("field", "name"), CASES, ids=[f"{f.id}-{n}" for f, n in CASES])
async def test_hostile_name_through_mcp(field: Field, name: str, tmp_path: Path) -> None:
    """The same name as an MCP argument: a result or a structured error, never a crash."""
    project = _project(tmp_path, field)
    value = _value(project, name)
    [outcome] = await run_mcp(project, [(field.tool, {**field.args, field.field: value})])
    _after(project, field, outcome, name)
    _still_works(project)


@dataclass(frozen=True)
class Command:
    """A command that takes a name outside the tools: its argv, which names it refuses."""

    id: str
    argv: Callable[[str], list[str]]
    refused: frozenset[str] = ALL
    env: Callable[[Project], dict[str, str]] = lambda p: {}


def _events(project: Project) -> dict[str, str]:
    return {"LOOP_EVENTS_FILE": str(project.root / "events.jsonl")}


COMMANDS = [
    Command("status", lambda v: ["status", v], ALL - {"empty"}),
    Command("export", lambda v: ["export", v]),
    Command("run --session-id", lambda v: ["run", "--session-id", v, "-q"], ALL - {"empty"}),
    Command("run --resume", lambda v: ["run", "--resume", v, "-q"]),
    Command("emit topic", lambda v: ["emit", v, "payload"], ALL - {"long", "dash"}, _events),
    Command("emit --target", lambda v: ["emit", "t.x", "--target", v], frozenset(), _events),
    Command("--input @file", lambda v: ["task", "list", "--input", "@" + v], ALL - {"empty"}),
    Command("--tasks-file", lambda v: ["task", "list", "--tasks-file", v], frozenset()),
    Command("--workspace", lambda v: ["theme", "status", "--workspace", v], frozenset()),
]
COMMAND_CASES = [(c, name) for c in COMMANDS for name in HOSTILE]


@pytest.mark.parametrize(
    ("command", "name"), COMMAND_CASES, ids=[f"{c.id}-{n}" for c, n in COMMAND_CASES]
)
def test_hostile_name_in_a_command(command: Command, name: str, tmp_path: Path) -> None:
    """Session ids, topics, files and folders given to commands: one line, exit 0, 2 or 3."""
    project = new_project(tmp_path)
    value = _value(project, name)
    outcome = run_cli(project, command.argv(value), env=command.env(project))
    assert "Traceback" not in outcome.err, outcome.err
    if outcome.code not in (0, 3):  # a run may end by its iteration limit
        outcome.check_clean()
    project.check_outside(outcome.out, outcome.err)
    if name in command.refused:
        assert outcome.code == 2, f"{name!r} accepted by {command.id}: {outcome.out[:200]}"
