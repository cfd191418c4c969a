"""The one reader of a project's ``loop.toml``: parsed and validated, strict everywhere.

A run reads it with :func:`~loop.config.loading.load_config` (the hat files, prompt
and topology too) through :func:`read_config_file`; the tool commands (``task``,
``theme``, ``experience``, ``export``, ``status``, ``sessions``) read where the tools'
files live with :func:`tool_settings_from_project`, through :func:`read_project_file`:
the same sections' models (:mod:`loop.config.sections`), the ``[backend]`` and
``[hats.*]`` tables left to the run. So a key that ``run`` refuses in a section
(``[tasks] fiel = ...``) is refused by ``task list`` too, with the same one-line error.
The models are imported only when there is a file to read: a tool command in a folder
without ``loop.toml`` never imports them, and none imports the backends' and hats'.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from loop.config.project import find_config, load_toml

if TYPE_CHECKING:
    from loop.config.models import ConfigFile
    from loop.config.sections import ProjectFile

__all__ = ["read_config_file", "read_project_file", "tool_settings_from_project"]

_File = TypeVar("_File", bound="ProjectFile")


def read_config_file(path: Path) -> ConfigFile:
    """``path`` (a ``loop.toml``) read and validated as a whole, its backend and hats
    too: what a run reads.

    Raises:
        ConfigError: not readable, not TOML, or a key unknown or of the wrong kind (the
            message names the file and the key, and the closest known key).
    """
    from loop.config.models import ConfigFile  # noqa: PLC0415 - start-up: only for a run

    return _read(path, ConfigFile)


def read_project_file(path: Path) -> ProjectFile:
    """``path`` read and validated as :func:`read_config_file` does, but for the tables
    of the backend and the hats (their models are a run's): what a tool command reads.

    Raises:
        ConfigError: as :func:`read_config_file`.
    """
    from loop.config.sections import ProjectFile  # noqa: PLC0415 - start-up: with a file

    return _read(path, ProjectFile)


def _read(path: Path, model: type[_File]) -> _File:
    from pydantic import ValidationError  # noqa: PLC0415 - start-up: only with a file

    from loop.config.explain import translate  # noqa: PLC0415 - start-up: with a file

    raw = load_toml(path)
    try:  # TOML has types: a value of the wrong one is an error, never converted
        return model.model_validate(raw, strict=True)
    except ValidationError as exc:
        raise translate(exc, path, model) from exc


def tool_settings_from_project(root: Path, config: str | None = None) -> dict[str, str]:
    """Where the tool files live according to ``loop.toml`` (or ``config``), if any.

    Returns keys ``tasks_file``, ``workspace``, ``experiences_base`` and ``sessions_dir``
    for the settings the file gives; relative paths resolve against where the loop runs:
    the folder of the ``loop.toml`` found from ``root`` (:func:`find_config`), or
    ``root`` with ``config`` given.

    Raises:
        ConfigError: the file is not a valid configuration (:func:`read_project_file`).
    """
    if config:
        path = Path(config)
    else:
        found = find_config(root)
        if found is None:
            return {}
        path, root = found, found.parent
    parsed = read_project_file(path)
    base = root.resolve()
    given = {
        "tasks_file": (parsed.tasks, "file"),
        "workspace": (parsed.themes, "workspace"),
        "experiences_base": (parsed.experience, "base_directory"),
        "sessions_dir": (parsed.loop, "sessions_dir"),
    }
    return {
        name: str(base / value)
        for name, (section, key) in given.items()
        if key in section.model_fields_set and (value := getattr(section, key))
    }
