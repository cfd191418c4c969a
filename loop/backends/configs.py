"""Backend settings as they appear in TOML: one pydantic model per backend type."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CodexConfig",
    "CommandConfig",
    "GeminiConfig",
    "PythonConfig",
    "ReplayConfig",
    "ScriptedConfig",
]

DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedConfig(_Strict):
    """Canned outputs served in order, one per activation of the hat (deterministic)."""

    type: Literal["scripted"] = "scripted"
    outputs: list[str] = Field(default_factory=list)
    outputs_file: str | None = Field(
        default=None, description="a JSON file holding a list of outputs (relative to the hat file)"
    )


class CommandConfig(_Strict):
    """Any CLI: the prompt goes on stdin, as an argument, or in a file."""

    type: Literal["command"] = "command"
    command: list[str] = Field(min_length=1)
    prompt_via: Literal["stdin", "arg", "file"] = "stdin"
    timeout_seconds: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT, gt=0)


class _AgentCli(_Strict):
    """The settings shared by the ready presets of ``command`` for agent CLIs."""

    model: str | None = None
    args: list[str] = Field(default_factory=list)
    timeout_seconds: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class GeminiConfig(_AgentCli):
    """Gemini CLI, a ready preset of ``command`` (``gemini -p PROMPT``)."""

    type: Literal["gemini"] = "gemini"
    command: list[str] = Field(default_factory=lambda: ["gemini"])


class CodexConfig(_AgentCli):
    """Codex CLI, a ready preset of ``command`` (``codex exec -``, prompt on stdin)."""

    type: Literal["codex"] = "codex"
    command: list[str] = Field(default_factory=lambda: ["codex"])


class PythonConfig(_Strict):
    """A hat written in Python: ``target = "module:function"``."""

    type: Literal["python"] = "python"
    target: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    timeout_seconds: float | None = Field(default=None, gt=0)


class ReplayConfig(_Strict):
    """Outputs served from a recording (set by ``loop replay``, not written by hand)."""

    type: Literal["replay"] = "replay"
    recording: str
