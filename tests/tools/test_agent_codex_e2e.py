"""End to end: a three-hat loop on the real Codex CLI, offline against the mock Responses API.

Every hat's agent publishes through a different channel (MCP ``emit_event`` after a
``createTask`` call, ``"$LOOP_PYTHON" -m loop emit`` through its login shell, an
``<event>`` tag before a tool call), with a 200 KB prompt, outside any git repository;
the recording replays without the CLI. See :mod:`tests.tools.agent_e2e`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loop.testing.openai_mock import MockOpenAI, ToolUseTurn, shell_call
from tests.backends.conftest import codex_env, require_cli
from tests.tools.agent_e2e import TRANSPORTS, check_run, run_loop, script

pytestmark = [pytest.mark.codex, pytest.mark.timeout(900)]


def _mcp(tool: str, args: dict[str, Any]) -> ToolUseTurn:
    return ToolUseTurn(f"mcp__hatloop__{tool}", args)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_three_hats_publish_through_every_channel(tmp_path: Path, transport: str) -> None:
    """The loop completes; tasks, events, tokens and the replay are all as scripted."""
    codex = require_cli("codex")
    with MockOpenAI(turns=script(_mcp, shell_call)) as mock:
        env = codex_env(tmp_path / "home", mock.base_url)
        run = run_loop(
            tmp_path,
            mock,
            {"type": "codex", "command": [str(codex)], "env": env},
            transport=transport,
        )
    check_run(
        run,
        mcp_names=["mcp__hatloop__createTask", "mcp__hatloop__emit_event"],
        shell_name="exec_command",
    )
