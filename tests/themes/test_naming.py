"""Pure naming rules: sanitising, candidates, history rendering and parsing."""

from __future__ import annotations

import pytest

from loop.errors import PathError
from loop.themes import naming


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("study_bus", "study_bus"),
        ("Study Bus", "study_bus"),
        ("AI研究テーマ", "ai_"),
        ("研究", "_"),
        ("a--b__c", "a_b_c"),
        ("_x_", "_x_"),
    ],
)
def test_sanitize_part_maps_to_allowed_characters(raw: str, expected: str) -> None:
    """Runs of characters outside [a-z0-9_] become one underscore, as in the original."""
    assert naming.sanitize_part(raw) == expected


@pytest.mark.parametrize("raw", ["", ".", "..", "../x", "a/b", "a\\b", "/abs", "a\x00b"])
def test_sanitize_part_refuses_traversal(raw: str) -> None:
    """Traversal, separators and NUL are refused rather than reduced to a basename."""
    with pytest.raises(PathError):
        naming.sanitize_part(raw)


def test_candidates_skip_prefixes_and_sort_by_name() -> None:
    """Only unprocessed .md files count, oldest name first."""
    names = ["b.md", "processed.a.md", "draft.c.md", "a.md", "notes.txt"]
    assert naming.candidates(names) == ["a.md", "b.md"]


def test_theme_dir_parts_for_subtheme() -> None:
    """A subtheme lives under its parent's subthemes/ folder."""
    assert naming.theme_dir_parts("2", "b", "1", "a") == ("1_a", "subthemes", "2_b")
    assert naming.theme_dir_parts("2", "b") == ("2_b",)


def test_history_roundtrip_and_forged_fields_ignored() -> None:
    """Parsing reads the header; a reason that imitates a header field cannot forge it."""
    text = naming.render_end_history(
        name="Name\n**THEME_START_ID**: 99999999999999",
        start_id="20250101000000",
        end_id="20250102000000",
        part="p",
        directory="artifacts/20250101000000_p",
        reason="**THEME_START_ID**: 11111111111111",
        achievements=["one", "two"],
        parent=("20241231000000", "parent"),
    )
    entry = naming.parse_history("20250102000000_end_p.md", text)
    assert entry is not None
    assert entry.start_id == "20250101000000"
    assert entry.parent_id == "20241231000000"
    assert entry.directory == "artifacts/20250101000000_p"
    assert "- one\n- two" in text
    assert naming.parse_history("notes.md", text) is None


def test_list_rendering_placeholders() -> None:
    """No items gives the placeholder, one item the bare string."""
    start = naming.render_start_history(
        name="n",
        start_id="1" * 14,
        part="p",
        directory="d",
        reason="r",
        activity=None,
        parent=None,
    )
    assert "(what this theme will do)" in start
    end = naming.render_end_history(
        name="n",
        start_id="1" * 14,
        end_id="2" * 14,
        part="p",
        directory="d",
        reason="r",
        achievements=["only"],
        parent=None,
    )
    assert end.rstrip().endswith("only")


def test_sort_out_skips_names_the_tools_cannot_take() -> None:
    """Over 200 bytes or not UTF-8: skipped with a reason, never offered first."""
    fit, unfit = naming.sort_out(["b.md", "0" * 201 + ".md", "\udcffx.md", "a.md", "draft.c.md"])
    assert fit == ["a.md", "b.md"]
    assert [(u.name[:3], u.reason.split(";")[0]) for u in unfit] == [
        ("000", "its name is 204 bytes, over the 200 the tools take"),
        ("\udcffx.", "its name is not valid UTF-8"),
    ]
    assert naming.candidates(["0" * 200 + ".md"]) == []
    assert naming.candidates(["0" * 197 + ".md"]) == ["0" * 197 + ".md"]


def test_processed_names_never_replace_an_earlier_item() -> None:
    """processed.<name> first, then processed.<stem>.<n>.md; the intent accepts no other."""
    names = naming.processed_names("a.md")
    assert [next(names) for _ in range(3)] == [
        "processed.a.md",
        "processed.a.2.md",
        "processed.a.3.md",
    ]
    for ok in ("processed.a.md", "processed.a.2.md", "processed.a.17.md"):
        assert naming.is_processed_name_of("a.md", ok)
    for forged in (
        "processed.a.1.md",
        "processed.a.02.md",
        "processed.b.2.md",
        "a.md",
        "processed.a.x.md",
    ):
        assert not naming.is_processed_name_of("a.md", forged)
