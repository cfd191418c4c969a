"""``python -m loop theme ...`` through argparse: register, parse, call the handler."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import structlog

from loop.commands.theme import register


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="loop")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    # Logs are configured by the real entry point (stderr); here they are captured.
    with structlog.testing.capture_logs():
        code: int = args.handler(args)
    return code


@pytest.fixture
def ws(root: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run from the workspace's parent (no loop.toml there); return --workspace."""
    monkeypatch.chdir(root.parent)
    monkeypatch.delenv("LOOP_WORKSPACE", raising=False)
    return str(root)


def test_preview_start_status_end_feedback(ws: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole flow from the command line, with readable and JSON output."""
    assert _main(["theme", "preview", "--workspace", ws]) == 0
    out = capsys.readouterr().out
    assert "001_theme.md" in out and "# Study the bus" in out

    assert (
        _main(
            [
                "theme",
                "start",
                "001_theme.md",
                "--theme-name",
                "Study the bus",
                "--theme-directory-part",
                "study_bus",
                "--reason",
                "next",
                "--activity-content",
                '["read"]',
                "--workspace",
                ws,
            ]
        )
        == 0
    )
    assert "THEME_START_ID 20250801120000" in capsys.readouterr().out

    assert _main(["theme", "status", "--workspace", ws, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["activeThemes"][0]["themeName"] == "Study the bus"

    assert _main(["theme", "heartbeat", "--workspace", ws]) == 0
    new_id = capsys.readouterr().out.strip()
    assert len(new_id) == 14 and new_id > "20250801120000"

    assert (
        _main(
            [
                "theme",
                "end",
                "--theme-start-id",
                "20250801120000",
                "--theme-directory-part",
                "study_bus",
                "--theme-name",
                "Study the bus",
                "--reason",
                "done",
                "--workspace",
                ws,
            ]
        )
        == 0
    )
    assert "later heartbeat" in capsys.readouterr().out

    (Path(ws) / "feedbackbox" / "note.md").write_text("please test more\n")
    assert _main(["theme", "feedback", "--workspace", ws]) == 0
    assert "please test more" in capsys.readouterr().out


def test_errors_exit_2_with_code(ws: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A tool error prints its code on stderr and exits 2."""
    assert (
        _main(
            [
                "theme",
                "start",
                "missing.md",
                "--theme-name",
                "x",
                "--theme-directory-part",
                "x",
                "--reason",
                "r",
                "--workspace",
                ws,
            ]
        )
        == 2
    )
    assert "theme_file_not_found" in capsys.readouterr().err
    assert _main(["theme", "feedback", "themebox", "--workspace", ws]) == 2
    assert "unsupported_type" in capsys.readouterr().err


def test_start_errors_show_their_stage_with_json(
    ws: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`theme start ... --json` prints the structured error with details.stage (an int)."""
    start = ["theme", "start", "--theme-name", "T", "--reason", "r", "--json", "--workspace", ws]
    assert _main([*start, "missing.md", "--theme-directory-part", "t"]) == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["code"] == "theme_file_not_found"
    assert error["details"] == {"stage": 1, "stageName": "target"}
    assert captured.err.startswith("error: theme_file_not_found: stage 1/5 (target) failed")
    assert _main([*start, "001_theme.md", "--theme-directory-part", "t"]) == 0
    capsys.readouterr()
    assert _main([*start, "002_other.md", "--theme-directory-part", "u"]) == 2
    details = json.loads(capsys.readouterr().out)["error"]["details"]
    assert details == {
        "stage": 2,
        "stageName": "cooldown",
        "heartbeatId": "20250801120000",
        "existing": "20250801120000_start_t.md",
    }


@pytest.mark.parametrize("held", ["junk", "99991231235959"])
def test_heartbeat_replaces_a_file_it_cannot_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], held: str
) -> None:
    """`theme heartbeat` over a corrupt heartbeat file (or the last ID there is) writes the
    next ID in its place and exits 0 (no store_error, no traceback), as the guide says to
    do for invalid_heartbeat; `theme start` then runs again."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOOP_WORKSPACE", raising=False)
    (tmp_path / "w" / "stats").mkdir(parents=True)
    heartbeat_file = tmp_path / "w" / "stats" / "current_heartbeat_id.txt"
    heartbeat_file.write_text(held)
    assert _main(["theme", "heartbeat", "--workspace", "w"]) == 0
    new_id = capsys.readouterr().out.strip()
    assert len(new_id) == 14 and new_id != held
    assert heartbeat_file.read_text() == new_id + "\n"
    start = ["theme", "start", "--theme-name", "T", "--theme-directory-part", "t"]
    assert _main([*start, "--reason", "r", "--workspace", "w"]) == 0
    assert f"THEME_START_ID {new_id}" in capsys.readouterr().out


def test_heartbeat_leaves_the_interrupt_items_to_the_loop(
    ws: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`theme heartbeat` is the heartbeat tool without its interrupts: it prints the new
    ID and leaves an interrupt item for the loop, which turns it into an event."""
    item = Path(ws) / "feedbackbox" / "interrupt.stop_now.md"
    item.write_text("stop and reflect\n", encoding="utf-8")
    assert _main(["theme", "heartbeat", "--workspace", ws]) == 0
    out = capsys.readouterr().out
    assert len(out.strip()) == 14 and out.strip().isdigit()
    assert item.is_file()


def test_heartbeat_error_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link at the heartbeat file is refused, not followed: one line, exit 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w" / "stats").mkdir(parents=True)
    (tmp_path / "w" / "stats" / "current_heartbeat_id.txt").symlink_to(tmp_path / "elsewhere")
    assert _main(["theme", "heartbeat", "--workspace", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "invalid_path" in err and "current_heartbeat_id.txt" in err
    assert not (tmp_path / "elsewhere").exists()


def test_subtheme_ids_are_taken_as_text(ws: str, capsys: pytest.CaptureFixture[str]) -> None:
    """14-digit IDs on the command line stay strings (not JSON numbers) and start a subtheme."""
    assert (
        _main(
            [
                "theme",
                "start",
                "--theme-name",
                "Sub",
                "--theme-directory-part",
                "sub",
                "--reason",
                "split",
                "--parent-theme-start-id",
                "20250101000000",
                "--parent-theme-directory-part",
                "old",
                "--workspace",
                ws,
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["themeDirectory"] == "artifacts/20250101000000_old/subthemes/20250801120000_sub"
