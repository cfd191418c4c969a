"""Fixtures for the backend tests: the real agent CLIs (Claude Code, Gemini CLI, Codex),
backends pointed at the local mock APIs, and requests to run them with."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.backends.base import BackendRequest
from loop.backends.claude import ClaudeBackend, ClaudeConfig
from loop.backends.codex import CodexBackend
from loop.backends.gemini import GeminiBackend
from loop.config.backends import CodexConfig, GeminiConfig
from loop.testing.anthropic_mock import MockAnthropic
from loop.testing.gemini_mock import MockGemini, cli_settings
from loop.testing.openai_mock import MockOpenAI, codex_provider_config

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = "npm install --prefix .cache/npm @anthropic-ai/claude-code"
NPM_BIN = REPO / ".cache" / "npm" / "node_modules" / ".bin"
# The npm packages ./scripts/check installs (pinned there), by the program they provide.
PACKAGES = {"gemini": "@google/gemini-cli", "codex": "@openai/codex"}

MakeRequest = Callable[..., BackendRequest]
MakeClaude = Callable[..., ClaudeBackend]
MakeGemini = Callable[..., GeminiBackend]
MakeCodex = Callable[..., CodexBackend]


def find_claude() -> Path | None:
    """HATLOOP_CLAUDE_BIN, else the repo's npm cache, else ``claude`` on PATH."""
    if env_bin := os.environ.get("HATLOOP_CLAUDE_BIN"):
        return Path(env_bin)
    # The platform package holds the native binary (linux-x64, linux-arm64, darwin-...).
    cached = sorted(REPO.glob(".cache/npm/node_modules/@anthropic-ai/claude-code-*/claude"))
    if cached:
        return cached[0]
    on_path = shutil.which("claude")
    return Path(on_path) if on_path else None


def find_cli(name: str) -> Path | None:
    """HATLOOP_<NAME>_BIN, else the repo's npm cache, else ``name`` on PATH."""
    if env_bin := os.environ.get(f"HATLOOP_{name.upper()}_BIN"):
        return Path(env_bin)
    if (NPM_BIN / name).exists():
        return NPM_BIN / name
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None


def require_cli(name: str) -> Path:
    """The CLI ``name``; skip only where npm is absent, else fail with the install command."""
    found = find_cli(name)
    if found is not None and os.access(found, os.X_OK):
        return found
    if found is None and shutil.which("npm") is None:
        pytest.skip(f"npm is not installed, so the {name} CLI cannot be installed here")
    hint = f"./scripts/check (or npm install --prefix .cache/npm {PACKAGES[name]})"
    pytest.fail(f"{name} CLI not found at {found or '.cache/npm or PATH'}; run: {hint}")


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    """The Gemini CLI (npm ``@google/gemini-cli``)."""
    return require_cli("gemini")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The Codex CLI (npm ``@openai/codex``)."""
    return require_cli("codex")


def gemini_env(home: Path, base_url: str, *, max_attempts: int = 10) -> dict[str, str]:
    """The environment that runs the Gemini CLI offline against a mock at ``base_url``.

    ``home`` gets a ``.gemini/settings.json`` choosing API-key auth (the user's own
    settings, in a real install); ``max_attempts`` bounds the CLI's retries of a failed
    request (its default, 10 with backoff, takes minutes on a 500).
    """
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {**cli_settings(), "general": {"maxAttempts": max_attempts}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return {"HOME": str(home), "GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": "test"}


def claude_env(home: Path, base_url: str) -> dict[str, str]:
    """The environment that runs Claude Code offline against a mock at ``base_url``
    (a 5xx fails at once instead of backing off; no telemetry, no side traffic)."""
    return {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def codex_env(home: Path, base_url: str, *, retries: bool = True) -> dict[str, str]:
    """The environment that runs Codex offline against a mock at ``base_url``.

    ``home`` gets a ``.codex/config.toml`` naming the mock as the model provider;
    ``retries = False`` makes a failed request final (Codex reconnects for minutes).
    """
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    text = codex_provider_config(base_url)
    if not retries:
        text += "request_max_retries = 0\nstream_max_retries = 0\n"
    (home / ".codex" / "config.toml").write_text(text, encoding="utf-8")
    return {"HOME": str(home), "MOCK_OPENAI_KEY": "test"}


def require_claude() -> Path:
    """The Claude Code binary; skip only where npm is absent, else fail with the fix."""
    found = find_claude()
    if found is not None and os.access(found, os.X_OK):
        return found
    if found is None and shutil.which("npm") is None:
        pytest.skip("npm is not installed, so the Claude Code CLI cannot be installed here")
    where = found or "the repo's .cache/npm or PATH"
    pytest.fail(f"Claude Code CLI not found at {where}; run: {INSTALL_HINT}")


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The Claude Code binary (:func:`require_claude`)."""
    return require_claude()


@pytest.fixture
def process_mark() -> str:
    """A unique value put in the CLI's environment to find its processes in /proc."""
    return uuid.uuid4().hex


def marked_processes(mark: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose environment carries ``mark``."""
    needle = f"HATLOOP_TEST_MARK={mark}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return pids


@pytest.fixture
def make_request(tmp_path: Path) -> MakeRequest:
    """Build a BackendRequest in a fresh iteration folder under tmp_path."""

    def make(prompt: str = "say hi", **overrides: Any) -> BackendRequest:
        iteration_dir = tmp_path / "session" / "iter-1"
        iteration_dir.mkdir(parents=True, exist_ok=True)
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        fields: dict[str, Any] = {
            "hat": "planner",
            "prompt": prompt,
            "iteration": 1,
            "session_id": "s-test",
            "activation": 0,
            "events_file": iteration_dir / "events.jsonl",
            "workdir": workdir,
        }
        fields.update(overrides)
        return BackendRequest(**fields)

    return make


@pytest.fixture
def make_claude(claude_bin: Path, tmp_path: Path, process_mark: str) -> MakeClaude:
    """Build a ClaudeBackend on the real CLI, offline against ``mock``, HOME in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()

    def make(mock: MockAnthropic, **overrides: Any) -> ClaudeBackend:
        env = {**claude_env(home, mock.base_url), "HATLOOP_TEST_MARK": process_mark}
        env.update(overrides.pop("env", {}))
        fields: dict[str, Any] = {"command": [str(claude_bin)], "mcp": False, "env": env}
        fields.update(overrides)
        return ClaudeBackend(ClaudeConfig(**fields))

    return make


@pytest.fixture
def make_gemini(gemini_bin: Path, tmp_path: Path, process_mark: str) -> MakeGemini:
    """Build a GeminiBackend on the real CLI, offline against ``mock``, HOME in tmp_path."""

    def make(mock: MockGemini, *, max_attempts: int = 1, **overrides: Any) -> GeminiBackend:
        env = gemini_env(tmp_path / "home", mock.base_url, max_attempts=max_attempts)
        env["HATLOOP_TEST_MARK"] = process_mark
        env.update(overrides.pop("env", {}))
        fields: dict[str, Any] = {"command": [str(gemini_bin)], "model": "gemini-mock", "env": env}
        fields.update(overrides)
        return GeminiBackend(GeminiConfig(**fields))

    return make


@pytest.fixture
def make_codex(codex_bin: Path, tmp_path: Path, process_mark: str) -> MakeCodex:
    """Build a CodexBackend on the real CLI, offline against ``mock``, HOME in tmp_path."""

    def make(mock: MockOpenAI, *, retries: bool = False, **overrides: Any) -> CodexBackend:
        env = codex_env(tmp_path / "home", mock.base_url, retries=retries)
        env["HATLOOP_TEST_MARK"] = process_mark
        env.update(overrides.pop("env", {}))
        fields: dict[str, Any] = {"command": [str(codex_bin)], "env": env}
        fields.update(overrides)
        return CodexBackend(CodexConfig(**fields))

    return make
