"""A person's path that no system call takes, from a flag or a loop.toml setting: every
command refuses it in one line naming where it was set (exit 2), before it touches the
file system."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.commands.helpers import loop

PROJECT = """\
[loop]
prompt = "x"
{setting}
[hats.a]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">ok</event>'] }}
"""

LONG = "n" * 300
# what is written in loop.toml (TOML text), and what the refusal says of it
BAD = {
    "nul": ('"a\\u0000b"', "must not contain NUL"),
    "long": (f'"{LONG}"', f"has a name of 300 bytes ({LONG[:40]!r}...); at most 255"),
    "empty": ('""', "must not be empty"),
}

# every command that reads [loop] sessions_dir
SESSIONS_COMMANDS = [
    ["run", "-q"],
    ["doctor"],
    ["status"],
    ["status", "x"],
    ["sessions"],
    ["sessions", "prune", "--keep", "1"],
    ["show", "x"],
    ["events", "x"],
    ["report", "x"],
    ["watch", "x"],
    ["task", "list"],
]
# the other path settings: [table] key (sessions_dir, above, is [loop]'s)
SETTINGS = [
    ("tasks", "file"),
    ("themes", "workspace"),
    ("experience", "base_directory"),
    ("loop", "prompt_file"),
]


def _project(tmp_path: Path, table: str, key: str, value: str) -> Path:
    if table == "loop":  # in the [loop] table the project has already
        text = PROJECT.format(setting=f"{key} = {value}")
        if key == "prompt_file":
            text = text.replace('prompt = "x"\n', "")
    else:
        text = PROJECT.format(setting="") + f"[{table}]\n{key} = {value}\n"
    (tmp_path / "loop.toml").write_text(text, encoding="utf-8")
    return tmp_path


def _refused(argv: list[str], cwd: Path, said: str, *, before: set[str] | None = None) -> None:
    """``argv`` exits 2 with one line on stderr ending in ``said``; nothing written."""
    before = {p.name for p in cwd.iterdir()} if before is None else before
    res = loop(*argv, cwd=cwd)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, (argv, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and lines[0].endswith(said), lines[0]
    assert {p.name for p in cwd.iterdir()} == before


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("argv", SESSIONS_COMMANDS, ids=" ".join)
def test_a_bad_sessions_dir_is_refused_by_every_command(
    tmp_path: Path, argv: list[str], bad: str
) -> None:
    """``[loop] sessions_dir`` with a NUL, a 300-byte name or empty: every command that
    reads it (doctor too) refuses loop.toml, naming the file and the key."""
    value, problem = BAD[bad]
    project = _project(tmp_path, "loop", "sessions_dir", value)
    _refused(argv, project, f"{project / 'loop.toml'}: loop.sessions_dir: {problem}")


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("setting", SETTINGS, ids=".".join)
@pytest.mark.parametrize("command", ["run", "doctor"])
def test_a_bad_path_setting_is_refused_by_run_and_doctor(
    tmp_path: Path, command: str, setting: tuple[str, str], bad: str
) -> None:
    """Every path setting of loop.toml, with a NUL, a 300-byte name or empty: ``run``
    and ``doctor`` refuse the file naming the key (``doctor`` never passes it)."""
    value, problem = BAD[bad]
    table, key = setting
    project = _project(tmp_path, table, key, value)
    argv = ["run", "-q"] if command == "run" else ["doctor"]
    _refused(argv, project, f"{project / 'loop.toml'}: {table}.{key}: {problem}")


# a path flag and the arguments around it: every path a command takes from its arguments
FLAGS: list[tuple[str, Callable[[str], list[str]]]] = [
    ("--config", lambda p: ["run", "-q", "--config", p]),
    ("--prompt-file", lambda p: ["run", "-q", "--prompt-file", p]),
    ("--record-session", lambda p: ["run", "-q", "--record-session", p]),
    ("--record-session", lambda p: ["run", "-q", "--no-preflight", "--record-session", p]),
    ("--hats", lambda p: ["run", "-q", "--hats", p]),
    ("--config", lambda p: ["doctor", "--config", p]),
    ("--record-session", lambda p: ["doctor", "--record-session", p]),
    ("--sessions-dir", lambda p: ["sessions", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["sessions", "prune", "--keep", "1", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["status", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["watch", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["show", "x", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["events", "x", "--sessions-dir", p]),
    ("--sessions-dir", lambda p: ["export", "x", "--sessions-dir", p]),
    ("ID|FILE", lambda p: ["show", p]),
    ("ID|FILE", lambda p: ["events", p]),
    ("ID|FILE", lambda p: ["report", p]),
    ("-o", lambda p: ["report", "x", "--sessions-dir", ".", "-o", p]),
    ("FILE|DIR", lambda p: ["replay", p]),
    ("--junit", lambda p: ["replay", "r.jsonl", "--junit", p]),
    ("--dir", lambda p: ["init", "--dir", p]),
    ("--from-ralph", lambda p: ["init", "--from-ralph", p]),
    ("--config", lambda p: ["mcp", "--config", p]),
]


@pytest.mark.parametrize(("flag", "argv"), FLAGS, ids=[" ".join(a("P")) for _, a in FLAGS])
@pytest.mark.parametrize("name", ["long", "empty"])
def test_a_path_flag_no_system_call_takes_is_refused_naming_it(
    tmp_path: Path, flag: str, argv: Callable[[str], list[str]], name: str
) -> None:
    """A path argument with a 300-byte name, or empty: exit 2, one line naming the flag
    (or the argument), before anything is read or written."""
    _project(tmp_path, "loop", "max_iterations", "1")
    path, said = (f"{LONG}.jsonl", "has a name of 306 bytes") if name == "long" else ("", "")
    res = loop(*argv(path), cwd=tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    expected = f"{flag} {said}" if name == "long" else f"{flag} must not be empty"
    assert lines[0].startswith(f"error: {expected}"), lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["loop.toml"]
