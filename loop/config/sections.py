"""``loop.toml``'s sections, and the file as the tool commands read it.

Every model forbids unknown keys. :class:`ProjectFile` is the whole file with its
sections validated and its ``[backend]`` and ``[hats.*]`` tables taken as they are:
the tool commands (``task``, ``theme``, ``experience``, ``status``) read where their
files live from it, strictly, without the backends' and hats' models;
:class:`~loop.config.models.ConfigFile`, the file a run reads, is the same with those
tables validated too (:mod:`loop.config.settings` reads both).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from loop._names import path_problem
from loop.events import is_valid_topic
from loop.locations import (
    DEFAULT_EXPERIENCES_DIR,
    DEFAULT_SESSIONS_DIR,
    DEFAULT_TASKS_FILE,
    DEFAULT_WORKSPACE,
)
from loop.topics import DEFAULT_COMPLETION_EVENT, DEFAULT_STARTING_EVENT

__all__ = [
    "ENABLED_HELP",
    "ExperienceSection",
    "LoopSection",
    "McpSection",
    "PathSetting",
    "ProjectFile",
    "RecordingSection",
    "Strict",
    "TasksSection",
    "ThemesSection",
]


def _path(value: str) -> str:
    problem = path_problem(value)
    if problem is not None:  # explained as the file and the key: loop.sessions_dir: ...
        raise ValueError(problem)
    return value


# A path setting (a folder, a file): one no system call takes (empty, a NUL, a name over
# 255 bytes) is refused as the file loads, naming the key, before any command uses it.
PathSetting = Annotated[str, AfterValidator(_path)]


class Strict(BaseModel):
    """A configuration model: unknown keys are errors; values are frozen; numbers are
    finite (``inf`` would be journaled as ``null``, and a replay could not check the
    recorded configuration's digest; ``nan`` is no number at all)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LoopSection(Strict):
    """``[loop]``: the objective, the starting and completion events, the limits, the
    completion rules and the budgets. Its rules between keys are checked here too (a
    key's validator sees the keys declared above it), so every command that reads
    ``[loop]`` refuses what ``run`` refuses."""

    prompt: str | None = None
    prompt_file: PathSetting | None = None
    starting_event: str = DEFAULT_STARTING_EVENT
    completion_event: str = DEFAULT_COMPLETION_EVENT
    max_iterations: int = Field(default=50, ge=1)
    max_runtime_seconds: float = Field(default=3600, gt=0)
    iteration_timeout_seconds: float = Field(default=600, gt=0)
    idle_timeout_seconds: float | None = Field(default=None, gt=0)
    max_consecutive_failures: int = Field(default=3, ge=1)
    stale_threshold: int = Field(default=3, ge=2)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_wait_seconds: float = Field(default=3600, ge=0)
    max_parallel: int = Field(default=1, ge=1)
    required_events: list[str] = Field(default_factory=list)
    cancellation_event: str | None = None
    strict_publishes: bool = False
    guardrails: list[str] = Field(default_factory=list)
    hats: list[PathSetting] = Field(default_factory=list)
    fallback_hat: str | None = None
    durable: bool = True
    sessions_dir: PathSetting = DEFAULT_SESSIONS_DIR

    @field_validator("starting_event", "completion_event", "cancellation_event")
    @classmethod
    def _topic(cls, v: str | None) -> str | None:
        if v is not None and not is_valid_topic(v):
            raise ValueError(f"not a valid topic: {v!r}")
        return v

    @field_validator("required_events")
    @classmethod
    def _topics(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for t in v:
            if not is_valid_topic(t):
                raise ValueError(f"not a valid topic: {t!r}")
        if info.data.get("completion_event") in v:
            raise ValueError("the completion event cannot be one of the required events")
        return v

    @field_validator("cancellation_event")
    @classmethod
    def _cancellation(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and v in (
            info.data.get("completion_event"),
            info.data.get("starting_event"),
        ):
            raise ValueError(
                "the cancellation event must differ from the completion and starting events"
            )
        return v

    @model_validator(mode="after")
    def _one_objective(self) -> LoopSection:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("prompt and prompt_file exclude each other: set one")
        return self


# ``enabled`` of a domain (tasks, themes, experience): true or false as written; left out,
# it is true when the domain's section is in loop.toml (configured), else None: the
# domain is on once it is used (see docs/configuration.md).
ENABLED_HELP = "true: on; false: off; unset: on when its section is written or it is used"


class TasksSection(Strict):
    """``[tasks]``: the task store the loop and its agents share."""

    enabled: StrictBool | None = Field(default=None, description=ENABLED_HELP)
    file: PathSetting = DEFAULT_TASKS_FILE
    block_completion: bool = True


class ThemesSection(Strict):
    """``[themes]``: the theme workspace; every iteration is a heartbeat."""

    enabled: StrictBool | None = Field(default=None, description=ENABLED_HELP)
    workspace: PathSetting = DEFAULT_WORKSPACE


class ExperienceSection(Strict):
    """``[experience]``: where experiences are exported."""

    enabled: StrictBool | None = Field(default=None, description=ENABLED_HELP)
    base_directory: PathSetting = DEFAULT_EXPERIENCES_DIR
    export_on_complete: bool = False

    @field_validator("export_on_complete")
    @classmethod
    def _export(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("enabled") is False:
            raise ValueError(
                "true with enabled = false: the domain is off, nothing would be exported; "
                "drop one of them"
            )
        return v


class RecordingSection(Strict):
    """``[recording]``: the session recording's cap and redaction."""

    max_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    redact_secrets: bool = True


class McpSection(Strict):
    """``[mcp]``: whether the loop serves hatloop's tools to its agents over MCP.

    ``serve = "auto"`` (the default) serves them on a loopback endpoint while the loop
    runs when a hat's backend hands its agent hatloop's tools (``claude`` with
    ``mcp = true``); ``true`` always (for agents of your own, which find the endpoint in
    ``LOOP_MCP_URL`` and ``LOOP_MCP_TOKEN``); ``false`` never (the ``claude`` backend then
    starts ``python -m loop mcp`` over stdio for each iteration instead).
    """

    serve: StrictBool | Literal["auto"] = "auto"

    @field_validator("serve", mode="before")
    @classmethod
    def _serve(cls, v: object) -> object:
        if v is True or v is False or v == "auto":
            return v
        raise ValueError(f'serve must be true, false or "auto", not {v!r}')


class ProjectFile(Strict):
    """A whole ``loop.toml``, its ``[backend]`` and ``[hats.*]`` tables taken as they are."""

    loop: LoopSection = Field(default_factory=LoopSection)
    backend: Any = Field(default_factory=dict)  # the run validates it (ConfigFile)
    hats: Any = Field(default_factory=dict)  # the run and `hats validate` validate them
    tasks: TasksSection = Field(default_factory=TasksSection)
    themes: ThemesSection = Field(default_factory=ThemesSection)
    experience: ExperienceSection = Field(default_factory=ExperienceSection)
    recording: RecordingSection = Field(default_factory=RecordingSection)
    mcp: McpSection = Field(default_factory=McpSection)
