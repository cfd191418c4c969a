"""Configuration: pydantic models for the loop and its hats, loaded from TOML."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from loop.errors import ConfigError

DEFAULT_CONFIG_NAME = "loop.toml"


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError("file not found", file=path) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from exc


def tool_settings_from_project(root: Path, config: str | None = None) -> dict[str, str]:
    """Where the tool files live according to ``loop.toml`` (or ``config``), if any.

    Returns keys ``tasks_file``, ``workspace`` and ``experiences_base`` for the settings
    present; relative paths resolve against the config file's folder.
    """
    path = Path(config) if config else root / DEFAULT_CONFIG_NAME
    if not config and not path.exists():
        return {}
    data = _load_toml(path)
    base = path.resolve().parent
    out: dict[str, str] = {}
    for section, key, name in (
        ("tasks", "file", "tasks_file"),
        ("themes", "workspace", "workspace"),
        ("experience", "base_directory", "experiences_base"),
    ):
        value = data.get(section, {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and value:
            out[name] = str(base / value)
    return out
