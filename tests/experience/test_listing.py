"""list_experiences: each filter, skipped directories, and the base_directory rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loop.errors import ToolError
from loop.experience.listing import matches
from loop.experience.models import ExperienceFilters
from loop.experience.schemas import Manifest, ManifestFiles
from loop.tools.base import ToolContext
from tests.experience.helpers import call, full_export, start


def _set_created(directory: Path, created_at: str | None) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    if created_at is None:
        manifest.pop("created_at")
    else:
        manifest["created_at"] = created_at
    path.write_text(json.dumps(manifest))


@pytest.fixture
def three(ctx: ToolContext) -> ToolContext:
    """Three experiences: alpha (2 convs, 2024), beta (6, 2025), gamma (9, no created_at)."""
    a = full_export(
        ctx,
        "alpha",
        batches=1,
        per_batch=2,
        ai_name="Alice(spec reviewer)",
        ai_context="Reviews API specs",
        main_topics=["API design", "naming"],
    )
    b = full_export(
        ctx,
        "beta",
        batches=2,
        per_batch=3,
        ai_name="Bob(test writer)",
        ai_context="Writes property-based tests",
        main_topics=["Hypothesis"],
    )
    c = full_export(
        ctx,
        "gamma",
        batches=3,
        per_batch=3,
        ai_name="Carol(ops helper)",
        ai_context="Keeps CI green",
        main_topics=["CI caching"],
    )
    _set_created(a, "2024-06-01T10:00:00Z")
    _set_created(b, "2025-03-01T10:00:00+00:00")
    _set_created(c, None)
    return ctx


def _names(ctx: ToolContext, **filters: Any) -> list[str]:
    out = call(ctx, "list_experiences", filters=filters)
    return [
        Path(d["directory_path"]).name.removeprefix("experience_")
        for d in out["experience_directories"]
    ]


def test_lists_all_with_summaries(three: ToolContext) -> None:
    """Without filters every finalized experience is listed with a one-line summary; each
    summary's directory is the experience's path, as in experience_directories."""
    out = call(three, "list_experiences")
    base = three.experiences_base
    assert [s["directory"] for s in out["directory_summaries"]] == [
        str(base / "experience_alpha"),
        str(base / "experience_beta"),
        str(base / "experience_gamma"),
    ]
    assert [s["directory"] for s in out["directory_summaries"]] == [
        d["directory_path"] for d in out["experience_directories"]
    ]
    beta = out["directory_summaries"][1]
    assert beta["summary"].startswith("Bob(test writer): ")
    assert beta["file_count"] == 4
    assert out["experience_directories"][1]["total_conversations"] == 6


def test_filter_ai_name_is_case_insensitive_substring(three: ToolContext) -> None:
    """ai_name matches a case-insensitive substring."""
    assert _names(three, ai_name="BOB") == ["beta"]
    assert _names(three, ai_name="(") == ["alpha", "beta", "gamma"]


def test_filter_ai_context(three: ToolContext) -> None:
    """ai_context matches a case-insensitive substring."""
    assert _names(three, ai_context="ci green") == ["gamma"]


def test_filter_main_topics_any_substring(three: ToolContext) -> None:
    """main_topics matches when any filter topic is inside any stored topic."""
    assert _names(three, main_topics=["hypo"]) == ["beta"]
    assert _names(three, main_topics=["nothing", "cach"]) == ["gamma"]
    assert _names(three, main_topics=["none"]) == []


def test_filter_created_after_and_before(three: ToolContext) -> None:
    """Date filters compare instants; a manifest without created_at never matches them."""
    assert _names(three, created_after="2025-01-01") == ["beta"]
    assert _names(three, created_before="2025-01-01T00:00:00Z") == ["alpha"]
    assert _names(three, created_after="2024-01-01", created_before="2026-01-01") == [
        "alpha",
        "beta",
    ]
    assert _names(three, created_after="2025-03-01T10:00:01Z") == []


def test_date_filters_include_their_boundary(three: ToolContext) -> None:
    """On or after, on or before: an experience created exactly at the filter's instant
    matches both, and a bare created_before date covers that whole day."""
    assert _names(three, created_after="2025-03-01T10:00:00Z") == ["beta"]
    assert _names(three, created_after="2025-03-01T11:00:00+01:00") == ["beta"]  # same instant
    assert _names(three, created_before="2025-03-01T10:00:00Z") == ["alpha", "beta"]
    assert _names(three, created_before="2025-03-01T09:59:59Z") == ["alpha"]
    both = {"created_after": "2024-06-01T10:00:00Z", "created_before": "2024-06-01T10:00:00Z"}
    assert _names(three, **both) == ["alpha"]
    assert _names(three, created_before="2024-06-01") == ["alpha"]  # 10:00 on that day
    assert _names(three, created_after="2025-03-01") == ["beta"]
    assert _names(three, created_before="2024-05-31") == []


def test_filter_conversation_counts_are_inclusive(three: ToolContext) -> None:
    """min_conversations and max_conversations include their bounds."""
    assert _names(three, min_conversations=6) == ["beta", "gamma"]
    assert _names(three, max_conversations=6) == ["alpha", "beta"]
    assert _names(three, min_conversations=3, max_conversations=8) == ["beta"]


def test_filters_combine(three: ToolContext) -> None:
    """Every given filter must match."""
    assert _names(three, ai_name="o", min_conversations=7) == ["gamma"]


def test_legacy_filter_key_is_accepted(three: ToolContext) -> None:
    """The original's ``filter`` argument name works as well as ``filters``."""
    out = call(three, "list_experiences", filter={"ai_name": "alice"})
    assert len(out["experience_directories"]) == 1


def test_bad_date_filter_is_an_error(three: ToolContext) -> None:
    """An unparsable date filter is refused rather than silently matching."""
    with pytest.raises(ToolError) as exc:
        call(three, "list_experiences", filters={"created_after": "last week"})
    assert exc.value.code == "invalid_input"
    assert "created_after" in exc.value.message


def test_unfinished_and_broken_experiences_are_skipped_with_warnings(ctx: ToolContext) -> None:
    """In-progress and invalid manifests are not listed, and the reply says why."""
    full_export(ctx, "ok")
    start(ctx, "pending")
    broken = full_export(ctx, "broken")
    (broken / "manifest.json").write_text('{"ai_name": 1}')
    (ctx.experiences_base / "unrelated").mkdir()
    out = call(ctx, "list_experiences")
    assert [s["directory"] for s in out["directory_summaries"]] == [
        str(ctx.experiences_base / "experience_ok")
    ]
    text = "\n".join(out["warnings"])
    assert "experience_pending: not finalized" in text
    assert "experience_broken: manifest.json" in text
    assert "unrelated" not in text


def test_base_directory_inside_the_project(ctx: ToolContext, tmp_path: Path) -> None:
    """A base_directory inside the project is listed."""
    other = ToolContext(root=tmp_path, experiences_base=Path("elsewhere"))
    full_export(other, "moved")
    out = call(ctx, "list_experiences", base_directory="elsewhere")
    assert [s["directory"] for s in out["directory_summaries"]] == [
        str(tmp_path / "elsewhere" / "experience_moved")
    ]


@pytest.mark.parametrize("base", ["/", "..", "../..", "/tmp"])
def test_base_directory_outside_the_roots_is_refused(ctx: ToolContext, base: str) -> None:
    """base_directory may not leave the experiences base or the project."""
    with pytest.raises(ToolError) as exc:
        call(ctx, "list_experiences", base_directory=base)
    assert exc.value.code == "path_outside_roots"


def test_missing_base_lists_nothing(ctx: ToolContext) -> None:
    """Before any export the list is empty, with a note."""
    out = call(ctx, "list_experiences")
    assert out["experience_directories"] == [] and out["warnings"]


def _manifest(created_at: str) -> Manifest:
    return Manifest(
        mcp_version="1.0.0",
        ai_name="a",
        ai_context="c",
        experience_summary="s",
        experience_flow=[],
        files=ManifestFiles(conversations=[], thoughts=""),
        main_topics=[],
        total_conversations=0,
        created_at=created_at,
    )


@pytest.mark.parametrize(
    ("created_at", "after", "before", "listed"),
    [
        ("2025-08-01T12:00:00Z", "2025-08-01T12:00:00Z", None, True),
        ("2025-08-01T12:00:00Z", None, "2025-08-01T12:00:00Z", True),
        ("2025-08-01T12:00:00Z", "2025-08-01T12:00:00.000001Z", None, False),
        ("2025-08-01T12:00:00Z", None, "2025-08-01T11:59:59.999999Z", False),
        ("2025-08-01T23:59:59.999999Z", None, "2025-08-01", True),
        ("2025-08-02T00:00:00Z", None, "2025-08-01", False),
        ("2025-08-01T00:00:00Z", "2025-08-01", None, True),
        ("2025-07-31T23:59:59Z", "2025-08-01", None, False),
    ],
)
def test_matches_dates_on_or_after_and_on_or_before(
    created_at: str, after: str | None, before: str | None, listed: bool
) -> None:
    """The bounds are inclusive; a bare created_before date covers its whole day (pure)."""
    filters = ExperienceFilters(created_after=after, created_before=before)
    assert matches(_manifest(created_at), filters) is listed
