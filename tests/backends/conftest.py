"""Fixtures for the backend tests: the real Claude Code CLI and requests to run it with."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.backends.base import BackendRequest
from loop.backends.claude import ClaudeBackend, ClaudeConfig
from loop.testing.anthropic_mock import MockAnthropic

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = "npm install --prefix .cache/npm @anthropic-ai/claude-code"

MakeRequest = Callable[..., BackendRequest]
MakeClaude = Callable[..., ClaudeBackend]


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


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The Claude Code binary; skip only where npm is absent, else fail with the fix."""
    found = find_claude()
    if found is not None and os.access(found, os.X_OK):
        return found
    if found is None and shutil.which("npm") is None:
        pytest.skip("npm is not installed, so the Claude Code CLI cannot be installed here")
    where = found or "the repo's .cache/npm or PATH"
    pytest.fail(f"Claude Code CLI not found at {where}; run: {INSTALL_HINT}")


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
            "iteration_dir": iteration_dir,
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
        env = {
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": mock.base_url,
            "ANTHROPIC_API_KEY": "test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",  # a 5xx fails at once instead of backing off
            "HATLOOP_TEST_MARK": process_mark,
        }
        env.update(overrides.pop("env", {}))
        fields: dict[str, Any] = {"command": [str(claude_bin)], "mcp": False, "env": env}
        fields.update(overrides)
        return ClaudeBackend(ClaudeConfig(**fields))

    return make
