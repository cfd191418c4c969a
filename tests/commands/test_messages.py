"""Error messages a person can act on: plain words naming the key and what it expects,
"did you mean" for a misspelt key, the command line's own wording, the program's name as
it was called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop.cli import prog_name
from tests.commands.helpers import ENV, loop

HAT = '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\n'


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[loop]\npromt = "x"\n', "loop.promt: unknown key (did you mean 'prompt'?)"),
        (
            HAT.replace("triggers", "tirggers"),
            "hats.a.tirggers: unknown key (did you mean 'triggers'?)",
        ),
        (
            HAT + 'backend = { type = "claude", modle = "m" }\n',
            "hats.a.backend.modle: unknown key (did you mean 'model'?)",
        ),
        (
            HAT + 'backend = { type = "python", target = "bad target" }\n',
            'hats.a.backend.target: expected "module:function", such as '
            "\"hats.checks:run_tests\", got 'bad target'",
        ),
        (
            '[loop]\nprompt = "x"\nmax_iterations = "many"\nmax_runtime_seconds = -1\n',
            "loop.max_iterations: expected a whole number, got 'many'",
        ),
        # TOML has types: a value of another kind is refused, never converted
        (
            '[loop]\nprompt = "x"\nmax_iterations = "9"\n',
            "loop.max_iterations: expected a whole number, got '9'",
        ),
        (
            '[loop]\nprompt = "x"\ndurable = "yes"\n',
            "loop.durable: expected true or false, got 'yes'",
        ),
        (
            '[loop]\nprompt = "x"\nmax_parallel = 2.0\n',
            "loop.max_parallel: expected a whole number, got 2.0",
        ),
        (HAT + 'concurrency = "3"\n', "hats.a.concurrency: expected a whole number, got '3'"),
        (
            HAT + "max_activations = 0\n",
            "hats.a.max_activations: expected a number at least 1, got 0",
        ),
        # a key named like a backend type (command) is named; the union's tag is not
        (
            '[loop]\nprompt = "x"\n[backend]\ntype = "command"\n',
            "backend.command: missing required key",
        ),
        (HAT + 'backend = { type = "command" }\n', "hats.a.backend.command: missing required key"),
        (
            HAT + 'backend = { type = "command", command = [] }\n',
            "hats.a.backend.command: expected at least 1 item(s), got none",
        ),
        (
            HAT + 'backend = { type = "gemini", approval_mode = "always" }\n',
            "hats.a.backend.approval_mode: expected one of 'default', 'auto_edit', 'yolo' or "
            "'plan', got 'always'",
        ),
    ],
)
def test_config_errors_are_plain_one_liners(tmp_path: Path, toml: str, says: str) -> None:
    """No pydantic wording (`String should match pattern`, `Input should be`, `(and 1
    more)`): the key, what it expects, what it got."""
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    res = loop("hats", "validate", cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines == [f"error: {tmp_path / 'loop.toml'}: {says}"], lines
    for leak in ("should", "pattern", "more)", "Input", "claude.", "gemini.", "python."):
        assert leak not in lines[0], leak


def test_a_bad_flag_value_is_the_flags_error(tmp_path: Path) -> None:
    """A flag's value that [loop] refuses names the flag, not "<command line>"."""
    res = loop("run", "--max-iterations", "0", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == "error: --max-iterations: expected a number at least 1, got 0"


def test_tool_errors_use_the_command_lines_wording(tmp_path: Path) -> None:
    """On the command line, a tool's hint names flags and commands (`--cascade`,
    `hatloop task complete`), not the MCP arguments and tool names."""
    created = loop("task", "create", "root", "--json", cwd=tmp_path)
    root = __import__("json").loads(created.stdout)["task"]["id"]
    assert loop("task", "create", "child", "--parent-id", root, cwd=tmp_path).returncode == 0
    res = loop("task", "delete", root, cwd=tmp_path)
    assert res.returncode == 2
    assert "pass --cascade to delete" in res.stderr and "cascade=true" not in res.stderr
    started = loop("task", "start", root, cwd=tmp_path)
    assert "task complete`" in started.stdout and "completeTask" not in started.stdout


def test_theme_cooldown_is_not_said_twice() -> None:
    """The code is printed before the message: the message does not repeat it."""
    source = Path("loop/themes/service.py").read_text(encoding="utf-8")
    assert '"{stage}cooldown:' not in source and 'f"{stage}cooldown:' not in source


def test_a_completed_session_is_not_offered_resume(tmp_path: Path) -> None:
    """Reusing a completed session's id says it completed, not "use --resume"."""
    assert loop("run", "-q", "--session-id", "done", cwd=tmp_path).returncode == 0
    res = loop("run", "-q", "--session-id", "done", cwd=tmp_path)
    assert res.returncode == 2
    assert "has completed" in res.stderr and "--resume" not in res.stderr


def test_resuming_an_unknown_session_says_what_status_says(tmp_path: Path) -> None:
    """`run --resume nope` and `status nope`: the same words, exit 2."""
    assert loop("run", "-q", "--session-id", "known", cwd=tmp_path).returncode == 0
    status = loop("status", "nope", cwd=tmp_path)
    resume = loop("run", "-q", "--resume", "nope", cwd=tmp_path)
    assert status.returncode == resume.returncode == 2
    said = "error: unknown session 'nope' in "
    assert status.stderr.startswith(said) and resume.stderr.startswith(said), resume.stderr
    assert resume.stderr.strip().endswith(".loop/sessions")
    assert not (tmp_path / ".loop/sessions/nope").exists()


def test_usage_names_the_program_as_it_was_called(tmp_path: Path) -> None:
    """`hatloop` in usage lines when run as hatloop, `python -m loop` when run so."""
    assert prog_name("/usr/bin/hatloop") == "hatloop"
    assert prog_name("/x/loop/__main__.py") == "python -m loop"
    as_module = loop("run", "--bogus", cwd=tmp_path)
    assert as_module.stderr.startswith("error: python -m loop run: ")
    script = Path(sys.executable).parent / "hatloop"
    as_script = subprocess.run(
        [str(script), "run", "--bogus"],
        cwd=tmp_path,
        env={**ENV, "PATH": os.environ.get("PATH", "")},
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert as_script.stderr.startswith("error: hatloop run: "), as_script.stderr
    assert (
        "usage: hatloop "
        in subprocess.run(
            [str(script), "--help"], text=True, capture_output=True, timeout=60, check=False
        ).stdout
    )


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["show", "--bogus"], "show"),
        (["sessions", "prune", "--bogus"], "sessions prune"),
        (["hats", "list", "--bogus"], "hats list"),
        (["run", "--bogus"], "run"),
    ],
)
def test_an_unknown_option_is_named_with_its_command(
    tmp_path: Path, args: list[str], command: str
) -> None:
    """A mistyped flag is the (sub)command's error, with where its options are listed,
    not the top-level program's."""
    res = loop(*args, cwd=tmp_path)
    assert res.returncode == 2
    prog = f"python -m loop {command}"
    assert res.stderr.strip() == (
        f"error: {prog}: unrecognized arguments: --bogus (see {prog} --help)"
    )
