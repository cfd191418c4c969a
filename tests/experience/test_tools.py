"""The domain's registration and the two guides."""

from __future__ import annotations

import pytest

from loop.errors import ToolError
from loop.experience.tools import TOOLS
from loop.tools.base import ToolContext
from tests.experience.helpers import call

SEED_TOOLS = [
    "get_export_status",
    "export_experience_init",
    "export_experience_conversations",
    "export_experience_thoughts",
    "export_experience_finalize",
    "list_experiences",
    "validate_experience",
    "get_ai_experience_export_guide",
    "get_ai_experience_import_guide",
]


def test_the_nine_seed_tools_are_registered() -> None:
    """TOOLS holds exactly the seed's nine tools in the experience domain."""
    assert [t.name for t in TOOLS] == SEED_TOOLS
    assert {t.domain for t in TOOLS} == {"experience"}


def test_input_models_use_the_seed_parameter_names() -> None:
    """The tools take the seed's parameter names."""
    fields = {t.name: set(t.input_model.model_fields) for t in TOOLS}
    assert fields["get_export_status"] == {"session_id"}
    assert fields["export_experience_init"] == {"session_id", "metadata", "summary"}
    assert fields["export_experience_conversations"] == {
        "session_id",
        "conversations_batch",
        "batch_number",
    }
    assert fields["export_experience_thoughts"] == {"session_id", "thoughts"}
    assert fields["export_experience_finalize"] == {"session_id"}
    assert fields["list_experiences"] == {"base_directory", "filters"}
    assert fields["validate_experience"] == {"directory_path"}


@pytest.mark.parametrize(
    "tool", ["get_ai_experience_export_guide", "get_ai_experience_import_guide"]
)
def test_guides_in_english_and_japanese(ctx: ToolContext, tool: str) -> None:
    """Each guide exists in en (the default) and ja, and they differ."""
    en = call(ctx, tool)
    ja = call(ctx, tool, lang="ja")
    assert en["success"] and ja["success"]
    assert en["guide_content"].startswith("# Experience")
    assert "体験" in ja["guide_content"]
    assert en["guide_content"] != ja["guide_content"]


def test_export_guide_covers_the_protocol(ctx: ToolContext) -> None:
    """The export guide names every export tool, the limits and the resume procedure."""
    text = call(ctx, "get_ai_experience_export_guide")["guide_content"]
    for needle in (
        "export_experience_init",
        "export_experience_conversations",
        "export_experience_thoughts",
        "export_experience_finalize",
        "get_export_status",
        "next_batch_number",
        "50",
        "10 MB",
        "100 MB",
        "overwritten",
        "reasoning",
    ):
        assert needle in text


def test_import_guide_covers_the_reading_order(ctx: ToolContext) -> None:
    """The import guide gives the manifest -> thoughts -> conversations order and the tools."""
    text = call(ctx, "get_ai_experience_import_guide")["guide_content"]
    assert text.index("`manifest.json`: the whole") < text.index("`thoughts.json`: the most")
    assert "list_experiences" in text and "validate_experience" in text


def test_unknown_language_is_invalid_input(ctx: ToolContext) -> None:
    """Only en and ja exist."""
    with pytest.raises(ToolError) as exc:
        call(ctx, "get_ai_experience_export_guide", lang="fr")
    assert exc.value.code == "invalid_input"
