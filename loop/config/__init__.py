"""Configuration: pydantic models for the loop, its hats and their backends, loaded from TOML.

* :mod:`loop.config.models`: ``loop.toml``'s sections, a hat, :class:`LoadedConfig`;
* :mod:`loop.config.backends`: the settings of each backend type (``[backend]``);
* :mod:`loop.config.loading`: reading the files (strict: unknown keys name the file and key);
* :mod:`loop.config.explain`: validation errors in plain words, with "did you mean";
* :mod:`loop.config.project`: finding ``loop.toml`` (here or in a parent folder), and
  reading it as plain data, for the tool commands;
* :mod:`loop.config.topology`: cross-checks of the hats and the event flow between them.

The names below are imported from their module when first used, so a command that only
reads where the tool files live (:mod:`loop.config.project`) never builds the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loop.config.backends import BackendConfig
    from loop.config.loading import (
        config_from_snapshot,
        load_config,
        preset_dir,
        preset_names,
        read_prompt,
    )
    from loop.config.models import HatConfig, LoadedConfig, base_digest, config_digest
    from loop.config.project import find_config, project_root
    from loop.config.sections import (
        ExperienceSection,
        LoopSection,
        McpSection,
        RecordingSection,
        TasksSection,
        ThemesSection,
    )
    from loop.config.settings import tool_settings_from_project

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
    "find_config",
    "load_config",
    "preset_dir",
    "preset_names",
    "project_root",
    "read_prompt",
    "tool_settings_from_project",
]

_HOMES = {
    "BackendConfig": "backends",
    "config_from_snapshot": "loading",
    "load_config": "loading",
    "preset_dir": "loading",
    "preset_names": "loading",
    "read_prompt": "loading",
    "find_config": "project",
    "project_root": "project",
    "tool_settings_from_project": "settings",
    **dict.fromkeys(("HatConfig", "LoadedConfig", "base_digest", "config_digest"), "models"),
    **dict.fromkeys(
        (
            "ExperienceSection",
            "LoopSection",
            "McpSection",
            "RecordingSection",
            "TasksSection",
            "ThemesSection",
        ),
        "sections",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'loop.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"loop.config.{home}"), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value
