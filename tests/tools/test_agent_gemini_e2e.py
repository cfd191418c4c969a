"""End to end: a three-hat loop on the real Gemini CLI, offline against the mock Gemini API.

Every hat's agent publishes through a different channel (MCP ``emit_event`` after a
``createTask`` call, ``"$LOOP_PYTHON" -m loop emit`` through its shell tool, an
``<event>`` tag before a tool call), with a 200 KB prompt; the recording replays without
the CLI. See :mod:`tests.tools.agent_e2e`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loop.testing.gemini_mock import MockGemini, ToolUseTurn, shell_call
from tests.backends.conftest import gemini_env, require_cli
from tests.tools.agent_e2e import TRANSPORTS, check_run, run_loop, script

pytestmark = [pytest.mark.gemini, pytest.mark.timeout(900)]


def _mcp(tool: str, args: dict[str, Any]) -> ToolUseTurn:
    return ToolUseTurn(f"mcp_hatloop_{tool}", args)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_three_hats_publish_through_every_channel(tmp_path: Path, transport: str) -> None:
    """The loop completes; tasks, events, tokens and the replay are all as scripted."""
    gemini = require_cli("gemini")
    with MockGemini(turns=script(_mcp, shell_call)) as mock:
        env = gemini_env(tmp_path / "home", mock.base_url)
        backend = {"type": "gemini", "command": [str(gemini)], "model": "gemini-mock", "env": env}
        run = run_loop(tmp_path, mock, backend, transport=transport)
    check_run(
        run,
        mcp_names=["mcp_hatloop_createTask", "mcp_hatloop_emit_event"],
        shell_name="run_shell_command",
    )
