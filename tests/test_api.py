"""``import loop`` is a small facade: every public name resolves to its one home, lazily."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import loop


@pytest.mark.parametrize("name", sorted(set(loop.__all__) - {"__version__"}))
def test_each_public_name_is_the_object_in_its_home(name: str) -> None:
    """``loop.X`` is the very object its module defines (the facade adds no copies)."""
    home = importlib.import_module(loop._HOMES[name])
    assert getattr(loop, name) is getattr(home, name)
    assert name in dir(loop)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = loop.nope  # type: ignore[attr-defined]


def test_importing_loop_imports_only_its_version() -> None:
    """The package import stays light: ``emit`` and ``--help`` start through it."""
    code = "import sys, loop; print(sorted(m for m in sys.modules if m.startswith('loop.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['loop._version']"


def _one_hat_project(root: Path) -> None:
    """A loop.toml in ``root`` whose one scripted hat completes the loop at once."""
    done = '<event topic=\\"LOOP_COMPLETE\\">ok</event>'
    (root / "loop.toml").write_text(
        '[loop]\nprompt = "p"\nmax_iterations = 3\n'
        '[hats.a]\ndescription = "a"\ntriggers = ["task.start"]\n'
        f'backend = {{ type = "scripted", outputs = ["{done}"] }}\n',
        encoding="utf-8",
    )


def test_the_facade_runs_a_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The docstring's recipe: load a config, run it, read the summary."""
    monkeypatch.chdir(tmp_path)  # the config's relative paths are the folder's
    _one_hat_project(tmp_path)
    config = loop.load_config(tmp_path / "loop.toml")
    options = loop.RunOptions(workdir=tmp_path, progress=False, handle_signals=False)
    summary = anyio.run(loop.run_loop, config, options)
    assert (summary.reason, summary.exit_code) == ("completed", 0)


def test_configure_logging_keeps_stdout_for_the_program(tmp_path: Path) -> None:
    """A program that runs a loop after ``loop.configure_logging()`` finds hatloop's log
    lines on stderr and its own output alone on stdout."""
    _one_hat_project(tmp_path)
    code = (
        "import anyio, loop, pathlib\n"
        "loop.configure_logging()\n"
        "config = loop.load_config(pathlib.Path('loop.toml'))\n"
        "options = loop.RunOptions(workdir=pathlib.Path.cwd(), handle_signals=False)\n"
        "print(anyio.run(loop.run_loop, config, options).reason)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout == "completed\n"
    assert "session started" in out.stderr


def test_a_log_format_that_is_none_is_said(tmp_path: Path) -> None:
    """`configure_logging("xml")` is a ValueError; `HATLOOP_LOG_FORMAT=xml` logs a warning
    naming the variable and falls back to console lines (it was ignored without a word)."""
    with pytest.raises(ValueError, match="log format 'xml'"):
        loop.configure_logging("xml")  # type: ignore[arg-type]
    code = "import loop\nloop.configure_logging()\n"
    env = {**os.environ, "HATLOOP_LOG_FORMAT": "xml"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "HATLOOP_LOG_FORMAT is not a log format (console or json)" in out.stderr
    assert "value=xml" in out.stderr
    env["HATLOOP_LOG_FORMAT"] = "JSON"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stderr == ""


def test_the_documented_extension_and_recorder_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """python-api.md's example (an extension typed from the public names, a Recorder
    among the extensions) runs as written, and its recording replays."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "python-api.md").read_text()
    example = next(b for b in doc.split("```python\n")[1:] if "class Costs" in b).split("```")[0]
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[hats.a]\ntriggers = ["task.start"]\n'
        'backend = { type = "scripted", outputs = [\'<event topic="LOOP_COMPLETE">d</event>\'] }\n'
    )
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(example, "python-api.md", "exec"), scope)  # the doc's own code
    assert scope["costs"].by_hat == {"a": 0.0}  # type: ignore[attr-defined]
    assert loop.replay_file(tmp_path / "run.jsonl").ok
