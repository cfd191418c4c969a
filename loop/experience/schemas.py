"""The on-disk formats of an experience directory (seed 002), as pydantic models.

::

    experience_<session_id>/
    ├── summary.json            temporary: written by init, removed by finalize
    ├── conversations_001.json  ConversationBatch (1..50 conversations, reasoning required)
    ├── conversations_002.json
    ├── thoughts.json           any JSON object (free form)
    └── manifest.json           Manifest, written by finalize

The models are the file schemas the validator checks; they are validated in strict
mode there, so a number written as a string is a schema error, not a coercion.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "MCP_VERSION",
    "BatchInfo",
    "Conversation",
    "ConversationBatch",
    "ExperienceSummary",
    "Manifest",
    "ManifestFiles",
    "SummaryFile",
    "parse_timestamp",
]

# The format version written into every manifest (the original wrote its config version).
MCP_VERSION = "1.0.0"


def parse_timestamp(value: str) -> datetime:
    """Parse an ISO 8601 date or date-time; a naive value is taken as UTC.

    Raises:
        ValueError: ``value`` is not an ISO 8601 date or date-time.
    """
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _check_timestamp(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_timestamp(value)
        except ValueError as exc:
            raise ValueError(f"not an ISO 8601 date-time: {value!r}") from exc
    return value


class ExperienceSummary(BaseModel):
    """The ``summary`` argument of ``export_experience_init``: who the AI was, what it did."""

    model_config = ConfigDict(extra="forbid")

    ai_name: str = Field(min_length=1, description="CallName(role in 3-4 words)")
    ai_context: str = Field(min_length=1, description="the AI's role and situation")
    experience_summary: str = Field(min_length=1, description="what happened, in a paragraph")
    experience_flow: list[str] = Field(description="the session's plot, step by step")
    main_topics: list[str] = Field(description="3-5 topics, each with a concrete example")
    ai_model: str | None = Field(default=None, description="the model, e.g. claude-sonnet-4")
    duration: str | None = Field(default=None, description="how long the session took")
    platform: str | None = Field(default=None, description="where it ran, e.g. claude-code")


class SummaryFile(BaseModel):
    """``summary.json``: what init recorded, read back by finalize."""

    model_config = ConfigDict(extra="allow")

    summary: ExperienceSummary
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str
    created_at: str

    _created = field_validator("created_at")(_check_timestamp)


class ManifestFiles(BaseModel):
    """``manifest.files``: the conversation batches and the thoughts file."""

    model_config = ConfigDict(extra="forbid")

    conversations: list[str]
    thoughts: str


class Manifest(BaseModel):
    """``manifest.json`` (ExperienceMetadata): required fields, optional ones, extras allowed."""

    model_config = ConfigDict(extra="allow")

    mcp_version: str
    ai_name: str = Field(min_length=1)
    ai_context: str = Field(min_length=1)
    experience_summary: str = Field(min_length=1)
    experience_flow: list[str]
    files: ManifestFiles
    main_topics: list[str]
    total_conversations: int = Field(ge=0)
    session_id: str | None = None
    created_at: str | None = None
    ai_model: str | None = None
    duration: str | None = None
    platform: str | None = None
    custom_metadata: dict[str, Any] | None = None

    _created = field_validator("created_at")(_check_timestamp)


class BatchInfo(BaseModel):
    """``batch_info`` of a conversation batch."""

    model_config = ConfigDict(extra="forbid")

    batch_number: int = Field(ge=1)
    count: int = Field(ge=0)
    start_index: int | None = Field(default=None, ge=1)
    end_index: int | None = Field(default=None, ge=1)


class Conversation(BaseModel):
    """One exchange; extra keys (timestamp, confidence, context...) are kept as sent."""

    model_config = ConfigDict(extra="allow")

    user_input: str
    ai_response: str
    reasoning: str


class ConversationBatch(BaseModel):
    """``conversations_NNN.json``: ``batch_info`` and the conversations, nothing else."""

    model_config = ConfigDict(extra="forbid")

    batch_info: BatchInfo
    conversations: list[Conversation]
