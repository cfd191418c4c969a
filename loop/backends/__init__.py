"""Backends: how a hat runs. One protocol (:class:`Backend`), one factory."""

from __future__ import annotations

from typing import Any

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.backends.configs import (
    CodexConfig,
    CommandConfig,
    GeminiConfig,
    PythonConfig,
    ReplayConfig,
    ScriptedConfig,
)
from loop.errors import ConfigError

__all__ = ["Backend", "BackendRequest", "BackendResult", "build_backend"]


def build_backend(config: Any) -> Backend:
    """The backend for a validated backend config."""
    if isinstance(config, ScriptedConfig):
        from loop.backends.scripted import ScriptedBackend  # noqa: PLC0415 - import on use

        return ScriptedBackend.from_config(config)
    if isinstance(config, CommandConfig):
        from loop.backends.command import CommandBackend  # noqa: PLC0415 - import on use

        return CommandBackend.from_config(config)
    if isinstance(config, GeminiConfig):
        from loop.backends.gemini import GeminiBackend  # noqa: PLC0415 - import on use

        return GeminiBackend.from_config(config)
    if isinstance(config, CodexConfig):
        from loop.backends.codex import CodexBackend  # noqa: PLC0415 - import on use

        return CodexBackend.from_config(config)
    if isinstance(config, PythonConfig):
        from loop.backends.python_hat import PythonBackend  # noqa: PLC0415 - import on use

        return PythonBackend.from_config(config)
    if isinstance(config, ReplayConfig):
        raise ConfigError("the replay backend is set up by `loop replay`, not by a config file")
    if getattr(config, "type", None) == "claude":
        from loop.backends.claude import ClaudeBackend  # noqa: PLC0415 - import on use

        return ClaudeBackend.from_config(config)
    raise ConfigError(f"unknown backend config {config!r}")
