"""``task`` subcommands: tables by default, JSON with --json, exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.commands.task import register
from loop.exits import EXIT_OK, EXIT_USAGE


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``task ...`` argv through a parser built with register(); (code, out, err)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FILE_PATH", raising=False)
    tasks_file = tmp_path / "tasks.json"

    def _run(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="loop")
        register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(["task", *argv, "--tasks-file", str(tasks_file)])
        code = args.handler(args)
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def test_create_json_and_positional_name(run: Any) -> None:
    """``task create NAME --json`` prints the tool output with the seed's field names."""
    code, out, _ = run("create", "Ship it", "--json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert data["task"]["name"] == "Ship it"
    assert "createdAt" in data["task"]
    assert "subtask" in data["message"]


def test_readable_output_by_default(run: Any) -> None:
    """Without --json, create/get print key: value lines, list prints a table."""
    _, out, _ = run("create", "Root", "--json")
    rid = json.loads(out)["task"]["id"]
    code, out, _ = run("create", "--name", "Child", "--parent-id", rid)
    assert code == EXIT_OK
    assert "name:        Child" in out
    code, out, _ = run("get", rid)
    assert f"id:          {rid}" in out
    code, out, _ = run("list")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "ORDER", "NAME"]
    assert lines[1].endswith("  Root")
    assert lines[2].endswith("    Child")


def test_start_complete_and_progress(run: Any) -> None:
    """start prints the hierarchy table; complete and progress print the summary table."""
    rid = json.loads(run("create", "Root", "--json")[1])["task"]["id"]
    cid = json.loads(run("create", "A", "--parent-id", rid, "--json")[1])["task"]["id"]
    run("create", "B", "--parent-id", rid)
    code, out, _ = run("start", rid)
    assert code == EXIT_OK
    assert "| Task Name | Status | Subtasks | Progress |" in out
    assert "Automatically started" in out
    code, out, _ = run("progress")
    assert code == EXIT_OK
    assert "active: Root > A" in out
    code, out, _ = run("complete", cid, "did it")
    assert code == EXIT_OK
    assert "| Root | in_progress | 1/2 | 50% |" in out
    code, out, _ = run("progress", "--json")
    data = json.loads(out)
    assert (data["total_tasks"], data["completed_tasks"]) == (3, 1)
    assert data["table"].startswith("| Task Name | Status | Subtasks | Progress |")
    assert data["active_path"] == [{"id": rid, "name": "Root"}]
    bid = data["next_task_id"]
    run("start", bid)
    run("complete", bid, "did it too")
    data = json.loads(run("progress", "--json")[1])
    assert data["completion_percentage"] == 100
    assert "next_task_id" not in data  # absent, not null, once no task is left


def test_update_and_delete(run: Any) -> None:
    """update takes --status; delete refuses a parent without --cascade."""
    rid = json.loads(run("create", "Root", "--json")[1])["task"]["id"]
    run("create", "A", "--parent-id", rid)
    code, out, _ = run("update", rid, "--name", "Renamed", "--json")
    assert json.loads(out)["task"]["name"] == "Renamed"
    code, _, err = run("delete", rid)
    assert code == EXIT_USAGE
    assert "error: has_subtasks:" in err
    code, out, _ = run("delete", rid, "--cascade")
    assert code == EXIT_OK
    assert out.startswith("deleted 2 task(s)")


def test_tool_error_exit_code_and_json(run: Any) -> None:
    """A refused call exits 2, prints the error on stderr and (with --json) on stdout."""
    code, out, err = run("get", "nope", "--json")
    assert code == EXIT_USAGE
    assert json.loads(out)["error"]["code"] == "task_not_found"
    assert err.startswith("error: task_not_found:")


def test_bad_file_is_reported_not_replaced(run: Any, tmp_path: Path) -> None:
    """A corrupt tasks file gives store_error naming it, exit 2, and stays as it was."""
    path = tmp_path / "tasks.json"
    path.write_text("[oops", encoding="utf-8")
    code, _, err = run("create", "x")
    assert code == EXIT_USAGE
    assert "store_error" in err
    assert str(path) in err
    code, _, err = run("progress")
    assert code == EXIT_USAGE
    assert str(path) in err
    assert path.read_text(encoding="utf-8") == "[oops"


def test_python_m_loop_task(tmp_path: Path) -> None:
    """``python -m loop task ...`` works end to end through the real command line."""
    tasks_file = tmp_path / "t.json"
    base = [sys.executable, "-m", "loop", "task"]
    made = subprocess.run(
        [*base, "create", "Root", "--json", "--tasks-file", str(tasks_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    rid = json.loads(made.stdout)["task"]["id"]
    got = subprocess.run(
        [*base, "progress", "--json", "--tasks-file", str(tasks_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["next_task_id"] == rid


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["task", "create", "x", "--order", "5x"], "argument --order: invalid int value: '5x'"),
        (["theme", "heartbeat", "--bogus"], "unrecognized arguments: --bogus"),
        (["experience", "bogus"], "invalid choice: 'bogus'"),
    ],
)
def test_a_tool_commands_bad_arguments_say_their_code(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    """Arguments the command line refuses are refused as a tool call is: `error:
    usage_error: ...` (exit 2) and, with --json, the structured error on stdout."""
    for as_json in (False, True):
        res = subprocess.run(
            [sys.executable, "-m", "loop", *argv, *(["--json"] if as_json else [])],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
        assert res.returncode == EXIT_USAGE
        assert res.stderr.startswith("error: usage_error: ") and says in res.stderr, res.stderr
        if as_json:
            error = json.loads(res.stdout)["error"]
            assert error["code"] == "usage_error" and says in error["message"]
        else:
            assert res.stdout == ""


@pytest.mark.parametrize(
    ("argv", "field", "where"),
    [
        (["create", "A", "--name", "B"], "name", "the NAME argument and --name"),
        (["create", "--input", '{"name": "A", "order": 1}', "--order", "2"], "order",
         "--input and --order"),
        (["create", "--input", '{"name": "A", "order": 1}', "--order", "1", "--name", "B"],
         "name", "--input and --name"),
        (["delete", "abcd", "--input", '{"cascade": 1}', "--cascade"], "cascade",
         "--input and --cascade"),  # 1 is not true (as the tool's strict check has it)
    ],
)  # fmt: skip
def test_a_field_given_twice_with_different_values_is_a_usage_error(
    run: Any, tmp_path: Path, argv: list[str], field: str, where: str
) -> None:
    """A flag or an argument never silently replaces the same field in --input (nor one
    another): different values are refused naming the field, and nothing is written."""
    code, out, err = run(*argv)
    assert code == EXIT_USAGE and out == ""
    assert err == (
        f"error: usage_error: {field} is given twice with different values ({where}): "
        "give it once, not both\n"
    )
    assert not (tmp_path / "tasks.json").exists()


def test_a_field_given_twice_with_the_same_value_is_taken(run: Any) -> None:
    """The same value in --input and as a flag (or an argument) is no conflict."""
    argv = ("create", "A", "--input", '{"name": "A", "order": 3}', "--order", "3", "--json")
    code, out, _ = run(*argv)
    assert code == EXIT_OK
    assert (json.loads(out)["task"]["name"], json.loads(out)["task"]["order"]) == ("A", 3)


def test_under_json_the_error_has_one_message(run: Any) -> None:
    """The structured error on stdout and the line on stderr carry the same message,
    worded for the command line (the command, not the tool's MCP name)."""
    code, out, err = run("create", "--input", '{"name": 5}', "--json")
    assert code == EXIT_USAGE
    error = json.loads(out)["error"]
    assert err == f"error: invalid_input: {error['message']}\n"
    assert error["message"].startswith("invalid arguments for `loop task create`: name: ")
