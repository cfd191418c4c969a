"""Tool inputs and outputs of the theme domain; field names are the seed's (camelCase)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from loop.themes.naming import ID_PATTERN

__all__ = [
    "EndThemeInput",
    "EndThemeOutput",
    "FeedbackInput",
    "FeedbackOutput",
    "HeartbeatInput",
    "HeartbeatOutput",
    "Interrupt",
    "NoInput",
    "PreviewOutput",
    "SkippedItem",
    "StartThemeInput",
    "StartThemeOutput",
    "StatusOutput",
    "ThemeInfo",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class _Parented(_In):
    """Checks that the two parent parameters come together (subclasses declare them)."""

    @model_validator(mode="after")
    def _paired(self) -> _Parented:
        start_id = getattr(self, "parentThemeStartId", None)
        part = getattr(self, "parentThemeDirectoryPart", None)
        if (start_id is None) != (part is None):
            raise ValueError(
                "parentThemeStartId and parentThemeDirectoryPart must be given together"
            )
        return self


def _parent_id() -> Any:
    return Field(
        default=None, pattern=ID_PATTERN, description="for a subtheme: the parent's THEME_START_ID"
    )


def _parent_part() -> Any:
    return Field(default=None, description="for a subtheme: the parent's themeDirectoryPart")


class NoInput(_In):
    """No parameters."""


class HeartbeatInput(_In):
    """``theme_heartbeat`` parameters."""

    interrupts: bool = Field(
        default=True,
        description="take the interrupt feedback items (the loop's heartbeat, which turns "
        "them into theme.interrupt events); false: leave them for the loop (theme heartbeat)",
    )


def _one_target_name(data: Any) -> Any:
    # The seed's target_filename and the original's later targetFilename name one thing.
    if isinstance(data, dict) and "target_filename" in data and "targetFilename" in data:
        raise ValueError("give target_filename or targetFilename (the same thing), not both")
    return data


class StartThemeInput(_Parented):
    """``start_theme`` parameters (``targetFilename`` is accepted for ``target_filename``)."""

    target_filename: str | None = Field(
        default=None,
        validation_alias=AliasChoices("target_filename", "targetFilename"),
        description="themebox file to consume (from preview_next_theme); omit for a theme "
        "you invent yourself. targetFilename is accepted too",
    )
    themeName: str = Field(min_length=1, description="the theme's name")
    themeDirectoryPart: str = Field(
        min_length=1, description="directory name part, [a-z0-9_] (other characters become _)"
    )
    reason: str = Field(min_length=1, description="why this theme starts now")
    activityContent: list[str] | None = Field(
        default=None, description="what the theme will do (JSON list of strings)"
    )
    parentThemeStartId: str | None = _parent_id()
    parentThemeDirectoryPart: str | None = _parent_part()

    @model_validator(mode="before")
    @classmethod
    def _one_target(cls, data: Any) -> Any:
        return _one_target_name(data)


class EndThemeInput(_Parented):
    """``end_theme`` parameters."""

    themeStartId: str = Field(
        pattern=ID_PATTERN, description="THEME_START_ID of the theme to end (14 digits)"
    )
    themeDirectoryPart: str = Field(min_length=1, description="the theme's themeDirectoryPart")
    themeName: str = Field(min_length=1, description="the theme's name")
    reason: str = Field(min_length=1, description="why the theme ends")
    achievements: list[str] | None = Field(
        default=None, description="main achievements (JSON list of strings)"
    )
    parentThemeStartId: str | None = _parent_id()
    parentThemeDirectoryPart: str | None = _parent_part()


class FeedbackInput(_In):
    """``check_and_process_item`` parameters."""

    type: str = Field(
        default="feedbackbox",
        description='"feedbackbox" (themes use preview_next_theme/start_theme)',
    )


class _Out(BaseModel):
    model_config = ConfigDict(defer_build=True)

    message: str = Field(description="what happened and what to do next, for the agent")
    repaired: list[str] = Field(
        default_factory=list, description="interrupted starts this call undid first"
    )


class SkippedItem(BaseModel):
    """An item in themebox or feedbackbox the tools cannot take: skipped, never offered."""

    file: str = Field(description="the item, e.g. themebox/<name> (rename it to make it count)")
    reason: str = Field(description="why it cannot be taken")


def _skipped() -> Any:
    return Field(
        default_factory=list,
        description="items the tools cannot take (a name over 200 bytes, not UTF-8), skipped",
    )


class PreviewOutput(_Out):
    """The next theme candidate, or none."""

    found: bool
    filename: str | None = None
    content: str | None = None
    remaining: int = Field(0, description="further candidates after this one")
    pendingRepair: bool = False
    skipped: list[SkippedItem] = _skipped()


class StartThemeOutput(_Out):
    """A started theme."""

    themeStartId: str
    themeDirectoryPart: str
    historyFile: str
    themeDirectory: str
    parentThemeStartId: str | None = None
    processedFile: str | None = None
    warnings: list[str] = Field(default_factory=list)


class EndThemeOutput(_Out):
    """An ended theme."""

    themeStartId: str
    themeEndId: str
    themeDirectoryPart: str
    historyFile: str
    parentThemeStartId: str | None = None
    warnings: list[str] = Field(default_factory=list)


class FeedbackOutput(_Out):
    """The first feedback item by name (now processed), or none."""

    found: bool
    filename: str | None = Field(None, description="the item's name before processing")
    processedFile: str | None = None
    content: str | None = None
    remaining: int = 0
    skipped: list[SkippedItem] = _skipped()
    warnings: list[str] = Field(default_factory=list)


class Interrupt(BaseModel):
    """An interrupt feedback item a heartbeat took (now processed)."""

    name: str = Field(description="the item's name without interrupt. and .md")
    file: str = Field(description="the item's file name before processing")
    content: str = ""


class HeartbeatOutput(_Out):
    """What a heartbeat did: the new ID, repairs, interrupts taken (the loop's only)."""

    heartbeatId: str
    interrupts: list[Interrupt] = Field(default_factory=list)
    error: dict[str, Any] | None = Field(
        default=None, description="why the interrupts stopped being taken (the next tries again)"
    )


class ThemeInfo(BaseModel):
    """One active (started, not ended) theme or subtheme."""

    themeStartId: str
    themeDirectoryPart: str
    themeName: str
    themeDirectory: str | None
    historyFile: str
    parentThemeStartId: str | None = None
    parentThemeDirectoryPart: str | None = None


class StatusOutput(BaseModel):
    """The workspace state, derived from its files."""

    heartbeatId: str | None
    activeThemes: list[ThemeInfo]
    themeCandidates: int
    unprocessedFeedback: int
    pendingRepair: bool
    cooldown: bool = Field(description="a theme was started or ended at this heartbeat")
    message: str
    skipped: list[SkippedItem] = _skipped()
