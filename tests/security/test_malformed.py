"""Malformed input and state: too deep, not UTF-8, a file where a folder belongs...

Each row prepares a project (a state file written by hand or by an agent), then runs
one command through the CLI or one tool call through MCP, and expects one clean error
that says what is wrong (a fragment of its message), never a traceback. Rows for the
journal, the recording and emit files (read by the engine) follow the same shape.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loop.events import parse_event_tags
from loop.tools.bus import request_input
from tests.security.harness import (
    HB1,
    Outcome,
    Project,
    new_project,
    nothing,
    run_cli,
    run_mcp,
    snapshot,
)
from tests.security.test_links import START, SUMMARY, exported, finalized, themes

DEEP = "[" * 150 + "]" * 150  # deeper than any input may be (100 levels)
VERY_DEEP = "[" * 100_000  # deeper than any parser could take
DEEP_FILE = "[" * 300 + "]" * 300  # deeper than any state file may be (200 levels)
NOT_UTF8 = b"\xff\xfe not text"
E1 = ".loop/experiences/experience_s1"


def write(rel: str, data: bytes | str) -> Callable[[Project], None]:
    """Prepare: write ``data`` at ``rel`` (after the usual state for that area)."""

    def prepare(project: Project) -> None:
        path = project.root / rel
        if rel.startswith(".loop/works"):
            themes(project)
        elif rel.startswith(".loop/experiences"):
            exported(project)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.rmtree(path)  # a file where the folder was
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    return prepare


def wrong_total(project: Project) -> None:
    """A finalized experience whose manifest was edited to claim 5 conversations."""
    finalized(project)
    manifest = project.root / E1 / "manifest.json"
    manifest.write_text(
        manifest.read_text().replace('"total_conversations": 1', '"total_conversations": 5')
    )


LONE = "not a lone surrogate (\\ud800)"  # how the refusal names the surrogate
LONE_CLI: list[tuple[Callable[[Project], None], list[str]]] = [
    (nothing, ["task", "create", "--input", '{"name": "x", "description": "\\ud800"}']),
    (nothing, ["task", "update", "abcd", "--input", '{"name": "\\ud800"}']),
    (exported, ["experience", "thoughts", "s1", "--input",
                '{"session_id": "s1", "thoughts": {"a": "\\ud800"}}']),
]  # fmt: skip
LONE_MCP: list[tuple[Callable[[Project], None], tuple[str, dict[str, Any]]]] = [
    (nothing, ("createTask", {"name": "x", "description": "\ud800"})),
    (nothing, ("getTask", {"id": "\ud800"})),
    (exported, ("export_experience_thoughts", {"session_id": "s1", "thoughts": {"a": "\ud800"}})),
    (themes, ("start_theme", {**START, "themeName": "\ud800"})),
]


@dataclass(frozen=True)
class Row:
    """One malformed input: the state, the command (or tool call), the expected error."""

    id: str
    prepare: Callable[[Project], None]
    argv: list[str] | None = None
    call: tuple[str, dict[str, Any]] | None = None
    says: str = ""  # a fragment of the one error line (or of the output, for code 0)
    stdin: bytes = b""
    code: int = 2


ROWS = [
    # JSON nested too deep, wherever it comes in
    Row("--input deep", nothing, ["task", "create", "--input", '{"a":' + DEEP + "}"],
        says="nested deeper than 100 levels"),
    Row("--input very deep", nothing, ["task", "create", "--input", VERY_DEEP],
        says="nested deeper than 100 levels"),
    Row("JSON option deep", themes, ["theme", "start", "--theme-name", "t",
        "--theme-directory-part", "p", "--reason", "r", "--activity-content", DEEP],
        says="nested deeper than 100 levels"),
    Row("MCP JSON text deep", themes,
        call=("start_theme", {**START, "activityContent": DEEP}), says="nested deeper"),
    Row("MCP JSON text very deep", themes,
        call=("start_theme", {**START, "activityContent": VERY_DEEP}), says="nested deeper"),
    Row("MCP argument deep", exported,
        call=("export_experience_thoughts", {"session_id": "s1", "thoughts": {"a": eval(DEEP)}}),
        says="nested deeper than 100 levels"),
    Row("emit --json deep", nothing, ["emit", "t.x", DEEP, "--json"],
        says="nested deeper than 100 levels"),
    Row("emit --json very deep", nothing, ["emit", "t.x", VERY_DEEP, "--json"],
        says="nested deeper than 100 levels"),
    Row("tasks file deep", write(".loop/tasks.json", DEEP_FILE), ["task", "list"],
        says="tasks.json"),
    Row("intent deep", write(".loop/works/stats/start_theme.intent.json", DEEP_FILE),
        ["theme", "start", "--theme-name", "t", "--theme-directory-part", "p", "--reason", "r"],
        says="start_theme.intent.json: invalid JSON: nested deeper than 200 levels"),
    Row("intent deep (feedback)", write(".loop/works/stats/start_theme.intent.json", DEEP_FILE),
        ["theme", "feedback"], says="start_theme.intent.json"),
    Row("summary deep", write(f"{E1}/summary.json", DEEP_FILE),
        ["experience", "finalize", "s1"], says="summary.json: invalid JSON: nested deeper"),
    Row("batch deep", write(f"{E1}/conversations_001.json", DEEP_FILE),
        ["experience", "finalize", "s1"], says="conversations_001.json"),
    Row("manifest deep", write(f"{E1}/manifest.json", DEEP_FILE),
        ["experience", "finalize", "s1"], says="manifest.json exists but is corrupt"),
    # not UTF-8
    Row("--input @file not UTF-8", write("in.json", NOT_UTF8),
        ["task", "list", "--input", "@in.json"], says="--input is not UTF-8 text"),
    Row("--input - not UTF-8", nothing, ["task", "list", "--input", "-"], stdin=NOT_UTF8,
        says="--input is not UTF-8 text"),
    Row("emit stdin not UTF-8", nothing, ["emit", "t.x", "-"], stdin=NOT_UTF8,
        says="not UTF-8 text"),
    Row("loop.toml not UTF-8", write("loop.toml", NOT_UTF8), ["task", "list"],
        says="loop.toml: not UTF-8 text"),
    Row("loop.toml deep", write("loop.toml", "x = " + DEEP), ["task", "list"],
        says="loop.toml: nested deeper than 32 levels"),
    Row("loop.toml very deep", write("loop.toml", "x = " + "[" * 5000 + "]" * 5000),
        ["run"], says="loop.toml: nested deeper than 32 levels"),
    Row("hat file not UTF-8", write("hats/a.toml", NOT_UTF8),
        ["hats", "validate", "--hats", "hats"], says="a.toml: not UTF-8 text"),
    Row("tasks file not UTF-8", write(".loop/tasks.json", NOT_UTF8), ["task", "list"],
        says="tasks.json"),
    Row("heartbeat not UTF-8", write(".loop/works/stats/current_heartbeat_id.txt", NOT_UTF8),
        ["theme", "start", "--theme-name", "t", "--theme-directory-part", "p", "--reason", "r"],
        says="current_heartbeat_id.txt: not UTF-8"),
    Row("heartbeat not UTF-8 (replaced)",
        write(".loop/works/stats/current_heartbeat_id.txt", NOT_UTF8), ["theme", "heartbeat"],
        code=0),
    Row("themebox item not UTF-8", write(".loop/works/themebox/000_a.md", NOT_UTF8),
        ["theme", "preview"], says="000_a.md: not UTF-8"),
    # ids of the wrong shape on disk
    Row("heartbeat in other digits (replaced)",
        write(".loop/works/stats/current_heartbeat_id.txt", "٢٠٢٥٠٨٠١١٢٠٠٠٠\n"),
        ["theme", "heartbeat"], code=0),
    Row("heartbeat that no ID follows (replaced)",
        write(".loop/works/stats/current_heartbeat_id.txt", "99991231235959\n"),
        ["theme", "heartbeat"], code=0),
    Row("heartbeat with a newline inside",
        write(".loop/works/stats/current_heartbeat_id.txt", HB1 + "\n\n1"),
        ["theme", "status", "--json"], code=0),
    Row("heartbeat in other digits (start)", write(".loop/works/stats/current_heartbeat_id.txt",
        "٢٠٢٥٠٨٠١١٢٠٠٠٠\n"),
        ["theme", "start", "--theme-name", "t", "--theme-directory-part", "p", "--reason", "r"],
        says="invalid_heartbeat"),
    # a file where a folder belongs
    Row("stats is a file", write(".loop/works/stats", "x"), ["theme", "heartbeat"],
        says="stats: not a folder"),
    Row("stats is a file (start)", write(".loop/works/stats", "x"),
        ["theme", "start", "--theme-name", "t", "--theme-directory-part", "p", "--reason", "r"],
        says="stats"),
    Row("themebox is a file", write(".loop/works/themebox", "x"), ["theme", "preview"],
        says="themebox: not a folder"),
    Row("artifacts is a file", write(".loop/works/artifacts", "x"), ["theme", "status"],
        says="artifacts"),
    Row("sessions is a file (status)", write(".loop/sessions", "x"), ["status"],
        says="sessions: not a folder"),
    Row("sessions is a file (sessions)", write(".loop/sessions", "x"), ["sessions"],
        says="sessions: not a folder"),
    Row("sessions is a file (tool)", write(".loop/sessions", "x"),
        call=("get_session_status", {}), says="sessions: not a folder"),
    Row(".loop is a file", write(".loop", "x"), ["task", "create", "t"], says=".loop"),
    Row("experiences is a file", write(".loop/experiences", "x"),
        ["experience", "init", "--input", '{"summary": ' + str(SUMMARY).replace("'", '"') + "}"],
        says="experiences"),
    Row("experience is a file", write(E1, "x"), ["experience", "finalize", "s1"],
        says="experience_s1"),
    # corrupt state
    Row("manifest corrupt", write(f"{E1}/manifest.json", "{}"),
        ["experience", "finalize", "s1"], says="invalid_manifest: manifest.json exists but is"),
    Row("manifest total wrong", wrong_total, ["experience", "finalize", "s1"], code=0,
        says="warning: manifest.json: total_conversations says 5 but the batches hold 1"),
    Row("intent forged", write(".loop/works/stats/start_theme.intent.json",
        '{"heartbeatId": "' + HB1 + '", "historyFile": "artifacts/theme_histories/'
        + HB1 + '_start_x.md", "historyTemp": "artifacts/theme_histories/.'
        + HB1 + '_start_x.md.tmp", "themeDirectory": "themebox", "createDirs": ["themebox"]}'),
        ["theme", "feedback"], says="not a start intent (themeDirectory is not this start's"),
    # limits
    Row("record cap 0", nothing, ["run", "--record-session", "r.jsonl", "--record-max-bytes",
        "0"], says="--record-max-bytes: 0 is below the smallest cap"),
    Row("argument not UTF-8", nothing, ["task", "create", "a\udcff"], says="not UTF-8 text"),
    # text UTF-8 cannot store: a lone surrogate, which JSON's \ud800 escape spells
    *[Row(f"--input lone surrogate ({' '.join(argv[:2])})", state, argv, says=LONE)
      for state, argv in LONE_CLI],
    *[Row(f"MCP lone surrogate ({call[0]})", state, call=call, says=LONE)
      for state, call in LONE_MCP],
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
async def test_malformed_input_is_one_clean_error(row: Row, tmp_path: Path) -> None:
    """One error that says what is wrong, the expected exit code, nothing outside touched."""
    project = new_project(tmp_path)
    row.prepare(project)
    if row.call is not None:
        [outcome] = await run_mcp(project, [row.call])
    else:
        assert row.argv is not None
        env = {"LOOP_EVENTS_FILE": str(project.root / "events.jsonl")}
        outcome: Outcome = run_cli(project, row.argv, stdin=row.stdin, env=env)
    outcome.check_clean()
    assert outcome.code == row.code, outcome.err
    assert row.says in outcome.err + outcome.out, outcome.err
    project.check_outside(outcome.out, outcome.err)
    assert not (project.root / "events.jsonl").exists()  # a refused emit wrote nothing


def test_a_deep_bus_payload_is_a_tool_error() -> None:
    """A task.* request whose JSON text nests too deep is refused like bad JSON."""
    from loop.errors import ToolError

    with pytest.raises(ToolError, match="nested deeper than 100 levels") as info:
        request_input('{"a": ' + DEEP + "}", topic="task.create", tool="createTask")
    assert info.value.code == "invalid_payload"


def test_a_deep_tag_payload_stays_text() -> None:
    """An <event> tag whose payload nests too deep keeps it as text (never a crash)."""
    for body in (DEEP, VERY_DEEP):
        [event] = parse_event_tags(f'<event topic="a.b">{body}</event>', source="hat")
        assert event.payload == body


@pytest.mark.parametrize(("state", "argv"), LONE_CLI, ids=[" ".join(a[:2]) for _, a in LONE_CLI])
def test_a_lone_surrogate_in_input_is_refused_before_any_file_is_touched(
    tmp_path: Path, state: Callable[[Project], None], argv: list[str]
) -> None:
    """--input JSON that spells a lone surrogate (valid JSON, not storable as UTF-8) is
    invalid_input naming the field: exit 2, one error line, the structured error on
    stdout under --json, and the project's files as they were (no traceback)."""
    project = new_project(tmp_path)
    state(project)
    before = snapshot(project.root)
    outcome = run_cli(project, [*argv, "--json"])
    outcome.check_clean()
    assert outcome.code == 2, outcome.err
    assert outcome.err.startswith("error: invalid_input: ") and LONE in outcome.err
    error = json.loads(outcome.out)["error"]
    assert error["code"] == "invalid_input"
    field = "thoughts.a" if argv[0] == "experience" else json.loads(argv[-1]).popitem()[0]
    assert error["details"] == [
        {"field": field, "message": "Input should be text UTF-8 can store, " + LONE}
    ]
    assert snapshot(project.root) == before
