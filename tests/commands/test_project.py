"""Where a run finds its configuration and keeps its state, and what ``init`` sets up:
as pytest and ruff find theirs, from the current folder up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from loop.__main__ import main as loop_main
from loop.commands.init import ignores_state
from loop.config import find_config, load_config
from loop.tools.base import ToolContext
from tests.commands.helpers import ENV, loop

ECHO = """\
[loop]
prompt = "hello"
max_iterations = 2

[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.echo]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = { type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">ok</event>'] }
"""


def _console(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI with console log lines (whatever the caller's environment says)."""
    env = {k: v for k, v in ENV.items() if k != "HATLOOP_LOG_FORMAT"}
    return subprocess.run(
        [sys.executable, "-m", "loop", *args, "--log-format", "console"],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_run_in_a_subfolder_uses_the_projects_config_and_state(tmp_path: Path) -> None:
    """From a subfolder, run finds loop.toml in a parent, keeps .loop/ beside it, and
    says which config and hats it uses; status finds the session from there too."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    res = _console("run", cwd=deep)
    assert res.returncode == 0, res.stderr
    assert "completed" in res.stdout
    first = res.stderr.splitlines()[0]
    assert "config" in first and str(tmp_path / "loop.toml") in first
    assert "echo (scripted)" in first
    assert (tmp_path / ".loop/sessions").is_dir()
    assert not (deep / ".loop").exists() and not (tmp_path / "src/.loop").exists()
    status = loop("status", "--json", cwd=deep)
    assert json.loads(status.stdout)["status"] == "completed", status.stderr


def test_the_search_stops_at_a_repositorys_root(tmp_path: Path) -> None:
    """A loop.toml above a repository's root is not the repository's: the search stops
    at the folder holding .git (whose own loop.toml still counts)."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert find_config(repo / "sub") is None
    assert find_config(tmp_path / "other") == tmp_path / "loop.toml"
    (repo / "loop.toml").write_text(ECHO, encoding="utf-8")
    assert find_config(repo / "sub") == repo / "loop.toml"
    config = load_config(root=repo / "sub")
    assert config.root == repo.resolve() and not config.builtin


def test_without_a_config_the_demo_runs_and_says_so(tmp_path: Path) -> None:
    """No loop.toml here or above (a repository's root stops the search): the built-in
    demo runs, and its first line says that it is the demo and how to start one's own."""
    (tmp_path / ".git").mkdir()
    res = _console("run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    first = res.stderr.splitlines()[0]
    assert "no loop.toml here or in a parent folder" in first and "built-in demo" in first
    assert "init" in first


def test_init_writes_a_gitignore_for_the_state_and_never_clobbers_one(tmp_path: Path) -> None:
    """init writes .gitignore with .loop/; an existing one gets the line appended once
    (its own lines kept as they are)."""
    fresh = tmp_path / "fresh"
    assert loop("init", "--dir", str(fresh), cwd=tmp_path).returncode == 0
    assert ignores_state((fresh / ".gitignore").read_text(encoding="utf-8"))
    own = tmp_path / "own"
    own.mkdir()
    (own / ".gitignore").write_text("node_modules\n*.log", encoding="utf-8")
    res = loop("init", "--dir", str(own), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (own / ".gitignore").read_text(encoding="utf-8") == "node_modules\n*.log\n.loop/\n"
    (own / "loop.toml").unlink()
    for hat in (own / "hats").iterdir():
        hat.unlink()
    assert loop("init", "--dir", str(own), cwd=tmp_path).returncode == 0
    assert (own / ".gitignore").read_text(encoding="utf-8").count(".loop/") == 1


@pytest.mark.parametrize("backend", ["scripted", "claude", "gemini", "codex"])
def test_init_and_run_accept_the_same_backends(tmp_path: Path, backend: str) -> None:
    """What init --backend accepts, run --backend accepts (and the other way round)."""
    assert loop("init", "--backend", backend, cwd=tmp_path).returncode == 0
    config = load_config(tmp_path / "loop.toml", overrides={"backend": backend})
    assert {config.hat_backend(n).type for n in config.hats} == {backend}
    if backend == "scripted":  # every hat on the scripted backend: the loop runs
        (tmp_path / "loop.toml").write_text(ECHO.replace("backend = {", "# "), encoding="utf-8")
        res = loop("run", "-q", "--backend", "scripted", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
    for command in ("init", "run"):
        res = loop(command, "--backend", "command", cwd=tmp_path)
        assert res.returncode == 2 and "invalid choice: 'command'" in res.stderr


FILES_TOML = """\
[tasks]
file = "toml-tasks.json"
[themes]
workspace = "toml-works"
[experience]
base_directory = "toml-experiences"
"""


@pytest.mark.parametrize("given", ["flag", "environment", "loop.toml"])
def test_where_the_tool_files_live_flag_then_environment_then_loop_toml(
    tmp_path: Path, given: str
) -> None:
    """`--tasks-file`/`--workspace`/`--experiences-dir` win over `FILE_PATH`/
    `LOOP_WORKSPACE`/`LOOP_EXPERIENCES_DIR`, which win over loop.toml's settings."""
    (tmp_path / "loop.toml").write_text(FILES_TOML, encoding="utf-8")
    env: dict[str, str] = {}
    if given != "loop.toml":
        env = {
            "FILE_PATH": "env-tasks.json",
            "LOOP_WORKSPACE": "env-works",
            "LOOP_EXPERIENCES_DIR": "env-experiences",
        }
    flags = {
        "task": ["--tasks-file", "flag-tasks.json"],
        "theme": ["--workspace", "flag-works"],
        "experience": ["--experiences-dir", "flag-experiences"],
    }
    calls = [
        ["task", "create", "t"],
        ["theme", "heartbeat"],
        ["experience", "init", "--session-id", "s1", "--summary", json.dumps(SUMMARY)],
    ]
    for call in calls:
        argv = [*call, *flags[call[0]]] if given == "flag" else call
        res = loop(*argv, cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
    prefix = {"flag": "flag", "environment": "env", "loop.toml": "toml"}[given]
    made = {p.name for p in tmp_path.iterdir() if p.name.split("-")[0] in FILE_OWNERS}
    made.discard(f"{prefix}-tasks.json.lock")  # the tasks file's lock, beside it
    assert made == {f"{prefix}-experiences", f"{prefix}-tasks.json", f"{prefix}-works"}


FILE_OWNERS = {"flag", "env", "toml"}
SUMMARY = {
    "ai_name": "a",
    "ai_context": "c",
    "experience_summary": "s",
    "experience_flow": ["x"],
    "main_topics": ["t (e.g. x)"],
}


def _main(*argv: str) -> int:
    """``python -m loop ARGV`` in this process; the logging setup and the environment it
    may change are put back."""
    saved, logging = dict(os.environ), structlog.get_config()
    try:
        with structlog.testing.capture_logs():
            return loop_main(list(argv))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        structlog.configure(**logging)


OUTSIDE_FORMS = {
    "relative": "../p9/{}",
    "absolute": "{project}/../p9/{}",
    "resolved": "{outside}/{}",
}


@pytest.mark.parametrize("form", list(OUTSIDE_FORMS))
def test_a_path_outside_the_project_is_used_however_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    """--tasks-file, --workspace and --experiences-dir are the person's: a folder outside
    the project is used, whether written with `..` or as an absolute path (`..` was
    refused as "not inside" the project, the absolute path accepted)."""
    project, outside = tmp_path / "p13", tmp_path / "p9"
    project.mkdir()
    outside.mkdir()
    monkeypatch.chdir(project)
    for name in ("FILE_PATH", "LOOP_WORKSPACE", "LOOP_EXPERIENCES_DIR", "LOOP_EVENTS_FILE"):
        monkeypatch.delenv(name, raising=False)

    def at(name: str) -> str:
        return OUTSIDE_FORMS[form].format(name, project=project, outside=outside)

    summary = json.dumps(SUMMARY)
    calls = [
        ["theme", "heartbeat", "--workspace", at("works")],
        ["theme", "preview", "--workspace", at("works")],
        ["theme", "start", "--theme-name", "T", "--theme-directory-part", "t", "--reason", "r"],
        ["task", "create", "t", "--tasks-file", at("tasks.json")],
        ["task", "list", "--tasks-file", at("tasks.json")],
        ["experience", "init", "--session-id", "s1", "--summary", summary],
        ["experience", "status", "s1", "--experiences-dir", at("exp")],
    ]
    calls[2] += ["--workspace", at("works")]
    calls[5] += ["--experiences-dir", at("exp")]
    for argv in calls:
        assert _main(*argv) == 0, capsys.readouterr().err
    assert "s1: in_progress" in capsys.readouterr().out
    assert (outside / "works/stats/current_heartbeat_id.txt").is_file()
    assert next((outside / "works/artifacts").glob("*_t/histories")).is_dir()
    assert json.loads((outside / "tasks.json").read_text(encoding="utf-8"))[0]["name"] == "t"
    assert (outside / "exp/experience_s1/summary.json").is_file()
    assert list(project.iterdir()) == []


def test_a_path_inside_the_project_written_with_dotdot_still_follows_no_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`..` that stays inside the project is the same folder as without it: reached from
    the project folder, so a link below it is refused, as for the plain path."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".loop").symlink_to(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOOP_WORKSPACE", raising=False)
    assert _main("theme", "heartbeat", "--workspace", "sub/../.loop/works") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid_path: refusing to follow the symbolic link")
    assert str(tmp_path / ".loop") in err
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_sessions_folder_outside_the_project_written_with_dotdot(tmp_path: Path) -> None:
    """The folder the session files are reached from: the project for a path in it, the
    path itself outside it, `..` taken as written (a sessions_dir of ../x was taken as
    inside the project, then refused)."""
    project = tmp_path / "p13"
    project.mkdir()
    ctx = ToolContext(root=project, sessions_dir=Path("../shared/sessions"))
    assert ctx.sessions_dir == tmp_path.resolve() / "shared/sessions"
    assert ctx.trusted_root(project / ".." / "shared") == tmp_path.resolve() / "shared"
    assert ctx.trusted_root(project / "a" / ".." / ".loop") == project.resolve()


REFUSED_AS = {
    "flag": "invalid_path: --tasks-file",
    "variable": "invalid_path: LOOP_WORKSPACE",
    "loop.toml": "config_error: {toml}: themes.workspace:",
}


@pytest.mark.parametrize("given", list(REFUSED_AS))
def test_a_path_no_system_call_takes_names_the_flag_or_setting(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """A refused path of the person's says where it was set: the flag, the variable or
    the loop.toml setting (refused as the file loads, as every key of it is)."""
    monkeypatch.chdir(tmp_path)
    for name in ("FILE_PATH", "LOOP_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    long = "x" * 300
    argv = ["task", "list", "--tasks-file", long] if given == "flag" else ["theme", "status"]
    if given == "variable":
        monkeypatch.setenv("LOOP_WORKSPACE", long)
    elif given == "loop.toml":
        (tmp_path / "loop.toml").write_text(f'[themes]\nworkspace = "{long}"\n', encoding="utf-8")
    assert _main(*argv) == 2
    err = capsys.readouterr().err
    said = REFUSED_AS[given].format(toml=tmp_path / "loop.toml")
    assert err.startswith(f"error: {said} has a name of 300 bytes")


CONFIG_ELSEWHERE = """\
[loop]
prompt = "x"
sessions_dir = "my-sessions"
[tasks]
file = "my-tasks.json"
block_completion = false
[themes]
enabled = false
[experience]
enabled = false
[hats.a]
triggers = ["task.start"]
[hats.a.backend]
type = "scripted"
outputs = [
  '<event topic="task.create">{"name": "from the hat"}</event>',
]
[hats.b]
triggers = ["task.created"]
backend = { type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">d</event>'] }
"""


def test_the_commands_after_run_config_read_the_same_config(tmp_path: Path) -> None:
    """After ``run --config ../cfg/loop.toml``, the tool and session commands given the
    same ``--config`` find what the run made (its sessions_dir, its tasks file), from the
    same folder; without it they look where the folder's own settings say."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "loop.toml").write_text(CONFIG_ELSEWHERE, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    cfg = "../cfg/loop.toml"
    assert loop("run", "-q", "--config", cfg, cwd=work).returncode == 0
    listed = loop("task", "list", "--json", "--config", cfg, cwd=work)
    assert [t["name"] for t in json.loads(listed.stdout)["tasks"]] == ["from the hat"]
    status = loop("status", "--json", "-c", cfg, cwd=work)
    assert json.loads(status.stdout)["status"] == "completed", status.stderr
    for command in (
        ["sessions"],
        ["show"],
        ["events"],
        ["watch"],
        ["sessions", "prune", "--keep", "1"],
    ):
        done = loop(*command, "--config", cfg, cwd=work)
        assert done.returncode == 0, (command, done.stderr)
    assert "no session in .loop/sessions" in loop("status", cwd=work).stdout
    assert json.loads(loop("task", "list", "--json", cwd=work).stdout)["tasks"] == []
    missing = loop("status", "--config", "../nope.toml", cwd=work)
    assert missing.returncode == 2 and "nope.toml: file not found" in missing.stderr
