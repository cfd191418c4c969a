"""A link planted at every path the tool domains write or read: nothing escapes the project.

Each row plants one link (to the victim file, or to an outside folder holding what was
there), then runs the domain's operations through the CLI and through MCP. Every
operation either refuses with one clean error or succeeds without following the link;
afterwards the victim's bytes and the outside folder are unchanged and the victim's
content was never shown. Add session-level rows (the journal, the lock, ``latest``,
iteration files) are rows too: an interrupted session is prepared (a real run killed
with SIGKILL in its first iteration), the link is planted, then ``run --resume``,
``status``, ``sessions`` and ``show`` run (``commands``: they are no tools).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.security.harness import (
    CLI_COMMANDS,
    HB1,
    HB2,
    Prepare,
    Project,
    cli_argv,
    new_project,
    nothing,
    run_cli,
    run_mcp,
)

SUMMARY: dict[str, Any] = {
    "ai_name": "Claude(red team)",
    "ai_context": "tries to escape the project",
    "experience_summary": "planted links everywhere",
    "experience_flow": ["plant", "run", "check"],
    "main_topics": ["links"],
}
BATCH = [{"user_input": "u", "ai_response": "a", "reasoning": "r"}]
START = {"themeName": "Escape", "themeDirectoryPart": "x", "reason": "red team"}
END = {"themeStartId": HB1, "themeDirectoryPart": "x", "themeName": "Escape", "reason": "done"}

Call = tuple[str, dict[str, Any]]


def tasks(p: Project) -> None:
    """One task in the default tasks file."""
    p.tool("createTask", name="first")


def themes(p: Project) -> None:
    """A heartbeat, a theme candidate and a feedback item."""
    p.heartbeat()
    (p.works / "themebox").mkdir(parents=True)
    (p.works / "themebox" / "001_theme.md").write_text("# a theme\n")
    (p.works / "feedbackbox").mkdir()
    (p.works / "feedbackbox" / "001_fb.md").write_text("feedback\n")


def started(p: Project) -> None:
    """Theme ``x`` started at HB1; the heartbeat is now HB2."""
    themes(p)
    p.tool("start_theme", **START)
    p.heartbeat(HB2)


def exported(p: Project) -> None:
    """Experience ``s1``: summary, one batch, thoughts (not finalized)."""
    p.tool("export_experience_init", session_id="s1", summary=SUMMARY)
    p.tool("export_experience_conversations", session_id="s1", batch_number=1,
           conversations_batch=BATCH)  # fmt: skip
    p.tool("export_experience_thoughts", session_id="s1", thoughts={"insight": "x"})


def finalized(p: Project) -> None:
    """Experience ``s1`` finalized."""
    exported(p)
    p.tool("export_experience_finalize", session_id="s1")


# A session whose run was killed (SIGKILL) in its first iteration: its journal holds the
# iteration's start, its first attempt's folder exists; a resume runs the iteration again.
# The worker reads its prompt file and completes the loop (TOML strings written as JSON).
WORKER = "import sys; open(sys.argv[1]).read(); print(sys.argv[2])"
SESSION_CONFIG = f"""
[loop]
prompt = "red team"
max_iterations = 3

[hats.worker]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "command", prompt_via = "file", command = [
  {json.dumps(sys.executable)}, "-c", {json.dumps(WORKER)}, "{{prompt_file}}",
  {json.dumps('<event topic="LOOP_COMPLETE">ok</event>')}
] }}
"""


@functools.cache
def _interrupted_template() -> Path:
    """The project folder of an interrupted session, made once (a real run, killed)."""
    folder = Path(tempfile.mkdtemp(prefix="hatloop-interrupted-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "loop.toml").write_text(SESSION_CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    env["HATLOOP_CRASH_AT"] = "iteration.start:1"
    argv = [sys.executable, "-m", "loop", "run", "-q", "--session-id", "s1"]
    killed = subprocess.run(argv, cwd=folder, env=env, capture_output=True, check=False)
    assert killed.returncode == -9, killed.stderr
    return folder


def interrupted(p: Project) -> None:
    """Session ``s1``, killed in its first iteration (``iterations/000001/attempt-1``)."""
    shutil.copytree(_interrupted_template(), p.root, dirs_exist_ok=True)


def configured(p: Project) -> None:
    """The loop configuration only: no session yet."""
    (p.root / "loop.toml").write_text(SESSION_CONFIG)


TASK_OPS: list[Call] = [("createTask", {"name": "new"}), ("listTasks", {})]
THEME_OPS: list[Call] = [
    ("preview_next_theme", {}),
    ("start_theme", {**START, "targetFilename": "001_theme.md"}),
    ("check_and_process_item", {"type": "feedbackbox"}),
    ("get_theme_status", {}),
]
S1 = {"session_id": "s1"}
EXPORT_OPS: list[Call] = [
    ("get_export_status", S1),
    ("export_experience_init", {**S1, "summary": SUMMARY}),
    ("export_experience_conversations", {**S1, "batch_number": 2, "conversations_batch": BATCH}),
    ("export_experience_thoughts", {**S1, "thoughts": {"insight": "y"}}),
    ("export_experience_finalize", S1),
    ("validate_experience", {"directory_path": ".loop/experiences/experience_s1"}),
    ("list_experiences", {}),
]


@dataclass(frozen=True)
class LinkCase:
    """After ``prepare``, plant a link at ``at`` (see :meth:`Project.plant` for the
    kinds), then run ``calls``."""

    at: str
    kind: str
    prepare: Prepare
    calls: list[Call]
    heartbeat: bool = False  # also run `theme heartbeat` (a CLI command, no tool)
    commands: tuple[tuple[str, ...], ...] = ()  # commands that are no tool (CLI only)

    @property
    def id(self) -> str:
        return f"{self.at}->{self.kind}"


PRUNE = ("sessions", "prune", "--keep", "0")  # last: it removes what it may
W = ".loop/works"
H = f"{W}/artifacts/theme_histories"
E = ".loop/experiences/experience_s1"
CASES = [
    # the task store: its folder, the file, the lock, the temp file
    LinkCase(".loop", "dir", tasks, TASK_OPS),
    LinkCase(".loop/tasks.json", "file", nothing, TASK_OPS),
    LinkCase(".loop/tasks.json.lock", "file", tasks, TASK_OPS),
    LinkCase(".loop/.tasks.json.tmp", "file", tasks, TASK_OPS),
    # the theme workspace: every folder, the lock, the state files, the histories
    LinkCase(W, "dir", themes, THEME_OPS, heartbeat=True),
    LinkCase(f"{W}/stats", "dir", themes, THEME_OPS, heartbeat=True),
    LinkCase(f"{W}/stats/themes.lock", "file", themes, THEME_OPS, heartbeat=True),
    LinkCase(f"{W}/stats/current_heartbeat_id.txt", "file", themes, THEME_OPS, heartbeat=True),
    LinkCase(f"{W}/stats/start_theme.intent.json", "file", themes, THEME_OPS),
    LinkCase(f"{W}/themebox", "dir", themes, THEME_OPS),
    LinkCase(f"{W}/themebox/001_theme.md", "file", themes, THEME_OPS),
    LinkCase(f"{W}/feedbackbox", "dir", themes, THEME_OPS, heartbeat=True),
    LinkCase(f"{W}/feedbackbox/001_fb.md", "file", themes, THEME_OPS),
    LinkCase(f"{W}/feedbackbox/interrupt.a.md", "file", themes, [], heartbeat=True),
    LinkCase(f"{W}/artifacts", "dir", started, [("end_theme", END), ("get_theme_status", {})]),
    LinkCase(f"{W}/artifacts", "dir", themes, THEME_OPS),
    LinkCase(H, "dir", themes, THEME_OPS),
    LinkCase(f"{H}/{HB1}_start_x.md", "file", themes, THEME_OPS),
    LinkCase(f"{H}/.{HB1}_start_x.md.tmp", "file", themes, THEME_OPS),
    LinkCase(f"{W}/artifacts/{HB1}_x", "dir", themes, THEME_OPS),
    LinkCase(f"{W}/artifacts/{HB1}_x/histories", "dir", started, [("end_theme", END)]),
    LinkCase(f"{H}/{HB2}_end_x.md", "file", started, [("end_theme", END)]),
    LinkCase(f"{H}/.{HB2}_end_x.md.tmp", "file", started, [("end_theme", END)]),
    # experiences: the base, an experience folder, its lock, every file, a temp file
    LinkCase(".loop/experiences", "dir", exported, EXPORT_OPS),
    LinkCase(E, "dir", exported, EXPORT_OPS),
    LinkCase(f"{E}/.export.lock", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/summary.json", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/conversations_001.json", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/conversations_002.json", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/thoughts.json", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/manifest.json", "file", exported, EXPORT_OPS),
    LinkCase(f"{E}/manifest.json", "file", finalized, EXPORT_OPS),
    LinkCase(f"{E}/.thoughts.json.tmp", "file", exported, EXPORT_OPS),
    LinkCase(".loop/experiences/experience_s2", "dir", finalized, EXPORT_OPS),
    # the sessions folder, as the commands that list sessions see it
    LinkCase(
        ".loop/sessions",
        "dir",
        nothing,
        [("get_session_status", {})],
        commands=(("status",), ("sessions",), ("status", "s1"), PRUNE),
    ),
]


# a session's files: the pointer to the latest, its folder, journal, lock and iteration
# folders (the killed attempt's, the one a resume makes next), the recording
S = ".loop/sessions"
A = f"{S}/s1/iterations/000001"
SESSION_OPS: list[Call] = [("get_session_status", {}), ("get_session_status", {"session_id": "s1"})]
RESUME = (
    ("run", "-q", "--resume", "s1"),
    ("run", "-q", "--resume"),
    ("status",),
    ("status", "s1"),
    ("sessions",),
    ("show", "s1"),
    ("show",),
    PRUNE,
)
RECORD = (("run", "-q", "--session-id", "s2", "--record-session", "rec.jsonl", "--force"),)
CASES += [
    LinkCase(f"{S}/latest", "file", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(f"{S}/s1", "dir", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(f"{S}/s1/journal.jsonl", "file", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(f"{S}/s1/lock", "file", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(f"{S}/s1/iterations", "dir", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(A, "dir", interrupted, SESSION_OPS, commands=RESUME),
    LinkCase(f"{A}/attempt-1/events.jsonl", "file", interrupted, [], commands=RESUME),
    LinkCase(f"{A}/attempt-2", "dir", interrupted, [], commands=RESUME),
    LinkCase(f"{A}/attempt-2/events.jsonl", "file", interrupted, [], commands=RESUME),
    LinkCase(f"{A}/attempt-2/prompt.md", "file", interrupted, [], commands=RESUME),
    LinkCase("rec.jsonl", "file", configured, [], commands=RECORD),
]

# every link to a file is also planted dangling: a write through it would create a file
CASES += [
    LinkCase(c.at, "missing", c.prepare, c.calls, c.heartbeat, c.commands)
    for c in CASES
    if c.kind == "file"
]


def _prepared(tmp_path: Path, case: LinkCase) -> Project:
    project = new_project(tmp_path)
    case.prepare(project)
    project.plant(case.at, case.kind)
    return project


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_link_through_the_cli(case: LinkCase, tmp_path: Path) -> None:
    """Through ``python -m loop``: clean outcomes, nothing outside changed or shown."""
    project = _prepared(tmp_path, case)
    argvs = [cli_argv(name, args) for name, args in case.calls if name in CLI_COMMANDS]
    argvs += [list(command) for command in case.commands]
    if case.heartbeat:
        argvs.insert(0, ["theme", "heartbeat"])
    for argv in argvs:
        outcome = run_cli(project, argv)
        outcome.check_clean()
        project.check_outside(outcome.out, outcome.err)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_link_through_mcp(case: LinkCase, tmp_path: Path) -> None:
    """Through the MCP server: structured results or errors, nothing outside touched."""
    project = _prepared(tmp_path, case)
    for outcome in await run_mcp(project, case.calls):
        outcome.check_clean()
        project.check_outside(outcome.out, outcome.err)


def test_the_corpus_covers_every_domain_and_adapter() -> None:
    """The table plants links at the task store, the workspace and the experiences."""
    roots = {c.at.split("/")[1] if c.at.count("/") else c.at for c in CASES}
    assert {".loop", "tasks.json", "works", "experiences"} <= roots | {"tasks.json"}
    assert len(CASES) >= 50
