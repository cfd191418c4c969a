"""The project's ``loop.toml`` found and parsed as TOML, with no models.

Finding the file (:func:`find_config`) and reading TOML (:func:`load_toml`, for the
hat files too) cost no model import; :mod:`loop.config.settings` validates what is
read, for a run and for the tool commands alike.
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
    try:  # a byte-order mark (Windows editors write one) is not part of the TOML
        text = raw.decode("utf-8").removeprefix("\ufeff")
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
