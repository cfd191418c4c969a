"""``status`` and ``sessions`` as a user runs them: unknown ids, prefixes, corrupt journals."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.commands.test_cli import ENV, loop


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two completed sessions (``demo-one``, ``demo-two``) and one corrupt journal."""
    root = tmp_path_factory.mktemp("sessions")
    for sid in ("demo-one", "demo-two"):
        res = loop("run", "-q", "--session-id", sid, cwd=root)
        assert res.returncode == 0, res.stderr
    bad = root / ".loop/sessions/broken"
    bad.mkdir()
    (bad / "journal.jsonl").write_text("garbage{\n{}\n", encoding="utf-8")
    return root


def test_status_of_an_unknown_session_is_a_one_line_error_with_exit_2(project: Path) -> None:
    """`status nope`: exit 2 and one line on stderr, with or without --json."""
    for extra in ((), ("--json",)):
        res = loop("status", "nope-at-all", *extra, cwd=project)
        assert res.returncode == 2, res
        assert res.stdout == ""
        assert res.stderr.splitlines() == ["error: unknown session 'nope-at-all' in .loop/sessions"]


def test_sessions_lists_the_others_and_flags_a_corrupt_journal(project: Path) -> None:
    """One corrupt journal: the others are listed, that one is `unreadable` with why."""
    res = loop("sessions", cwd=project)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == [
        "SESSION",
        "STATUS",
        "ITERATIONS",
        "ENDED",
        "BY",
        "LAST",
        "HAT",
        "STARTED",
    ]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows == {"demo-one": "completed", "demo-two": "completed", "broken": "unreadable"}
    assert "warning: session broken is unreadable: " in res.stderr
    assert "corrupt journal line" in res.stderr
    data = json.loads(loop("sessions", "--json", cwd=project).stdout)
    broken = next(d for d in data if d["session_id"] == "broken")
    assert broken["status"] == "unreadable" and "corrupt journal line" in broken["error"]
    # when each started: its session.start's time, in the table in this machine's zone
    one = next(d for d in data if d["session_id"] == "demo-one")
    journal = project / ".loop/sessions/demo-one/journal.jsonl"
    assert one["started_at"] == json.loads(journal.read_text().splitlines()[0])["ts"]
    row = next(line for line in lines if line.startswith("demo-one"))
    assert row.endswith(time.strftime("%Y-%m-%d %H:%M", time.localtime(one["started_at"])))
    assert next(line for line in lines if line.startswith("broken")).endswith("-")


def _put(journal: Path, what: str, elsewhere: Path) -> None:
    journal.unlink()
    if what == "link":
        journal.symlink_to(elsewhere)
    elif what == "folder":
        journal.mkdir()
    elif what == "fifo":
        os.mkfifo(journal)
    else:  # empty: a run killed before its first record
        journal.write_bytes(b"")


@pytest.mark.parametrize("what", ["link", "folder", "fifo", "empty"])
def test_a_journal_that_cannot_be_read_is_named_not_an_unknown_session(
    tmp_path: Path, what: str
) -> None:
    """A link, a folder or a pipe in a journal's place, or an empty journal: `status`,
    `show` and `run --resume` name the journal and why (exit 2), never "unknown session"
    nor a resume that is then refused; `sessions` lists it as unreadable."""
    for sid in ("demo-one", "demo-two"):
        assert loop("run", "-q", "--session-id", sid, cwd=tmp_path).returncode == 0
    journal = tmp_path / ".loop/sessions/demo-one/journal.jsonl"
    _put(journal, what, tmp_path / "elsewhere.jsonl")
    why = {
        "link": "refusing to follow the symbolic link",
        "folder": "journal.jsonl: not a regular file",
        "fifo": "journal.jsonl: not a regular file",
        "empty": "journal.jsonl: holds no session start (a run killed before its first record)",
    }[what]
    for args in (["status", "demo-one"], ["show", "demo-one"], ["run", "--resume", "demo-one"]):
        res = loop(*args, cwd=tmp_path)
        assert res.returncode == 2, (args, res.stderr)
        assert "unknown session" not in res.stderr, args
        if args[0] == "status":  # show names it as a file; a resume, as nothing to resume
            assert why in res.stderr, (args, res.stderr)
        assert "journal.jsonl" in res.stderr or args[0] == "run", (args, res.stderr)
    res = loop("sessions", cwd=tmp_path)
    rows = {line.split()[0]: line.split()[1] for line in res.stdout.splitlines()[1:]}
    assert rows == {"demo-one": "unreadable", "demo-two": "completed"}
    assert why in res.stderr


def test_a_unique_prefix_names_a_session_an_ambiguous_one_is_refused(project: Path) -> None:
    """Like git: a unique prefix is the session; a shared one lists the candidates; too
    short a prefix is not looked up."""
    st = json.loads(loop("status", "demo-t", "--json", cwd=project).stdout)
    assert st["session_id"] == "demo-two" and st["status"] == "completed"
    shared = loop("status", "demo", cwd=project)
    assert shared.returncode == 2
    assert shared.stderr.strip() == (
        "error: session id prefix 'demo' is ambiguous: demo-one, demo-two"
    )
    short = loop("status", "dem", cwd=project)
    assert short.returncode == 2
    assert "a prefix needs at least 4 characters" in short.stderr
    shown = loop("show", "demo-o", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "demo-one" in shown.stdout


def test_latest_names_the_most_recent_session_wherever_a_session_is_named(
    project: Path,
) -> None:
    """`latest` (the name of the sessions folder's pointer) is the most recent session for
    every command that reads one; a new session cannot take it as its id."""
    st = json.loads(loop("status", "latest", "--json", cwd=project).stdout)
    assert st["session_id"] == "demo-two"
    for command in ("show", "events", "watch"):
        res = loop(command, "latest", cwd=project)
        assert res.returncode == 0, (command, res.stderr)
        assert "demo-two" in res.stdout or command == "events", (command, res.stdout)
    taken = loop("run", "-q", "--session-id", "latest", cwd=project)
    assert taken.returncode == 2
    assert taken.stderr.splitlines()[-1] == (
        "error: invalid session id 'latest': it names the most recent session; choose another id"
    )


def test_latest_resumes_and_exports_the_most_recent_session(tmp_path: Path) -> None:
    """`run --resume latest` and `export latest`; with no session, a one-line error."""
    none = loop("status", "latest", cwd=tmp_path)
    assert none.returncode == 2
    assert none.stderr.splitlines() == ["error: no session in .loop/sessions"]
    assert (
        loop("run", "-q", "--max-iterations", "1", "--session-id", "s-1", cwd=tmp_path).returncode
        == 3
    )
    # --max-iterations 1 holds on a plain resume: the resume raises it
    resumed = loop(
        "run", "-q", "--json", "--resume", "latest", "--max-iterations", "9", cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["session_id"] == "s-1"
    exported = loop("export", "latest", "--json", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["session_id"] == "s-1"


async def test_status_json_and_the_get_session_status_tool_give_one_report(
    project: Path, tmp_path: Path
) -> None:
    """Without a session, `status --json` printed two fields where the tool gave all of
    them; with one, its `directory` was relative where the tool's is absolute. Both now
    report the same, field for field (the tool over a real stdio MCP client)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, named in ((empty, None), (project, "demo-one")):
        cli = loop("status", *([named] if named else []), "--json", cwd=folder)
        assert cli.returncode == 0, cli.stderr
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "loop", "mcp"], cwd=folder, env=ENV
        )
        async with Client(server) as client:
            tool = await client.call_tool(
                "get_session_status", {"session_id": named} if named else {}
            )
        assert json.loads(cli.stdout) == tool.structured_content
        if named:
            assert json.loads(cli.stdout)["directory"] == str(project / ".loop/sessions/demo-one")


def test_a_session_whose_end_was_torn_off_is_resumed_past_the_limit_it_reached(
    tmp_path: Path,
) -> None:
    """The run reached max_iterations, and its session.end line was cut (a crash as it
    wrote it): status's resume command raises the limit, as it does when the end is
    there, since a plain resume would stop again at once."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\nmax_iterations = 2\n[hats.a]\ntriggers = ["task.start", "a.x"]\n'
        'publishes = ["a.x"]\nbackend = { type = "scripted", outputs = '
        '["<event topic=\\"a.x\\">1</event>", "<event topic=\\"a.x\\">2</event>"] }\n'
    )
    assert loop("run", "-q", "--session-id", "s", cwd=tmp_path).returncode == 3
    journal = tmp_path / ".loop/sessions/s/journal.jsonl"
    journal.write_bytes(journal.read_bytes()[:-40])
    status = json.loads(loop("status", "s", "--json", cwd=tmp_path).stdout)
    assert status["resume_command"] == "python -m loop run --resume s --max-iterations 4"
