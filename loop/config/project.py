"""The project's ``loop.toml`` as plain data: found, read and parsed, with no models.

What the tool commands (``task``, ``theme``, ``experience``, ``export``, ``sessions``)
need from it is where the tools' files live, so they read it here without importing
the configuration's models (:mod:`loop.config.loading` validates a whole configuration
for a run, and reads files through :func:`load_toml` too).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from loop._json import too_deep
from loop.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "MAX_TOML_DEPTH",
    "find_config",
    "load_toml",
    "project_root",
    "tool_settings_from_project",
]

DEFAULT_CONFIG_NAME = "loop.toml"
# A folder holding one of these is a repository's root: the search for loop.toml stops
# there, so a loop.toml above a checkout never configures it.
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def find_config(start: Path) -> Path | None:
    """The ``loop.toml`` of the folder ``start``, else of the nearest parent folder.

    As pytest and ruff find theirs: the search goes up from ``start`` and stops at the
    first folder that holds a ``loop.toml``, at a repository's root (a folder holding
    ``.git``, ``.hg``, ``.svn`` or ``.jj``, whose own ``loop.toml`` still counts), or at
    the filesystem root.
    """
    folder = Path(os.path.abspath(start))  # noqa: PTH100 - lexical: links stay as typed
    for candidate in (folder, *folder.parents):
        config = candidate / DEFAULT_CONFIG_NAME
        if config.exists():
            return config
        if any((candidate / marker).exists() for marker in VCS_MARKERS):
            return None
    return None


def project_root(start: Path) -> Path:
    """The project folder for a command run in ``start``: the folder of the ``loop.toml``
    :func:`find_config` finds, else ``start`` itself. State (``.loop/``) lives there."""
    found = find_config(start)
    return found.parent if found is not None else start


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
    for the settings present; relative paths resolve against where the loop runs: the
    folder of the ``loop.toml`` found from ``root`` (:func:`find_config`), or ``root``
    with ``config`` given.
    """
    if config:
        path = Path(config)
    else:
        found = find_config(root)
        if found is None:
            return {}
        path, root = found, found.parent
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
