"""``init`` for every preset and backend: the files it writes validate and load as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop.commands.init import BACKENDS, backend_block, plan_files
from loop.config import load_config, preset_dir, preset_names
from tests.commands.test_cli import ENV

COMBINATIONS = [(p, b) for p in preset_names() for b in BACKENDS]


def _loop(*args: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(ENV)
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _stand_in_cli(tmp_path: Path, backend: str) -> Path:
    """A folder holding a program named as the backend's CLI (validate looks it up)."""
    folder = tmp_path.parent / f"{tmp_path.name}-bin"
    folder.mkdir(exist_ok=True)
    if backend != "scripted":
        exe = folder / backend
        exe.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        exe.chmod(0o755)
    return folder


@pytest.mark.parametrize(("preset", "backend"), COMBINATIONS)
def test_init_writes_a_config_that_validates_and_loads(
    tmp_path: Path, preset: str, backend: str
) -> None:
    """`init --preset P --backend B`: `hats validate` accepts it and every hat runs on B."""
    init = _loop("init", "--preset", preset, "--backend", backend, cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    validate = _loop("hats", "validate", cwd=tmp_path, path=_stand_in_cli(tmp_path, backend))
    assert validate.returncode == 0, validate.stdout + validate.stderr
    config = load_config(tmp_path / "loop.toml", root=tmp_path)  # run's loader
    assert config.backend.type == backend
    assert {config.hat_backend(name).type for name in config.hats} == {backend}
    text = (tmp_path / "loop.toml").read_text()
    assert text.endswith(backend_block(backend))
    if backend != "scripted":
        assert "no agent" not in text.lower()
        assert all("outputs" not in p.read_text() for p in (tmp_path / "hats").glob("*.toml"))


@pytest.mark.parametrize("preset", preset_names())
def test_init_scripted_runs_every_preset_to_completion(tmp_path: Path, preset: str) -> None:
    """--backend scripted never keeps an agent: hats without outputs get stand-ins that
    publish onwards, so the loop completes."""
    assert _loop("init", "--preset", preset, "--backend", "scripted", cwd=tmp_path).returncode == 0
    if preset == "claude":
        (tmp_path / "PROMPT.md").write_text("Write the docs.")
    run = _loop("run", "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "completed" in run.stdout


@pytest.mark.parametrize("preset", preset_names())
def test_a_preset_ships_its_backends_own_block(preset: str) -> None:
    """Each preset's [backend] block is the one init writes for its type (kept in sync),
    and init with that same backend writes the preset unchanged."""
    text = (preset_dir(preset) / "loop.toml").read_text()
    own = next(b for b in BACKENDS if text.endswith(backend_block(b)))
    shipped = plan_files(preset, None)
    assert plan_files(preset, own) == shipped


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_init_where_it_cannot_write_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """--dir naming a file, a folder under a file or in /proc, a hats/ that is a file, a
    .gitignore that is a folder (found after every other file was written): exit 2, one
    `error:` line, and the folder is left as it was (what was written is removed)."""
    (tmp_path / "f").write_text("mine")
    (tmp_path / "g/.gitignore").mkdir(parents=True)
    (tmp_path / "h").mkdir()
    (tmp_path / "h/hats").write_text("mine")
    before = _tree(tmp_path)
    for folder, said in (
        ("f", "error: --dir f: not a folder"),
        ("f/sub", "error: init: cannot write f/sub: Not a directory; nothing was written"),
        ("/proc/x", "error: init: cannot write /proc/x: No such file or directory; nothing "),
        ("g", "error: g/.gitignore: cannot read: Is a directory; nothing was written"),
        ("h", f"error: {tmp_path}/h/hats: not a folder (something else is in its place); "),
    ):
        res = _loop("init", "--dir", folder, cwd=tmp_path)
        assert res.returncode == 2, (folder, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(said), (folder, lines)
        assert res.stdout == ""
    assert _tree(tmp_path) == before
    assert (tmp_path / "f").read_text() == "mine"


def test_init_into_another_folder_says_to_go_there_first(tmp_path: Path) -> None:
    """With --dir, the next step begins with `cd DIR` (from here, doctor and run would
    find no loop.toml, and run the built-in demo)."""
    res = _loop("init", "--dir", "my loop", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].startswith(
        "next: cd 'my loop' && python -m loop doctor && python -m loop run"
    )
    res = _loop("init", cwd=tmp_path / "my loop" / "hats")
    assert res.stdout.splitlines()[-1].startswith("next: python -m loop doctor")
