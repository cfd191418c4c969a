"""The theme tools through the registry's Tool.run: success and error paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loop.errors import LoopError, ToolError
from loop.themes import Operations, ThemeService
from loop.themes.tools import TOOLS
from loop.tools.base import ToolContext

from .conftest import FaultyOps, beat, snapshot

BY_NAME = {t.name: t for t in TOOLS}


def run(root: Path, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a theme tool as the CLI, MCP and bus do; return its JSON output."""
    ctx = ToolContext(root=root.parent, workspace=root)
    return BY_NAME[name].run(ctx, args or {}).model_dump(mode="json")


def error(root: Path, name: str, args: dict[str, Any] | None = None) -> ToolError:
    """Call a tool that must fail; return its ToolError."""
    with pytest.raises(ToolError) as info:
        run(root, name, args)
    return info.value


START = {
    "targetFilename": "001_theme.md",
    "themeName": "Study the bus",
    "themeDirectoryPart": "study_bus",
    "reason": "it is next",
    "activityContent": ["read bus.py"],
}


def test_tool_names_and_domain() -> None:
    """The seed's tool names, all in the themes domain; preview and status are read-only."""
    assert set(BY_NAME) == {
        "preview_next_theme",
        "start_theme",
        "end_theme",
        "check_and_process_item",
        "get_theme_status",
    }
    assert {t.domain for t in TOOLS} == {"themes"}
    assert BY_NAME["preview_next_theme"].read_only
    assert not BY_NAME["start_theme"].read_only


def test_preview_is_read_only_and_picks_the_first_by_name(root: Path) -> None:
    """Preview returns the first candidate by name and changes nothing, however often it
    runs."""
    before = snapshot(root)
    for _ in range(3):
        out = run(root, "preview_next_theme")
    assert out["found"] is True
    assert out["filename"] == "001_theme.md"
    assert out["content"] == "# Study the bus\nread bus.py\n"
    assert out["remaining"] == 1
    assert snapshot(root) == before


def test_preview_and_feedback_go_by_name_not_by_file_date(root: Path) -> None:
    """The first name wins, as in the original server, even when a later name is the
    older file: the docs say "first by name", not "oldest"."""
    for box in ("themebox", "feedbackbox"):
        (root / box / "b_older_file.md").write_text("b\n")
        (root / box / "a_newer_file.md").write_text("a\n")
        os.utime(root / box / "b_older_file.md", (1_000_000_000, 1_000_000_000))
    (root / "themebox" / "001_theme.md").unlink()
    (root / "themebox" / "002_other.md").unlink()
    assert run(root, "preview_next_theme")["filename"] == "a_newer_file.md"
    taken = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert taken["filename"] == "a_newer_file.md"


def test_preview_without_candidates(tmp_path: Path) -> None:
    """No themebox (or only drafts) means 'no theme to process', and nothing is created."""
    out = run(tmp_path / "w", "preview_next_theme")
    assert out["found"] is False
    assert "no theme to process" in out["message"]
    assert not (tmp_path / "w").exists()


def test_start_theme_success(root: Path) -> None:
    """A start writes the history, creates the directory and marks the file processed."""
    out = run(root, "start_theme", START)
    hb = "20250801120000"
    assert out["themeStartId"] == hb
    assert out["historyFile"] == f"artifacts/theme_histories/{hb}_start_study_bus.md"
    assert out["themeDirectory"] == f"artifacts/{hb}_study_bus"
    assert (root / out["themeDirectory"] / "histories").is_dir()
    assert (root / "themebox" / "processed.001_theme.md").is_file()
    assert not (root / "themebox" / "001_theme.md").exists()
    history = (root / out["historyFile"]).read_text()
    assert "# Theme start: Study the bus" in history
    assert f"**THEME_START_ID**: {hb}" in history
    assert out["warnings"] == []
    assert not (root / "stats" / "start_theme.intent.json").exists()


def test_start_without_target_is_a_self_invented_theme(root: Path) -> None:
    """Without targetFilename nothing in themebox changes."""
    before = {p.name for p in (root / "themebox").iterdir()}
    out = run(root, "start_theme", {k: v for k, v in START.items() if k != "targetFilename"})
    assert out["processedFile"] is None
    assert {p.name for p in (root / "themebox").iterdir()} == before


@pytest.mark.parametrize("key", ["target_filename", "targetFilename"])
def test_start_takes_the_seeds_target_filename_or_its_camel_case_alias(
    root: Path, key: str
) -> None:
    """The seed names the parameter target_filename; the original's later targetFilename
    is accepted too, for the same file."""
    args = {k: v for k, v in START.items() if k != "targetFilename"}
    out = run(root, "start_theme", {**args, key: "001_theme.md"})
    assert out["processedFile"] == "themebox/processed.001_theme.md"


def test_start_refuses_both_target_names_at_once(root: Path) -> None:
    """Both names in one call is ambiguous: invalid_input, and nothing changes."""
    before = snapshot(root)
    both = {**START, "target_filename": "002_other.md"}
    err = error(root, "start_theme", both)
    assert err.code == "invalid_input"
    assert "target_filename or targetFilename" in err.message
    assert snapshot(root) == before


def test_preview_points_to_the_seeds_parameter_name(root: Path) -> None:
    """The preview tells the agent to call start_theme with target_filename."""
    out = run(root, "preview_next_theme")
    assert 'target_filename "001_theme.md"' in out["message"]
    schema = BY_NAME["start_theme"].input_model.model_json_schema(by_alias=True)
    assert "target_filename" in schema["properties"]


def test_start_sanitises_with_warning(root: Path) -> None:
    """A directory part outside [a-z0-9_] is sanitised and the reply warns."""
    out = run(root, "start_theme", {**START, "themeDirectoryPart": "AI研究テーマ"})
    assert out["themeDirectoryPart"] == "ai_"
    assert out["warnings"] and "'ai_'" in out["warnings"][0]
    assert "warning:" in out["message"]


@pytest.mark.parametrize(
    ("target", "code"),
    [("missing.md", "theme_file_not_found"), ("processed.x.md", "theme_already_processed")],
)
def test_start_stage1_errors(root: Path, target: str, code: str) -> None:
    """Stage 1: a missing or processed target fails and changes nothing."""
    (root / "themebox" / "processed.x.md").write_text("done\n")
    before = snapshot(root)
    err = error(root, "start_theme", {**START, "targetFilename": target})
    assert err.code == code
    assert "stage 1/5" in err.message
    assert snapshot(root) == before


def _two_faults(forward: str, cleanup: str) -> FaultyOps:
    """A stage fails (``forward``), then the clean-up step ``cleanup`` fails too."""

    class TwoFaults(FaultyOps):
        def _tick(self, step: str) -> None:
            if step in (forward, cleanup):
                raise OSError(5, f"injected fault in {step}")

    return TwoFaults()


def _link_target(root: Path) -> None:
    (root / "themebox" / "001_theme.md").unlink()
    (root / "themebox" / "001_theme.md").symlink_to(root.parent / "elsewhere.md")


def _histories_a_file(root: Path) -> None:
    (root / "artifacts" / "theme_histories").rmdir()
    (root / "artifacts" / "theme_histories").write_text("not a folder\n")


def _started(root: Path) -> None:
    run(root, "start_theme", {**START, "targetFilename": "002_other.md", "themeDirectoryPart": "o"})


SUB = {"parentThemeStartId": "20240101000000", "parentThemeDirectoryPart": "ghost"}
STAGE_ERRORS: list[tuple[str, Any, Operations | None, dict[str, Any], str, int]] = [
    ("missing", None, None, {"targetFilename": "missing.md"}, "theme_file_not_found", 1),
    ("processed", None, None, {"targetFilename": "processed.x.md"}, "theme_already_processed", 1),
    ("link", _link_target, None, {}, "invalid_path", 1),
    ("cooldown", _started, None, {}, "cooldown", 2),
    ("histories", _histories_a_file, None, {}, "store_error", 2),
    ("intent", None, FaultyOps("write_intent"), {}, "history_write_failed", 3),
    ("history", None, FaultyOps("write_history"), {}, "history_write_failed", 3),
    ("parent", None, None, SUB, "parent_theme_not_found", 4),
    ("exists", "artifacts/20250801120000_study_bus", None, {}, "theme_directory_exists", 4),
    ("mkdir", None, FaultyOps("make_dir"), {}, "theme_directory_failed", 4),
    ("rename", None, FaultyOps("mark_processed"), {}, "mark_processed_failed", 5),
    ("cleanup", None, _two_faults("mark_processed", "remove_dir"), {}, "cleanup_failed", 5),
]


@pytest.mark.parametrize(
    ("prepare", "ops", "overrides", "code", "stage"),
    [row[1:] for row in STAGE_ERRORS],
    ids=[row[0] for row in STAGE_ERRORS],
)
def test_every_start_error_names_its_stage_in_details(  # noqa: PLR0917 - one per field
    root: Path,
    prepare: Any,
    ops: Operations | None,
    overrides: dict[str, Any],
    code: str,
    stage: int,
) -> None:
    """Every error start_theme raises at one of its five stages carries details.stage
    (an int, 1-5) and details.stageName, with the keys it had before (the cooldown's
    heartbeatId and existing, the cause and manualCheck of stages 3-5)."""
    (root / "themebox" / "processed.x.md").write_text("done\n")
    if isinstance(prepare, str):
        (root / prepare).mkdir()
    elif prepare is not None:
        prepare(root)
    ctx = ToolContext(root=root.parent, workspace=root)
    if ops is not None:
        ctx.state["themes"] = ops
    with pytest.raises(LoopError) as info:
        BY_NAME["start_theme"].run(ctx, {**START, **overrides})
    err = info.value.to_dict()["error"]
    assert err["code"] == code
    assert err["details"]["stage"] == stage and type(err["details"]["stage"]) is int
    stage_name = err["details"]["stageName"]
    assert err["message"].startswith(f"stage {stage}/5 ({stage_name}) failed: ")
    if code == "cooldown":
        assert err["details"]["heartbeatId"] == "20250801120000"
        assert err["details"]["existing"] == "20250801120000_start_o.md"
    if ops is not None:
        assert "injected fault" in err["details"]["cause"]
        assert bool(err["details"]["manualCheck"]) == (code == "cleanup_failed")


def test_end_errors_carry_no_stage(root: Path) -> None:
    """end_theme has no stages: its cooldown keeps only heartbeatId and existing."""
    started = run(root, "start_theme", START)
    err = error(
        root,
        "end_theme",
        {
            "themeStartId": started["themeStartId"],
            "themeDirectoryPart": "study_bus",
            "themeName": "Study the bus",
            "reason": "done",
        },
    )
    assert err.code == "cooldown"
    assert err.details == {
        "heartbeatId": "20250801120000",
        "existing": "20250801120000_start_study_bus.md",
    }


def test_start_stage2_cooldown_same_heartbeat(root: Path) -> None:
    """Stage 2: a second start in the same heartbeat is refused, naming the history."""
    run(root, "start_theme", START)
    before = snapshot(root)
    err = error(
        root,
        "start_theme",
        {**START, "targetFilename": "002_other.md", "themeDirectoryPart": "other"},
    )
    assert err.code == "cooldown"
    assert "stage 2/5" in err.message
    assert "20250801120000_start_study_bus.md" in err.message
    assert snapshot(root) == before


def test_cooldown_across_two_heartbeats_in_the_same_second(root: Path) -> None:
    """Start, end refused at the same beat, end accepted at the next beat of the same second,
    start refused again at that beat, accepted at the one after."""
    started = run(root, "start_theme", START)
    end_args = {
        "themeStartId": started["themeStartId"],
        "themeDirectoryPart": "study_bus",
        "themeName": "Study the bus",
        "reason": "done",
        "achievements": ["notes"],
    }
    assert error(root, "end_theme", end_args).code == "cooldown"
    second = beat(root)  # the same clock second as the start's heartbeat
    assert second == "20250801120001"
    ended = run(root, "end_theme", end_args)
    assert ended["themeEndId"] == second
    assert "later heartbeat" in ended["message"]
    nxt = {**START, "targetFilename": "002_other.md", "themeDirectoryPart": "other"}
    assert error(root, "start_theme", nxt).code == "cooldown"
    beat(root)
    assert run(root, "start_theme", nxt)["themeStartId"] == "20250801120002"


def test_end_theme_errors(root: Path) -> None:
    """End refuses an unknown theme, a second end, and bad IDs."""
    started = run(root, "start_theme", START)
    beat(root)
    args = {
        "themeStartId": started["themeStartId"],
        "themeDirectoryPart": "study_bus",
        "themeName": "n",
        "reason": "r",
    }
    assert (
        error(root, "end_theme", {**args, "themeDirectoryPart": "nope"}).code == "theme_not_started"
    )
    run(root, "end_theme", args)
    beat(root)
    assert error(root, "end_theme", args).code == "theme_already_ended"
    assert error(root, "end_theme", {**args, "themeStartId": "2025"}).code == "invalid_input"


def test_subthemes_start_end_and_status(root: Path) -> None:
    """A subtheme lives under its parent; the parent cannot end while it is active."""
    parent = run(root, "start_theme", START)
    beat(root)
    sub_args = {
        "themeName": "Sub",
        "themeDirectoryPart": "sub",
        "reason": "split",
        "parentThemeStartId": parent["themeStartId"],
        "parentThemeDirectoryPart": "study_bus",
    }
    sub = run(root, "start_theme", sub_args)
    assert sub["themeDirectory"] == (
        f"artifacts/{parent['themeStartId']}_study_bus/subthemes/{sub['themeStartId']}_sub"
    )
    status = run(root, "get_theme_status")
    assert [t["themeDirectoryPart"] for t in status["activeThemes"]] == ["study_bus", "sub"]
    assert status["activeThemes"][1]["parentThemeDirectoryPart"] == "study_bus"
    beat(root)
    end_parent = {
        "themeStartId": parent["themeStartId"],
        "themeDirectoryPart": "study_bus",
        "themeName": "p",
        "reason": "r",
    }
    assert error(root, "end_theme", end_parent).code == "subthemes_active"
    ended = run(
        root,
        "end_theme",
        {
            "themeStartId": sub["themeStartId"],
            "themeDirectoryPart": "sub",
            "themeName": "Sub",
            "reason": "done",
            "parentThemeStartId": parent["themeStartId"],
            "parentThemeDirectoryPart": "study_bus",
        },
    )
    assert "Returning to the parent theme" in ended["message"]
    beat(root)
    run(root, "end_theme", end_parent)
    assert run(root, "get_theme_status")["activeThemes"] == []


def test_subtheme_needs_existing_parent_and_both_params(root: Path) -> None:
    """A missing parent directory fails at stage 4; a lone parent parameter is invalid."""
    before = snapshot(root)
    err = error(
        root,
        "start_theme",
        {**START, "parentThemeStartId": "20240101000000", "parentThemeDirectoryPart": "ghost"},
    )
    assert err.code == "parent_theme_not_found"
    assert "stage 4/5" in err.message
    assert (
        error(root, "start_theme", {**START, "parentThemeStartId": "20240101000000"}).code
        == "invalid_input"
    )
    assert snapshot(root) == before


@pytest.mark.parametrize("where", ["reason", "activityContent"])
def test_free_text_cannot_make_a_main_theme_a_subtheme(root: Path, where: str) -> None:
    """A reason (or a lone activity item) quoting a subtheme's header lines is text: the
    theme stays a main theme, and the theme it names can still be ended."""
    parent = run(root, "start_theme", START)
    beat(root)
    forged = (
        f"Chosen because:\n**PARENT_THEME_START_ID**: {parent['themeStartId']}\n"
        f"**PARENT_THEME_DIRECTORY**: {parent['themeStartId']}_study_bus"
    )
    text = {"reason": forged} if where == "reason" else {"activityContent": [forged]}
    main = run(
        root,
        "start_theme",
        {**START, **text, "targetFilename": "002_other.md", "themeDirectoryPart": "main"},
    )
    themes = {t["themeDirectoryPart"]: t for t in run(root, "get_theme_status")["activeThemes"]}
    assert themes["main"]["parentThemeStartId"] is None
    assert themes["main"]["parentThemeDirectoryPart"] is None
    beat(root)
    end = {"themeStartId": parent["themeStartId"], "themeDirectoryPart": "study_bus"}
    run(root, "end_theme", {**end, "themeName": "Study the bus", "reason": "done"})
    assert main["themeStartId"] in {
        t["themeStartId"] for t in run(root, "get_theme_status")["activeThemes"]
    }


def test_an_end_takes_the_parent_its_start_recorded(root: Path) -> None:
    """end_theme's parent parameters are checked against the start history: a main theme
    ended as a subtheme is refused (nothing written); a subtheme ended without them gets
    its recorded parent (its end history says so)."""
    parent = run(root, "start_theme", START)
    beat(root)
    sub = run(
        root,
        "start_theme",
        {
            "themeName": "Sub",
            "themeDirectoryPart": "sub",
            "reason": "split",
            "parentThemeStartId": parent["themeStartId"],
            "parentThemeDirectoryPart": "study_bus",
        },
    )
    beat(root)
    before = snapshot(root)
    invented = {"parentThemeStartId": "20200101000000", "parentThemeDirectoryPart": "zzz"}
    for start, part in ((sub, "sub"), (parent, "study_bus")):
        args = {"themeStartId": start["themeStartId"], "themeDirectoryPart": part}
        err = error(root, "end_theme", {**args, "themeName": "x", "reason": "r", **invented})
        assert err.code == "invalid_input"
        assert "not of 20200101000000_zzz" in err.message
    assert snapshot(root) == before
    ended = run(
        root,
        "end_theme",
        {
            "themeStartId": sub["themeStartId"],
            "themeDirectoryPart": "sub",
            "themeName": "Sub",
            "reason": "done",
        },
    )
    assert ended["parentThemeStartId"] == parent["themeStartId"]
    assert f"Returning to the parent theme {parent['themeStartId']}_study_bus" in ended["message"]
    history = (root / ended["historyFile"]).read_text()
    assert history.startswith("# Subtheme end: Sub\n")
    assert f"**PARENT_THEME_START_ID**: {parent['themeStartId']}" in history


def test_a_subtheme_never_starts_under_an_ended_parent(root: Path) -> None:
    """Once the parent has an end history, a subtheme under it is refused at stage 4."""
    parent = run(root, "start_theme", START)
    beat(root)
    end = {"themeStartId": parent["themeStartId"], "themeDirectoryPart": "study_bus"}
    run(root, "end_theme", {**end, "themeName": "Study the bus", "reason": "done"})
    beat(root)
    before = snapshot(root)
    err = error(
        root,
        "start_theme",
        {
            "themeName": "Late",
            "themeDirectoryPart": "late",
            "reason": "r",
            "parentThemeStartId": parent["themeStartId"],
            "parentThemeDirectoryPart": "study_bus",
        },
    )
    assert err.code == "parent_theme_not_found"
    assert err.message.startswith("stage 4/5 (theme directory) failed: ")
    assert "has ended" in err.message
    assert snapshot(root) == before


def test_start_never_touches_a_pre_existing_theme_directory(root: Path) -> None:
    """A theme directory that already exists is refused and left exactly as it was."""
    existing = root / "artifacts" / "20250801120000_study_bus"
    existing.mkdir()
    (existing / "keep.md").write_text("precious\n")
    before = snapshot(root)
    err = error(root, "start_theme", START)
    assert err.code == "theme_directory_exists"
    assert snapshot(root) == before


def test_no_heartbeat(tmp_path: Path) -> None:
    """Start and end need a heartbeat; nothing is created without one."""
    ws = tmp_path / "w"
    (ws / "themebox").mkdir(parents=True)
    (ws / "themebox" / "001_theme.md").write_text("x")
    before = snapshot(ws)
    assert error(ws, "start_theme", START).code == "no_heartbeat"
    assert (
        error(
            ws,
            "end_theme",
            {
                "themeStartId": "20250101000000",
                "themeDirectoryPart": "a",
                "themeName": "a",
                "reason": "r",
            },
        ).code
        == "no_heartbeat"
    )
    assert snapshot(ws) == before


def test_feedback_oldest_first_and_marked_processed(root: Path) -> None:
    """Items come oldest first, are renamed processed., and drafts are skipped."""
    fb = root / "feedbackbox"
    (fb / "b.md").write_text("second\n")
    (fb / "a.md").write_text("first\n")
    (fb / "draft.c.md").write_text("draft\n")
    out = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert (out["filename"], out["content"], out["remaining"]) == ("a.md", "first\n", 1)
    assert (fb / "processed.a.md").is_file()
    assert run(root, "check_and_process_item", {"type": "feedbackbox"})["filename"] == "b.md"
    last = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert last["found"] is False
    assert "no feedback" in last["message"]


def test_feedback_creates_a_missing_feedbackbox(tmp_path: Path) -> None:
    """Without a feedbackbox folder the tool creates it and reports nothing to process."""
    ws = tmp_path / "w"
    out = run(ws, "check_and_process_item", {"type": "feedbackbox"})
    assert (out["found"], out["filename"]) == (False, None)
    assert "created the empty feedbackbox folder" in out["message"]
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*")) == ["feedbackbox"]


def test_heartbeat_interrupt_check_creates_no_feedbackbox(tmp_path: Path) -> None:
    """The loop's own check for interrupt items at each heartbeat creates nothing."""
    out = ThemeService(tmp_path / "w").process_feedback("feedbackbox", interrupts_only=True)
    assert out.found is False
    assert not (tmp_path / "w").exists()


def test_feedback_other_type_points_to_theme_tools(root: Path) -> None:
    """type 'themebox' (or anything else) is an error naming the theme tools."""
    err = error(root, "check_and_process_item", {"type": "themebox"})
    assert err.code == "unsupported_type"
    assert "preview_next_theme" in err.message and "start_theme" in err.message


def test_status_reports_counts_and_cooldown(root: Path) -> None:
    """Status derives counts, the heartbeat and the cooldown from the files."""
    (root / "feedbackbox" / "a.md").write_text("x")
    out = run(root, "get_theme_status")
    assert out["heartbeatId"] == "20250801120000"
    assert (out["themeCandidates"], out["unprocessedFeedback"], out["cooldown"]) == (2, 1, False)
    run(root, "start_theme", START)
    assert run(root, "get_theme_status")["cooldown"] is True


LONG = "0" * 240 + ".md"  # 243 bytes, over the 200 of a target_filename; first by name


def test_an_item_the_tools_cannot_take_is_skipped_and_named_not_offered(root: Path) -> None:
    """A themebox name start_theme refuses (over 200 bytes) stood first for good and hid
    every candidate behind it; the feedbackbox failed on such a name at every call. Now
    it is skipped: the reply names it and says why, and the next item is offered."""
    (root / "themebox" / LONG).write_text("too long\n")
    preview = run(root, "preview_next_theme")
    assert (preview["filename"], preview["remaining"]) == ("001_theme.md", 1)
    assert preview["skipped"] == [
        {
            "file": f"themebox/{LONG}",
            "reason": "its name is 243 bytes, over the 200 the tools take; rename it",
        }
    ]
    assert f"skipped themebox/{LONG}" in preview["message"]
    started = run(root, "start_theme", START)
    assert started["processedFile"] == "themebox/processed.001_theme.md"
    fb = root / "feedbackbox"
    (fb / ("n" * 250 + ".md")).write_text("far too long\n")
    (fb / "z.md").write_text("deliver me\n")
    status = run(root, "get_theme_status")
    assert (status["themeCandidates"], status["unprocessedFeedback"]) == (1, 1)
    assert [s["file"] for s in status["skipped"]] == [
        f"themebox/{LONG}",
        f"feedbackbox/{'n' * 250}.md",
    ]
    item = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert (item["filename"], item["content"]) == ("z.md", "deliver me\n")
    assert [s["file"] for s in item["skipped"]] == [f"feedbackbox/{'n' * 250}.md"]
    again = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert again["found"] is False
    assert len(again["skipped"]) == 1 and "skipped feedbackbox/nnn" in again["message"]
    assert (fb / ("n" * 250 + ".md")).read_text() == "far too long\n"  # left for the user


def test_a_reused_name_takes_a_free_processed_name_and_keeps_both(root: Path) -> None:
    """``a.md`` beside ``processed.a.md`` failed at stage 5 on every try (File exists)
    while preview kept offering it; the feedbackbox failed the same way. The item now
    becomes the first free ``processed.a.<n>.md``, the earlier file is kept, and the
    reply says so."""
    box = root / "themebox"
    (box / "001_theme.md").write_text("again\n")
    (box / "processed.001_theme.md").write_text("the first time\n")
    (box / "processed.001_theme.2.md").write_text("the second time\n")
    out = run(root, "start_theme", START)
    assert out["processedFile"] == "themebox/processed.001_theme.3.md"
    assert (box / "processed.001_theme.3.md").read_text() == "again\n"
    assert (box / "processed.001_theme.md").read_text() == "the first time\n"
    assert (box / "processed.001_theme.2.md").read_text() == "the second time\n"
    assert any("processed.001_theme.md already exists" in w for w in out["warnings"])
    assert "processed.001_theme.3.md" in out["message"]
    assert run(root, "preview_next_theme")["filename"] == "002_other.md"
    fb = root / "feedbackbox"
    (fb / "note.md").write_text("new note\n")
    (fb / "processed.note.md").write_text("old note\n")
    (fb / "z.md").write_text("z\n")
    item = run(root, "check_and_process_item", {"type": "feedbackbox"})
    assert (item["filename"], item["processedFile"]) == (
        "note.md",
        "feedbackbox/processed.note.2.md",
    )
    assert item["warnings"] and "warning: feedbackbox/processed.note.md" in item["message"]
    assert (fb / "processed.note.md").read_text() == "old note\n"
    assert (fb / "processed.note.2.md").read_text() == "new note\n"
    assert run(root, "check_and_process_item", {"type": "feedbackbox"})["filename"] == "z.md"


def test_an_interrupted_start_under_a_numbered_name_is_undone(root: Path) -> None:
    """The intent records the numbered processed name, and the repair renames it back."""
    box = root / "themebox"
    (box / "processed.001_theme.md").write_text("the first time\n")
    ctx = ToolContext(
        root=root.parent, workspace=root, state={"themes": FaultyOps("remove_intent")}
    )
    with pytest.raises(ToolError) as failed:
        BY_NAME["start_theme"].run(ctx, START)
    assert failed.value.code == "cleanup_failed"
    assert (box / "processed.001_theme.2.md").is_file()
    repaired = run(root, "check_and_process_item", {"type": "feedbackbox"})["repaired"]
    assert repaired and "themebox/001_theme.md is unprocessed again" in repaired[0]
    assert (box / "001_theme.md").is_file()
    assert not (box / "processed.001_theme.2.md").exists()
    assert (box / "processed.001_theme.md").read_text() == "the first time\n"
