"""The configuration's models: ``loop.toml``'s sections, a hat, and the loaded whole.

Key names follow Ralph Orchestrator's where they exist (DESIGN.md, "Config contract").
Unknown keys are errors (every model forbids extra keys); :mod:`loop.config.loading`
reads the files and names the file and the key of an error.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from loop.config.backends import BackendConfig, ScriptedConfig
from loop.config.sections import (
    ExperienceSection,
    LoopSection,
    McpSection,
    ProjectFile,
    RecordingSection,
    Strict,
    TasksSection,
    ThemesSection,
)
from loop.events import is_valid_pattern, is_valid_topic
from loop.records import FlagValue, HatTopology, LimitSettings

__all__ = [
    "AggregateConfig",
    "ConfigFile",
    "HatConfig",
    "HatFile",
    "LoadedConfig",
    "base_digest",
    "config_digest",
    "limit_settings",
    "snapshot_limits",
]


class AggregateConfig(Strict):
    """A hat's ``aggregate``: it runs once on a wave's results (``wait_for_all``), or on
    the first (``first``) or the first ``count`` (``quorum``), waiting at most
    ``timeout_seconds`` for the wave."""

    mode: Literal["wait_for_all", "first", "quorum"] = "wait_for_all"
    count: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _count(self) -> AggregateConfig:
        if self.mode == "quorum" and self.count is None:
            raise ValueError('mode "quorum" needs a count')
        if self.mode != "quorum" and self.count is not None:
            raise ValueError(f'count is for mode "quorum", not {self.mode!r}')
        return self


class HatConfig(Strict):
    """One hat: a persona triggered by events, publishing events."""

    name: str | None = None
    description: str = ""
    triggers: list[str] = Field(min_length=1)
    publishes: list[str] = Field(default_factory=list)
    instructions: str = ""
    default_publishes: str | None = None
    max_activations: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)
    idle_timeout_seconds: float | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    group_by: Literal["event", "topic"] | None = None
    aggregate: AggregateConfig | None = None
    backend: BackendConfig | None = None

    @model_validator(mode="after")
    def _parallel(self) -> HatConfig:
        if self.aggregate is not None and (self.concurrency or 1) > 1:
            raise ValueError("an aggregating hat runs once per wave: it takes no concurrency > 1")
        if self.group_by is not None and (self.concurrency or 1) == 1:
            raise ValueError("group_by is for a hat with concurrency > 1")
        return self

    @field_validator("triggers")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        for p in v:
            if not is_valid_pattern(p):
                raise ValueError(f"not a valid trigger pattern: {p!r}")
        return v

    @field_validator("publishes")
    @classmethod
    def _topics(cls, v: list[str]) -> list[str]:
        for t in v:
            if not is_valid_pattern(t):
                raise ValueError(f"not a valid topic: {t!r}")
        return v

    @field_validator("default_publishes")
    @classmethod
    def _default(cls, v: str | None) -> str | None:
        if v is not None and not is_valid_topic(v):
            raise ValueError(f"not a valid topic: {v!r}")
        return v


class ConfigFile(ProjectFile):
    """A whole ``loop.toml``, its backend and hats validated too (what a run reads)."""

    backend: BackendConfig = Field(default_factory=ScriptedConfig)
    hats: dict[str, HatConfig] = Field(default_factory=dict)


class HatFile(Strict):
    """A hat file: ``[hats.NAME]`` tables only."""

    hats: dict[str, HatConfig]


@dataclass
class LoadedConfig:
    """A validated configuration with every path resolved."""

    loop: LoopSection
    backend: BackendConfig
    hats: dict[str, HatConfig]
    tasks: TasksSection
    themes: ThemesSection
    experience: ExperienceSection
    recording: RecordingSection
    prompt: str
    base_dir: Path
    source: str
    hat_sources: dict[str, Path] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    # Not in the snapshot: serving the tools changes no routing or outcome (and replay
    # serves nothing, its backends being in-process).
    mcp: McpSection = field(default_factory=McpSection)
    # No loop.toml was found: this is the packaged default preset, the built-in demo.
    builtin: bool = False
    # The file set a default [backend] (or --backend did): a hat without its own has one.
    backend_given: bool = True
    # The settings the command line gave ([loop] keys, ``backend``), the objective aside:
    # journaled, so that a resume keeps them (:func:`loop.engine.resume.carried_flags`).
    flags: dict[str, FlagValue] = field(default_factory=dict)

    def limit_settings(self) -> LimitSettings:
        """The limits and budgets this configuration sets (what a resume may override)."""
        return limit_settings(self.loop, self.hats)

    def hat_backend(self, name: str) -> BackendConfig:
        """The backend config of hat ``name`` (its own, or the default ``[backend]``)."""
        return self.hats[name].backend or self.backend

    def named_backend(self, name: str) -> BackendConfig | None:
        """The backend the configuration names for hat ``name``: its own, or the default
        ``[backend]`` when the file (or ``--backend``) sets one; ``None`` when neither
        does, which ``doctor`` and the preflight refuse ("no backend")."""
        hat = self.hats[name]
        return hat.backend if hat.backend is not None or not self.backend_given else self.backend

    def topology(self) -> dict[str, HatTopology]:
        """The hat topology this configuration implies (journaled, recorded, routed on)."""
        return {
            name: HatTopology(
                description=hat.description,
                triggers=tuple(hat.triggers),
                publishes=tuple(hat.publishes),
                default_publishes=hat.default_publishes,
                max_activations=hat.max_activations,
                backend=self.hat_backend(name).type,
            )
            for name, hat in self.hats.items()
        }

    def resolve(self, path: str) -> Path:
        """A state path (sessions, tasks, workspace), resolved against the working folder.

        Hat files and prompt files resolve against the config's folder instead; state
        lives where the loop runs, so the packaged default never writes into the package.
        """
        p = Path(path)
        return p if p.is_absolute() else self.root / p

    def snapshot(self) -> dict[str, Any]:
        """The effective configuration as JSON-ready data (what the digest covers)."""
        return {
            "loop": self.loop.model_dump(mode="json"),
            "backend": self.backend.model_dump(mode="json"),
            "hats": {n: h.model_dump(mode="json", exclude_none=True) for n, h in self.hats.items()},
            "tasks": self.tasks.model_dump(mode="json"),
            "themes": self.themes.model_dump(mode="json"),
            "experience": self.experience.model_dump(mode="json"),
            "recording": self.recording.model_dump(mode="json"),
            "prompt": self.prompt,
        }

    def digest(self) -> str:
        """A stable SHA-256 of :meth:`snapshot` (what a recording's header carries)."""
        return config_digest(self.snapshot())


# What a resume may change (journaled as an override): left out of base_digest.
OVERRIDABLE_LOOP_KEYS = (
    "max_iterations",
    "max_runtime_seconds",
    "max_consecutive_failures",
    "max_cost_usd",
    "max_tokens",
    "max_wait_seconds",
)


def base_digest(snapshot: dict[str, Any]) -> str:
    """The digest of a snapshot without what a resume may override (the limits, the
    budgets and the backends): equal for a session and its resume with overrides."""
    loop = {k: v for k, v in (snapshot.get("loop") or {}).items() if k not in OVERRIDABLE_LOOP_KEYS}
    hats = {
        name: {k: v for k, v in hat.items() if k not in ("backend", "max_cost_usd", "max_tokens")}
        for name, hat in (snapshot.get("hats") or {}).items()
        if isinstance(hat, dict)
    }
    rest = {k: v for k, v in snapshot.items() if k not in ("loop", "hats", "backend")}
    return config_digest({**rest, "loop": loop, "hats": hats})


def config_digest(snapshot: dict[str, Any]) -> str:
    """The digest of a configuration snapshot: SHA-256 of its canonical JSON."""
    raw = json.dumps(snapshot, sort_keys=True, ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def limit_settings(loop: LoopSection, hats: Mapping[str, HatConfig]) -> LimitSettings:
    """The limits and budgets of ``[loop]`` and the hats."""
    return LimitSettings(
        max_iterations=loop.max_iterations,
        max_runtime_seconds=loop.max_runtime_seconds,
        max_consecutive_failures=loop.max_consecutive_failures,
        max_cost_usd=loop.max_cost_usd,
        max_tokens=loop.max_tokens,
        max_wait_seconds=loop.max_wait_seconds,
        hat_max_cost_usd={n: h.max_cost_usd for n, h in hats.items() if h.max_cost_usd},
        hat_max_tokens={n: h.max_tokens for n, h in hats.items() if h.max_tokens},
    )


def snapshot_limits(snapshot: Mapping[str, Any]) -> LimitSettings:
    """The limits and budgets of a configuration snapshot (a journal's ``session.start``).

    Raises:
        ValueError: the snapshot's ``loop`` or a hat is not a valid section.
    """
    loop = LoopSection.model_validate(snapshot.get("loop") or {})
    raw = snapshot.get("hats") or {}
    hats = {str(n): HatConfig.model_validate(h) for n, h in raw.items()}
    return limit_settings(loop, hats)
