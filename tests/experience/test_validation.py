"""validate_experience: good and broken directories at each level, and path rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loop.errors import ToolError
from loop.experience.layout import MAX_DIRECTORY_BYTES, MAX_FILE_BYTES
from loop.tools.base import ToolContext
from tests.experience.helpers import call, conversations, full_export, start


def _validate(ctx: ToolContext, directory: Path | str) -> dict[str, Any]:
    return call(ctx, "validate_experience", directory_path=str(directory))


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _issues(report: dict[str, Any], file: str) -> list[dict[str, Any]]:
    return next(fv["errors"] for fv in report["file_validations"] if fv["file"] == file)


@pytest.fixture
def good(ctx: ToolContext) -> Path:
    """A finalized experience with two batches of three conversations."""
    return full_export(ctx, batches=2, per_batch=3)


def test_good_directory_is_valid(ctx: ToolContext, good: Path) -> None:
    """A finalized export passes every level with no errors or warnings."""
    report = _validate(ctx, good)
    assert report["valid"] and report["manifest_valid"] and report["semantic_valid"]
    assert report["cross_file_valid"]
    assert report["errors"] == [] and report["warnings"] == [] and report["missing_files"] == []
    assert sorted(fv["file"] for fv in report["file_validations"]) == [
        "conversations_001.json",
        "conversations_002.json",
        "manifest.json",
        "thoughts.json",
    ]


def test_relative_path_resolves_against_the_project(ctx: ToolContext, good: Path) -> None:
    """A relative directory_path is taken from the project root."""
    assert _validate(ctx, "exp/experience_s1")["valid"] is True


def test_syntax_error_names_the_file(ctx: ToolContext, good: Path) -> None:
    """Broken JSON is a syntax error of that file with line and column."""
    (good / "conversations_002.json").write_text('{"batch_info": ')
    report = _validate(ctx, good)
    assert not report["valid"] and not report["semantic_valid"]
    [issue] = _issues(report, "conversations_002.json")
    assert issue["level"] == "syntax" and "line 1" in issue["message"]
    assert any(
        e.startswith("conversations_002.json: (file): invalid JSON") for e in report["errors"]
    )


def test_non_utf8_file_is_a_syntax_error(ctx: ToolContext, good: Path) -> None:
    """Bytes that are not UTF-8 are reported, not crashed on."""
    (good / "thoughts.json").write_bytes(b'{"a": "\xff"}')
    [issue] = _issues(_validate(ctx, good), "thoughts.json")
    assert issue["level"] == "syntax" and "UTF-8" in issue["message"]


def test_manifest_schema_errors_point_at_fields(ctx: ToolContext, good: Path) -> None:
    """Wrong types, missing and unknown keys in the manifest name their field."""

    def breaks(m: dict[str, Any]) -> None:
        m["total_conversations"] = "6"
        del m["ai_name"]
        m["files"]["extra"] = 1
        m["created_at"] = "yesterday"

    _edit(good / "manifest.json", breaks)
    report = _validate(ctx, good)
    assert not report["valid"] and not report["manifest_valid"]
    fields = {i["field"]: i for i in _issues(report, "manifest.json")}
    assert {"total_conversations", "ai_name", "files.extra", "created_at"} <= set(fields)
    assert fields["total_conversations"]["value"] == "6"
    assert all(i["level"] == "schema" for i in fields.values())
    assert "manifest.json: ai_name: Field required" in report["errors"]


def test_conversation_schema_error_points_at_the_item(ctx: ToolContext, good: Path) -> None:
    """A conversation without reasoning is reported as conversations.N.reasoning."""
    _edit(good / "conversations_001.json", lambda b: b["conversations"][1].pop("reasoning"))
    report = _validate(ctx, good)
    [issue] = _issues(report, "conversations_001.json")
    assert (issue["field"], issue["level"]) == ("conversations.1.reasoning", "schema")
    assert report["manifest_valid"] and not report["semantic_valid"]


@pytest.mark.parametrize(("content", "message"), [("null", "null"), ("[1]", "JSON object")])
def test_thoughts_must_be_an_object(
    ctx: ToolContext, good: Path, content: str, message: str
) -> None:
    """thoughts.json that is null or not an object is a schema error."""
    (good / "thoughts.json").write_text(content)
    [issue] = _issues(_validate(ctx, good), "thoughts.json")
    assert issue["level"] == "schema" and message in issue["message"]


def test_semantic_batch_number_mismatch(ctx: ToolContext, good: Path) -> None:
    """A batch whose batch_info disagrees with its file name is a semantic error."""
    _edit(good / "conversations_002.json", lambda b: b["batch_info"].update(batch_number=5))
    report = _validate(ctx, good)
    [issue] = _issues(report, "conversations_002.json")
    assert (issue["field"], issue["level"]) == ("batch_info.batch_number", "semantic")
    assert not report["semantic_valid"] and report["manifest_valid"]


def test_semantic_count_mismatch_is_a_warning(ctx: ToolContext, good: Path) -> None:
    """batch_info.count different from the list length warns (the seed's rule)."""
    _edit(good / "conversations_001.json", lambda b: b["batch_info"].update(count=9))
    report = _validate(ctx, good)
    assert report["valid"] is True
    assert (
        "conversations_001.json: batch_info.count is 9 but there are 3 conversations"
        in report["warnings"]
    )


def test_semantic_gap_in_batches(ctx: ToolContext, good: Path) -> None:
    """A batch file after a gap is a semantic error and an unlisted file warns."""
    data = json.loads((good / "conversations_002.json").read_text())
    data["batch_info"]["batch_number"] = 4
    (good / "conversations_004.json").write_text(json.dumps(data))
    report = _validate(ctx, good)
    assert not report["semantic_valid"]
    assert any("missing conversations_003.json" in e for e in report["errors"])
    assert any(
        "conversations_004.json is in the directory but not in files" in w
        for w in report["warnings"]
    )


def test_limits_batch_over_fifty_and_file_over_ten_megabytes(ctx: ToolContext, good: Path) -> None:
    """A hand-made batch of 51 and an 11 MB thoughts file break the limits."""
    _edit(
        good / "conversations_001.json",
        lambda b: b.update(
            conversations=conversations(51), batch_info={"batch_number": 1, "count": 51}
        ),
    )
    (good / "thoughts.json").write_bytes(b" " * (MAX_FILE_BYTES + 1) + b"{}")
    report = _validate(ctx, good)
    batch_issue = _issues(report, "conversations_001.json")[0]
    assert (batch_issue["field"], batch_issue["level"]) == ("conversations", "limits")
    assert _issues(report, "thoughts.json")[0]["level"] == "limits"
    assert not report["valid"]


def test_limits_directory_over_one_hundred_megabytes(ctx: ToolContext, good: Path) -> None:
    """A directory past 100 MB is an error; a stray file is a warning."""
    with (good / "filler.bin").open("wb") as fh:
        fh.truncate(MAX_DIRECTORY_BYTES)
    report = _validate(ctx, good)
    assert not report["valid"] and not report["semantic_valid"]
    assert any("limit is 104857600" in e for e in report["errors"])
    assert "unexpected file filler.bin" in report["warnings"]


def test_cross_file_total_mismatch(ctx: ToolContext, good: Path) -> None:
    """total_conversations that is not the sum of the batches is a warning: the directory
    stays valid, as in the original."""
    _edit(good / "manifest.json", lambda m: m.update(total_conversations=7))
    report = _validate(ctx, good)
    assert report["valid"] and report["cross_file_valid"], report["errors"]
    assert report["manifest_valid"] and report["semantic_valid"]
    assert _issues(report, "manifest.json") == []
    assert "manifest.json: total_conversations says 7 but the batches hold 6" in report["warnings"]


def test_cross_file_missing_files(ctx: ToolContext, good: Path) -> None:
    """Files named in the manifest but absent are listed in missing_files."""
    (good / "thoughts.json").unlink()
    _edit(
        good / "manifest.json",
        lambda m: m["files"]["conversations"].append("conversations_003.json"),
    )
    report = _validate(ctx, good)
    assert sorted(report["missing_files"]) == ["conversations_003.json", "thoughts.json"]
    assert not report["cross_file_valid"] and not report["valid"]


def test_cross_file_bad_names_in_manifest(ctx: ToolContext, good: Path) -> None:
    """A manifest naming a path outside the batch pattern is an error, never opened."""
    _edit(good / "manifest.json", lambda m: m["files"]["conversations"].append("../../x.json"))
    report = _validate(ctx, good)
    [issue] = _issues(report, "manifest.json")
    assert (issue["field"], issue["level"]) == ("files.conversations.2", "cross_file")


def test_cross_file_warnings(ctx: ToolContext, good: Path) -> None:
    """Another session_id, an empty files.thoughts and a leftover summary.json warn only."""
    _edit(
        good / "manifest.json",
        lambda m: m.update(session_id="other", files={**m["files"], "thoughts": ""}),
    )
    (good / "summary.json").write_text("{}")
    report = _validate(ctx, good)
    assert report["valid"] is True
    text = "\n".join(report["warnings"])
    assert "does not match the directory name" in text
    assert "files.thoughts is empty" in text
    assert "summary.json is still present" in text


def test_unfinished_export_is_invalid(ctx: ToolContext) -> None:
    """An export without manifest.json is reported as missing it; its batches are checked."""
    out = start(ctx)
    call(
        ctx,
        "export_experience_conversations",
        session_id="s1",
        batch_number=1,
        conversations_batch=conversations(2),
    )
    report = _validate(ctx, out["directory_path"])
    assert report["missing_files"] == ["manifest.json"]
    assert not report["valid"] and not report["manifest_valid"] and report["semantic_valid"]


@pytest.mark.parametrize("path", ["/etc", "../", "../../tmp", "/"])
def test_paths_outside_the_roots_are_refused(ctx: ToolContext, path: str) -> None:
    """validate_experience refuses directories outside the experiences base and project."""
    with pytest.raises(ToolError) as exc:
        _validate(ctx, path)
    assert exc.value.code == "path_outside_roots"


def test_missing_directory_is_an_error(ctx: ToolContext) -> None:
    """A directory that does not exist is directory_not_found."""
    with pytest.raises(ToolError) as exc:
        _validate(ctx, "exp/experience_none")
    assert exc.value.code == "directory_not_found"


def test_symlink_out_of_the_roots_is_refused(ctx: ToolContext, tmp_path: Path, good: Path) -> None:
    """A symlink inside the project pointing outside it is refused."""
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(ToolError) as exc:
        _validate(ctx, "link")
    assert exc.value.code == "path_outside_roots"
