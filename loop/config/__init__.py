"""Configuration: pydantic models for the loop, its hats and their backends, loaded from TOML.

* :mod:`loop.config.models`: ``loop.toml``'s sections, a hat, :class:`LoadedConfig`;
* :mod:`loop.config.backends`: the settings of each backend type (``[backend]``);
* :mod:`loop.config.loading`: reading the files (strict: unknown keys name the file and key);
* :mod:`loop.config.topology`: cross-checks of the hats and the event flow between them.
"""

from __future__ import annotations

from loop.config.backends import BackendConfig
from loop.config.loading import (
    config_from_snapshot,
    load_config,
    preset_dir,
    preset_names,
    tool_settings_from_project,
)
from loop.config.models import (
    ExperienceSection,
    HatConfig,
    LoadedConfig,
    LoopSection,
    McpSection,
    RecordingSection,
    TasksSection,
    ThemesSection,
    base_digest,
    config_digest,
)

__all__ = [
    "BackendConfig",
    "ExperienceSection",
    "HatConfig",
    "LoadedConfig",
    "LoopSection",
    "McpSection",
    "RecordingSection",
    "TasksSection",
    "ThemesSection",
    "base_digest",
    "config_digest",
    "config_from_snapshot",
    "load_config",
    "preset_dir",
    "preset_names",
    "tool_settings_from_project",
]
