"""The ``experience`` CLI group and the ``export`` command, run through argparse."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from loop.commands.experience import register, register_export
from loop.commands.tools import render_fields
from loop.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tests.experience.helpers import SUMMARY, conversations


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Run in tmp_path, and keep logs off stdout."""
    monkeypatch.chdir(tmp_path)
    for name in ("LOOP_EXPERIENCES_DIR", "LOOP_SESSION_DIR", "LOOP_EVENTS_FILE"):
        monkeypatch.delenv(name, raising=False)
    with structlog.testing.capture_logs():
        yield


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="loop")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    register_export(sub)
    args = parser.parse_args(list(argv))
    result: int = args.handler(args)
    return result


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert _run(*argv, "--json") == EXIT_OK
    return json.loads(capsys.readouterr().out)


def test_export_flow_through_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """init, conversations, thoughts, finalize, status, list and validate from the CLI."""
    out = _json(
        capsys,
        "experience",
        "init",
        "--session-id",
        "cli1",
        "--summary",
        json.dumps(SUMMARY),
        "--metadata",
        '{"platform": "cli"}',
    )
    assert out["directory_path"] == str(tmp_path / ".loop/experiences/experience_cli1")
    out = _json(
        capsys,
        "experience",
        "conversations",
        "cli1",
        "--batch-number",
        "1",
        "--conversations-batch",
        json.dumps(conversations(2)),
    )
    assert out["processed_count"] == 2
    batch = tmp_path / "b2.json"
    batch.write_text(
        json.dumps(
            {"session_id": "cli1", "batch_number": 2, "conversations_batch": conversations(1)}
        )
    )
    assert (
        _json(capsys, "experience", "conversations", "--input", f"@{batch}")["next_batch_number"]
        == 3
    )
    _json(capsys, "experience", "thoughts", "cli1", "--thoughts", '{"insights": []}')
    assert _run("experience", "finalize", "cli1") == EXIT_OK
    assert "3 conversations" in capsys.readouterr().out
    assert _run("experience", "status", "cli1") == EXIT_OK
    assert capsys.readouterr().out.startswith("cli1: completed\n")
    listed = _json(capsys, "experience", "list", "--filters", '{"min_conversations": 3}')
    [summary] = listed["directory_summaries"]
    assert summary["directory"] == str(tmp_path / ".loop/experiences/experience_cli1")
    assert _run("experience", "validate", summary["directory"]) == EXIT_OK
    assert ": valid" in capsys.readouterr().out


def test_validate_exits_1_when_the_experience_is_invalid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """validate: 0 for a valid experience (warnings allowed), 1 for an invalid one, with
    the report printed as text or JSON all the same; 2 when the call itself is refused."""
    summary = json.dumps(SUMMARY)
    assert _run("experience", "init", "--session-id", "v1", "--summary", summary) == EXIT_OK
    argv = ("experience", "conversations", "v1", "--batch-number", "1")
    assert _run(*argv, "--conversations-batch", json.dumps(conversations(1))) == EXIT_OK
    assert _run("experience", "finalize", "v1") == EXIT_OK  # no thoughts: a warning
    capsys.readouterr()
    folder = tmp_path / ".loop/experiences/experience_v1"
    assert _run("experience", "validate", str(folder)) == EXIT_OK
    assert capsys.readouterr().out.startswith(f"{folder}: valid\n")

    (folder / "conversations_001.json").write_text('{"session_id": "v1" "batch_info": {}}')
    assert _run("experience", "validate", str(folder)) == EXIT_FAILED
    out = capsys.readouterr().out
    assert out.startswith(f"{folder}: INVALID\n")
    assert (
        "  error: conversations_001.json: (file): invalid JSON: Expecting ',' delimiter "
        "at line 1 column 21"
    ) in out
    assert _run("experience", "validate", str(folder), "--json") == EXIT_FAILED
    assert json.loads(capsys.readouterr().out)["valid"] is False
    assert _run("experience", "validate", str(tmp_path / "missing")) == EXIT_USAGE
    assert "error: directory_not_found:" in capsys.readouterr().err


def test_every_step_prints_text_by_default_and_json_only_with_the_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """init, conversations and thoughts print lines for a person; --json the tool's JSON."""
    summary = json.dumps(SUMMARY)
    assert _run("experience", "init", "--session-id", "t1", "--summary", summary) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "export t1 started"
    assert str(tmp_path / ".loop/experiences/experience_t1") in out
    assert not out.lstrip().startswith("{")
    batch = json.dumps(conversations(2))
    argv = ("experience", "conversations", "t1", "--batch-number", "1")
    assert _run(*argv, "--conversations-batch", batch) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("wrote 2 conversation(s), ") and "next batch 2" in out
    assert _run("experience", "thoughts", "t1", "--thoughts", '{"insights": []}') == EXIT_OK
    assert capsys.readouterr().out.startswith("wrote " + str(tmp_path))
    again = _json(capsys, "experience", "init", "--session-id", "t1", "--summary", summary)
    assert again["resumed"] is True and again["session_id"] == "t1"


def test_a_result_without_its_own_renderer_prints_as_fields() -> None:
    """The fallback for a person: ``name: value`` lines, never raw JSON."""
    text = render_fields({"success": True, "file_path": "/x", "replaced": False, "n": [1, 2]})
    assert text.splitlines() == ["file path: /x", "replaced: no", "n: 1, 2"]


def test_experiences_dir_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--experiences-dir moves the base folder."""
    out = _json(capsys, "experience", "status", "x1", "--experiences-dir", "store")
    assert out["directory_path"] == str(tmp_path / "store" / "experience_x1")
    assert out["status"] == "not_found"


def test_tool_error_exits_two_with_code(capsys: pytest.CaptureFixture[str]) -> None:
    """A refused call prints error: <code>: <message> on stderr and exits 2."""
    assert (
        _run("experience", "init", "--session-id", "../up", "--summary", json.dumps(SUMMARY))
        == EXIT_USAGE
    )
    assert "error: invalid_session_id:" in capsys.readouterr().err
    assert _run("experience", "validate", "/etc", "--json") == EXIT_USAGE
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["code"] == "path_outside_roots"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("guide",), "# Experience export guide"),
        (("guide", "import"), "# Experience import guide"),
        (("guide", "export", "--lang", "ja"), "体験エクスポートガイド"),
        (("guide", "import", "--lang", "ja"), "同化"),
    ],
)
def test_guide_prints_markdown(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], needle: str
) -> None:
    """guide [export|import] [--lang ja] prints the chosen guide."""
    assert _run("experience", *argv) == EXIT_OK
    assert needle in capsys.readouterr().out


def test_export_command_exports_a_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """export SESSION finds the session by id under --sessions-dir and exports it."""
    session = tmp_path / ".loop" / "sessions" / "run-1"
    session.mkdir(parents=True)
    records = [
        {
            "kind": "session.start",
            "session_id": "run-1",
            "started_at": "2025-01-01T00:00:00Z",
            "config_digest": "sha256:0",
            "starting_event": "task.start",
            "completion_event": "LOOP_COMPLETE",
            "hats": {
                "solo": {"description": "Does it all", "triggers": ["*"], "backend": "scripted"}
            },
            "config": {},
            "version": "0.1.0",
            "config_source": "loop.toml",
            "start_event": {"topic": "task.start", "payload": "go", "source": "loop", "ts": 1.0},
            "ts": 1.0,
        },
        {
            "kind": "iteration.end",
            "iteration": 1,
            "hat": "solo",
            "prompt": "p",
            "output": "o",
            "status": "ok",
            "backend_ok": True,
            "reason": None,
            "events": [],
            "published": [],
            "duration": 0.1,
            "backend": "scripted",
            "ts": 2.0,
            "elapsed": 1.0,
            "cost_usd": None,
        },
    ]
    (session / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = _json(capsys, "export", "run-1")
    assert out["conversations"] == 1
    assert Path(out["manifest_path"]).is_file()
    assert _run("export", "run-1") == EXIT_OK  # for a person: counts, then the folder
    assert capsys.readouterr().out.splitlines() == [
        "exported 1 conversation(s) in 1 batch(es), 0 thought(s) (already exported)",
        f"  {Path(out['directory_path'])}",
    ]
    assert _run("export", "../escape") == EXIT_USAGE
    assert "error:" in capsys.readouterr().err


def test_a_field_given_in_input_and_as_an_argument_must_agree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``conversations s1 --input '{"session_id": "s2", ...}'`` names two sessions: a
    usage error naming the field (exit 2), and s1's batch 1 stays as it was; the same
    value given both ways is taken."""
    summary = json.dumps(SUMMARY)
    for sid in ("s1", "s2"):
        assert _run("experience", "init", "--session-id", sid, "--summary", summary) == EXIT_OK
    batch = tmp_path / ".loop/experiences/experience_s1/conversations_001.json"
    argv = ("experience", "conversations", "s1", "--batch-number", "1")
    assert _run(*argv, "--conversations-batch", json.dumps(conversations(1))) == EXIT_OK
    before = batch.read_bytes()
    capsys.readouterr()
    given = {"batch_number": 1, "conversations_batch": conversations(2)}
    other = json.dumps({"session_id": "s2", **given})
    code = _run("experience", "conversations", "s1", "--input", other, "--json")
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert json.loads(out)["error"] == {
        "code": "usage_error",
        "message": "session_id is given twice with different values (--input and the "
        "SESSION-ID argument): give it once, not both",
    }
    assert err.startswith("error: usage_error: session_id is given twice")
    assert batch.read_bytes() == before
    assert not (tmp_path / ".loop/experiences/experience_s2/conversations_001.json").exists()
    same = json.dumps({"session_id": "s2", **given})
    assert _json(capsys, "experience", "conversations", "s2", "--input", same)["success"]
