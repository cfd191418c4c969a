"""Backend settings as they appear in TOML: one pydantic model per backend type.

These are configuration, so they live in the config layer: the loader validates them,
and :func:`loop.backends.build_backend` turns one into a running backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

from loop.config.sections import PathSetting, Strict
from loop.events import topic_matches

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
    "stand_in_outputs",
]

DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024


class ScriptedConfig(Strict):
    """Canned outputs served in order, one per activation of the hat (deterministic)."""

    type: Literal["scripted"] = "scripted"
    outputs: list[str] = Field(default_factory=list)
    outputs_file: PathSetting | None = Field(
        default=None, description="a JSON file holding a list of outputs (relative to the hat file)"
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


def stand_in_outputs(
    hat: str,
    publishes: list[str],
    completion_event: str,
    *,
    concurrency: int = 1,
    takers: Sequence[tuple[Sequence[str], int]] = (),
) -> list[str]:
    """The canned outputs of a scripted stand-in for ``hat``: it publishes onwards (the
    completion event when the hat may publish it, else its last concrete topic), so a
    loop of stand-ins runs to its end.

    ``takers``: every hat's triggers and concurrency. A topic that a hat of concurrency
    N takes is published N times (a wave, its payloads numbered), and a hat of
    ``concurrency`` N has N outputs, one per activation of its wave, each with its own
    payload (the same payloads would be a stale loop)."""
    concrete = [t for t in publishes if "*" not in t]
    if not concrete:
        return [f"(a scripted stand-in for {hat})"] * max(1, concurrency)
    topic = completion_event if completion_event in concrete else concrete[-1]
    width = max(
        [n for triggers, n in takers if any(topic_matches(t, topic) for t in triggers)],
        default=1,
    )
    width = 1 if topic == completion_event else width
    outputs = []
    for k in range(1, max(1, concurrency) + 1):
        done = [] if concurrency <= 1 else [f"done {k}"]  # the activation's own
        parts = [[f"part {i} of {width}"] for i in range(1, width + 1)] if width > 1 else [[]]
        payloads = [", ".join(done + part) or "done" for part in parts]
        tags = " ".join(f'<event topic="{topic}">{p}</event>' for p in payloads)
        outputs.append(f"(a scripted stand-in for {hat}) {tags}")
    return outputs
