"""Backend settings as they appear in TOML: one pydantic model per backend type.

These are configuration, so they live in the config layer: the loader validates them,
and :func:`loop.backends.build_backend` turns one into a running backend.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from loop.config.sections import PathSetting, Strict

__all__ = [
    "BACKEND_TYPES",
    "CLI_BACKENDS",
    "DEFAULT_MAX_OUTPUT",
    "AgentCliConfig",
    "BackendConfig",
    "ClaudeConfig",
    "CodexConfig",
    "CommandConfig",
    "GeminiConfig",
    "PythonConfig",
    "ReplayConfig",
    "ScriptedConfig",
]

DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024


class ScriptedConfig(Strict):
    """Canned outputs served in order, one per activation of the hat (deterministic)."""

    type: Literal["scripted"] = "scripted"
    outputs: list[str] = Field(default_factory=list)
    outputs_file: PathSetting | None = Field(
        default=None, description="a JSON file holding a list of outputs (relative to the hat file)"
    )
    repeat_last: bool = Field(
        default=False,
        description="past the end of its outputs, the hat gets the last one again (a stand-in)",
    )


class CommandConfig(Strict):
    """Any CLI: the prompt goes on stdin, as an argument, or in a file."""

    type: Literal["command"] = "command"
    command: list[str] = Field(min_length=1)
    prompt_via: Literal["stdin", "arg", "file"] = "stdin"
    timeout_seconds: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT, gt=0)


class AgentCliConfig(Strict):
    """The settings shared by the agent-CLI backends (``claude``, ``gemini``, ``codex``)."""

    model: str | None = None
    args: list[str] = Field(default_factory=list, description="extra CLI arguments")
    timeout_seconds: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    max_output_bytes: int = Field(default=DEFAULT_MAX_OUTPUT, gt=0)
    mcp: bool = Field(default=True, description="give the agent hatloop's MCP tools")
    mcp_command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="the stdio MCP server's command (default: this Python, `-m loop mcp`)",
    )


class GeminiConfig(AgentCliConfig):
    """Gemini CLI headless: ``gemini --output-format stream-json -p ""``, prompt on stdin."""

    type: Literal["gemini"] = "gemini"
    command: list[str] = Field(default_factory=lambda: ["gemini"], min_length=1)
    approval_mode: Literal["default", "auto_edit", "yolo", "plan"] = Field(
        default="yolo", description="--approval-mode (headless, only yolo offers every tool)"
    )
    trust_workspace: bool = Field(
        default=True, description="trust the working folder (GEMINI_CLI_TRUST_WORKSPACE=true)"
    )


class CodexConfig(AgentCliConfig):
    """Codex CLI headless: ``codex exec --json -``, prompt on stdin."""

    type: Literal["codex"] = "codex"
    command: list[str] = Field(default_factory=lambda: ["codex"], min_length=1)
    sandbox: Literal["read-only", "workspace-write", "danger-full-access"] = Field(
        default="workspace-write", description="--sandbox for the agent's commands"
    )
    skip_git_repo_check: bool = Field(
        default=True, description="--skip-git-repo-check: run outside a git repository too"
    )


class PythonConfig(Strict):
    """A hat written in Python: ``target = "module:function"``."""

    type: Literal["python"] = "python"
    target: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    timeout_seconds: float | None = Field(default=None, gt=0)


class ReplayConfig(Strict):
    """Outputs served from a recording (set by ``loop replay``, not written by hand)."""

    type: Literal["replay"] = "replay"
    recording: str


class ClaudeConfig(AgentCliConfig):
    """Claude Code headless: ``claude -p --output-format stream-json``, prompt on stdin."""

    type: Literal["claude"] = "claude"
    command: list[str] = Field(default_factory=lambda: ["claude"], min_length=1)
    permission_mode: str | None = None
    allowed_tools: list[str] = Field(default_factory=list)


# The backend settings of a hat or of ``[backend]``, told apart by ``type``.
BackendConfig = Annotated[
    ScriptedConfig
    | CommandConfig
    | PythonConfig
    | GeminiConfig
    | CodexConfig
    | ReplayConfig
    | ClaudeConfig,
    Field(discriminator="type"),
]
BACKEND_TYPES = ("scripted", "command", "python", "claude", "gemini", "codex")

# What `init --backend` and `run --backend` accept: the types that need no per-hat
# settings (command and python do; replay is set by `replay`).
CLI_BACKENDS = ("scripted", "claude", "gemini", "codex")
