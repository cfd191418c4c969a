"""Where a run finds its configuration and keeps its state, and what ``init`` sets up:
as pytest and ruff find theirs, from the current folder up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loop.commands.init import ignores_state
from loop.config import find_config, load_config
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
    env = dict(ENV)
    if given != "loop.toml":
        env |= {
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
        res = subprocess.run(
            [sys.executable, "-m", "loop", *argv],
            cwd=tmp_path,
            env=env,
            text=True,
            capture_output=True,
            timeout=120,
            check=False,
        )
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
