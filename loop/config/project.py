"""The project's ``loop.toml`` as plain data: found, read and parsed, with no models.

What the tool commands (``task``, ``theme``, ``experience``, ``export``, ``sessions``)
need from it is where the tools' files live, so they read it here without importing
the configuration's models (:mod:`loop.config.loading` validates a whole configuration
for a run, and reads files through :func:`load_toml` too).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from loop._json import too_deep
from loop.errors import ConfigError

__all__ = ["DEFAULT_CONFIG_NAME", "MAX_TOML_DEPTH", "load_toml", "tool_settings_from_project"]

DEFAULT_CONFIG_NAME = "loop.toml"


# Deepest nesting of tables and arrays in a config or hat file: far more than any real
# one needs, and far from what the recursive TOML parser can take.
MAX_TOML_DEPTH = 32


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; every problem is a ``ConfigError`` naming the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError("file not found", file=path) from exc
    except IsADirectoryError as exc:
        raise ConfigError("is a folder, expected a TOML file", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); TOML files are UTF-8", file=path
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", file=path) from exc
    except RecursionError as exc:
        raise ConfigError(f"nested deeper than {MAX_TOML_DEPTH} levels", file=path) from exc
    if too_deep(data, MAX_TOML_DEPTH):
        raise ConfigError(f"nested deeper than {MAX_TOML_DEPTH} levels", file=path)
    return data


def tool_settings_from_project(root: Path, config: str | None = None) -> dict[str, str]:
    """Where the tool files live according to ``loop.toml`` (or ``config``), if any.

    Returns keys ``tasks_file``, ``workspace``, ``experiences_base`` and ``sessions_dir``
    for the settings present; relative paths resolve against ``root`` (where the loop
    runs), as in the loop.
    """
    path = Path(config) if config else root / DEFAULT_CONFIG_NAME
    if not config and not path.exists():
        return {}
    data = load_toml(path)
    base = root.resolve()
    out: dict[str, str] = {}
    for section, key, name in (
        ("tasks", "file", "tasks_file"),
        ("themes", "workspace", "workspace"),
        ("experience", "base_directory", "experiences_base"),
        ("loop", "sessions_dir", "sessions_dir"),
    ):
        value = data.get(section, {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and value:
            out[name] = str(base / value)
    return out
