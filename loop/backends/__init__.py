"""Backends: how a hat runs. One base class (:class:`Backend`), one factory."""

from __future__ import annotations

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config.backends import (
    BackendConfig,
    ClaudeConfig,
    CodexConfig,
    CommandConfig,
    GeminiConfig,
    PythonConfig,
    ReplayConfig,
    ScriptedConfig,
)
from loop.errors import ConfigError

__all__ = ["Backend", "BackendRequest", "BackendResult", "build_backend"]


def build_backend(config: BackendConfig) -> Backend:
    """The backend for a validated backend config.

    Each backend's module is imported when a hat uses it: the command line starts
    without the ones a run does not need (the agent CLIs' pull in more modules).
    """
    match config:
        case ScriptedConfig():
            from loop.backends.scripted import ScriptedBackend  # noqa: PLC0415 - on use, see above

            return ScriptedBackend.from_config(config)
        case CommandConfig():
            from loop.backends.command import CommandBackend  # noqa: PLC0415 - on use, see above

            return CommandBackend.from_config(config)
        case GeminiConfig():
            from loop.backends.gemini import GeminiBackend  # noqa: PLC0415 - on use, see above

            return GeminiBackend.from_config(config)
        case CodexConfig():
            from loop.backends.codex import CodexBackend  # noqa: PLC0415 - on use, see above

            return CodexBackend.from_config(config)
        case PythonConfig():
            from loop.backends.python_hat import PythonBackend  # noqa: PLC0415 - on use, see above

            return PythonBackend.from_config(config)
        case ClaudeConfig():
            from loop.backends.claude import ClaudeBackend  # noqa: PLC0415 - on use, see above

            return ClaudeBackend.from_config(config)
        case ReplayConfig():
            raise ConfigError("the replay backend is set up by `loop replay`, not by a config file")
