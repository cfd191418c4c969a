"""Inputs and outputs of the experience tools, with the seeds' parameter names."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from loop.experience.layout import CONVERSATION_BATCH_LIMIT, ExportStatus
from loop.experience.schemas import ExperienceSummary

__all__ = [
    "ConversationInput",
    "ConversationsInput",
    "ConversationsOutput",
    "DirectorySummary",
    "DirectoryValidationResult",
    "ExperienceFilters",
    "FieldIssue",
    "FileValidation",
    "FinalizeOutput",
    "GuideInput",
    "GuideOutput",
    "InitInput",
    "InitOutput",
    "ListInput",
    "ListOutput",
    "SessionInput",
    "StatusOutput",
    "ThoughtsInput",
    "ThoughtsOutput",
    "ValidateInput",
]

_SESSION_ID_HELP = "the export's only key; names experiences/experience_<session_id>/"


class SessionInput(BaseModel):
    """Input of ``get_export_status`` and ``export_experience_finalize``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str = Field(description=_SESSION_ID_HELP)


class StatusOutput(BaseModel):
    """Where an export stands, derived from its files."""

    status: ExportStatus
    session_id: str
    directory_path: str
    created_files: list[str]
    next_batch_number: int = Field(
        description="the batch to send next; -1 once the export is completed"
    )


class InitInput(BaseModel):
    """Input of ``export_experience_init``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str | None = Field(
        default=None, description="e.g. 20250101-120000-feature; a UUID when omitted"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="free-form session info (platform, session_duration, user_type...)",
    )
    summary: ExperienceSummary = Field(
        description="ai_name, ai_context, experience_summary, experience_flow, main_topics"
    )


class InitOutput(BaseModel):
    """Result of ``export_experience_init``."""

    success: bool = True
    session_id: str
    directory_path: str
    expected_files: list[str]
    resumed: bool = Field(default=False, description="the same init had already been done")


class ConversationInput(BaseModel):
    """One conversation; extra keys (timestamp, context...) are kept in the file."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    user_input: str = Field(min_length=1)
    ai_response: str = Field(min_length=1)
    reasoning: str = Field(min_length=1)


class ConversationsInput(BaseModel):
    """Input of ``export_experience_conversations``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str = Field(description=_SESSION_ID_HELP)
    conversations_batch: list[ConversationInput] = Field(
        min_length=1,
        description=f"1 to {CONVERSATION_BATCH_LIMIT} conversations "
        "({user_input, ai_response, reasoning})",
    )
    batch_number: int = Field(ge=1, description="1, 2, 3... consecutive")


class ConversationsOutput(BaseModel):
    """Result of ``export_experience_conversations``."""

    success: bool = True
    file_path: str
    processed_count: int
    batch_file_size: int
    next_batch_number: int
    already_existed: bool = Field(
        default=False, description="the identical batch was already written (a safe retry)"
    )
    overwritten: bool = Field(
        default=False, description="the batch existed with other content and was replaced"
    )


class ThoughtsInput(BaseModel):
    """Input of ``export_experience_thoughts``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    session_id: str = Field(description=_SESSION_ID_HELP)
    thoughts: dict[str, Any] = Field(
        description="free-form JSON object: insights, patterns, reflections..."
    )


class ThoughtsOutput(BaseModel):
    """Result of ``export_experience_thoughts``."""

    success: bool = True
    file_path: str
    replaced: bool = Field(default=False, description="an earlier thoughts.json was replaced")


class FinalizeOutput(BaseModel):
    """Result of ``export_experience_finalize``."""

    success: bool = True
    directory_path: str
    manifest_path: str
    total_files: int
    total_size: int
    file_list: list[str]
    total_conversations: int
    warnings: list[str] = Field(default_factory=list)


class ExperienceFilters(BaseModel):
    """Filters of ``list_experiences``; every given filter must match."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    ai_name: str | None = Field(default=None, description="case-insensitive substring")
    ai_context: str | None = Field(default=None, description="case-insensitive substring")
    main_topics: list[str] | None = Field(
        default=None, description="any of these is a case-insensitive substring of any topic"
    )
    created_after: str | None = Field(default=None, description="ISO date or date-time")
    created_before: str | None = Field(default=None, description="ISO date or date-time")
    min_conversations: int | None = Field(default=None, ge=0)
    max_conversations: int | None = Field(default=None, ge=0)


class ListInput(BaseModel):
    """Input of ``list_experiences``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    base_directory: str | None = Field(
        default=None, description="folder holding experience_* (inside the configured roots)"
    )
    filters: ExperienceFilters | None = Field(
        default=None,
        validation_alias=AliasChoices("filters", "filter"),
        description="ai_name, ai_context, main_topics, created_after, created_before, "
        "min_conversations, max_conversations",
    )


class DirectorySummary(BaseModel):
    """One line per listed experience."""

    directory: str
    summary: str
    file_count: int


class ListOutput(BaseModel):
    """Result of ``list_experiences``."""

    success: bool = True
    experience_directories: list[dict[str, Any]]
    directory_summaries: list[DirectorySummary]
    warnings: list[str] = Field(default_factory=list, description="directories skipped and why")


class ValidateInput(BaseModel):
    """Input of ``validate_experience``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    directory_path: str = Field(description="an experience_* directory inside the roots")


Level = Literal["syntax", "schema", "semantic", "cross_file", "limits"]


class FieldIssue(BaseModel):
    """One validation error: the field (dotted path) and what is wrong with it."""

    field: str
    message: str
    value: Any = None
    level: Level


class FileValidation(BaseModel):
    """The checks of one file."""

    file: str
    valid: bool
    errors: list[FieldIssue] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class DirectoryValidationResult(BaseModel):
    """Result of ``validate_experience`` (the seed's DirectoryValidationResult)."""

    valid: bool
    directory_path: str
    manifest_valid: bool
    semantic_valid: bool
    cross_file_valid: bool
    file_validations: list[FileValidation]
    missing_files: list[str]
    errors: list[str]
    warnings: list[str]


class GuideInput(BaseModel):
    """Input of the two guide tools."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    lang: Literal["en", "ja"] = Field(default="en", description="en (English) or ja (Japanese)")


class GuideOutput(BaseModel):
    """A guide, in Markdown."""

    success: bool = True
    guide_content: str
