"""End to end: a wave of three real agent CLIs, each calling hatloop's tools at once.

A loop runs ``python -m loop run --record-session`` on a review wave: a scripted
``coordinator`` fans out three ``review.perspective`` events, the ``reviewer`` hat
(``concurrency = 3``: the real Claude Code, Gemini or Codex CLI, offline against its
local mock API) runs three activations at once, and a scripted ``synthesizer``
aggregates the wave. Each reviewer's conversation has its own script: it publishes
``review.done`` through the session's MCP endpoint (``emit_event``), with its
iteration's own secret, while the other two are in flight. Each event must land in its
own activation, and the recording replay.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loop.testing.anthropic_mock import MockAnthropic
from loop.testing.gemini_mock import MockGemini
from loop.testing.mock_api import MockServer, ToolUseTurn, Turn
from loop.testing.openai_mock import MockOpenAI
from tests.backends.conftest import claude_env, codex_env, gemini_env, require_claude, require_cli
from tests.tools.agent_e2e import Run, run_recorded, toml_table


@dataclass(frozen=True)
class Agent:
    """One agent CLI: its mock API, its environment, its backend table, its tool's name."""

    kind: str
    mock: type[MockServer]
    binary: Callable[[], Path]
    env: Callable[[Path, str], dict[str, str]]
    tool: str  # how the CLI names hatloop's emit_event
    extra: str = ""  # more keys of the backend table


AGENTS = {
    "claude": Agent(
        "claude", MockAnthropic, require_claude, claude_env, "mcp__hatloop__emit_event"
    ),
    "gemini": Agent(
        "gemini",
        MockGemini,
        lambda: require_cli("gemini"),
        lambda home, url: gemini_env(home, url, max_attempts=1),
        "mcp_hatloop_emit_event",
        ', model = "gemini-mock"',
    ),
    "codex": Agent(
        "codex",
        MockOpenAI,
        lambda: require_cli("codex"),
        lambda home, url: codex_env(home, url, retries=False),
        "mcp__hatloop__emit_event",
    ),
}

PERSPECTIVES = ("security", "performance", "docs")

LOOP_TOML = """
[loop]
prompt = "Review the change."
starting_event = "review.start"
max_iterations = 8
iteration_timeout_seconds = 100

[hats.coordinator]
triggers = ["review.start"]
publishes = ["review.perspective"]
backend = {{ type = "scripted", outputs = [{fan_out}] }}

[hats.reviewer]
triggers = ["review.perspective"]
publishes = ["review.done"]
concurrency = 3
backend = {{ type = "{kind}", command = [{binary}], env = {env}{extra} }}

[hats.synthesizer]
triggers = ["review.done"]
publishes = ["LOOP_COMPLETE"]
aggregate = {{ mode = "wait_for_all", timeout_seconds = 100 }}
backend = {{ type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">report written</event>'] }}
"""


def conversation(agent: Agent, perspective: str) -> list[Turn | str]:
    """What the model says to the reviewer of ``perspective``: publish, then sum up."""
    payload = {"perspective": perspective, "findings": 1}
    return [
        ToolUseTurn(agent.tool, {"topic": "review.done", "payload": payload}),
        f"Reviewed {perspective}.",
    ]


@dataclass
class Wave(Run):
    """What the run left behind, and the CLI that ran it."""

    agent: Agent = field(kw_only=True)


@pytest.fixture(
    scope="module",
    params=[pytest.param(kind, marks=getattr(pytest.mark, kind)) for kind in AGENTS],
)
def wave(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Wave:
    """Run the wave once per CLI (three real CLIs start slowly); every test reads it."""
    agent = AGENTS[request.param]
    binary = agent.binary()
    root = tmp_path_factory.mktemp(f"wave-{agent.kind}")
    (root / "home").mkdir()
    talks = {f"perspective {p}": conversation(agent, p) for p in PERSPECTIVES}
    with agent.mock(conversations=talks, default="(no turn scripted)") as mock:
        tags = "".join(
            f'<event topic="review.perspective">perspective {p}</event>' for p in PERSPECTIVES
        )
        (root / "loop.toml").write_text(
            LOOP_TOML.format(
                fan_out=json.dumps(tags),
                kind=agent.kind,
                binary=json.dumps(str(binary)),
                env=toml_table(agent.env(root / "home", mock.base_url)),
                extra=agent.extra,
            ),
            "utf-8",
        )
        proc = run_recorded(root, timeout=300)
        wave = Wave(root, proc, mock.turn_requests, mock.exhausted, agent=agent)
        remaining = mock.remaining
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not wave.exhausted, "a reviewer asked the model more often than its conversation holds"
    assert remaining == 0, "a reviewer did not finish its conversation"
    return wave


def test_the_wave_completes(wave: Wave) -> None:
    """Exit 0, completed, after one coordinator, three reviewers and one synthesizer."""
    assert wave.proc.returncode == 0, wave.proc.stderr[-3000:]
    summary = json.loads(wave.proc.stdout)
    assert summary["reason"] == "completed"
    assert summary["activations"] == {"coordinator": 1, "reviewer": 3, "synthesizer": 1}


def test_the_three_reviewers_ran_together(wave: Wave) -> None:
    """The three reviewer activations started before any of them ended."""
    order = [
        (r["kind"], r["hat"])
        for r in wave.journal()
        if r["kind"] in ("iteration.start", "iteration.end") and r["hat"] == "reviewer"
    ]
    assert order[:3] == [("iteration.start", "reviewer")] * 3


def test_each_reviewers_event_is_its_own_activations(wave: Wave) -> None:
    """The event each CLI emitted through the endpoint belongs to the activation that was
    given that perspective: the three secrets, live at once, never crossed."""
    seen = []
    for end in wave.ends("reviewer"):
        assert end["status"] == "ok", end
        if wave.agent.kind == "claude":  # the CLI that reports its servers and tools
            assert end["meta"]["mcp_servers"] == [{"name": "hatloop", "status": "connected"}]
            assert end["meta"]["tool_uses"] == ["mcp__hatloop__emit_event"]
        (trigger,) = end["triggers"]
        perspective = trigger["payload"].removeprefix("perspective ")
        assert [(e["topic"], e["payload"], e["source"]) for e in end["emitted"]] == [
            ("review.done", {"perspective": perspective, "findings": 1}, "reviewer")
        ]
        seen.append(perspective)
    assert sorted(seen) == sorted(PERSPECTIVES)


def test_the_synthesizer_ran_once_on_the_whole_wave(wave: Wave) -> None:
    """The aggregator ran after the three, with their three results."""
    (synthesis,) = wave.ends("synthesizer")
    found = sorted(t["payload"]["perspective"] for t in synthesis["triggers"])
    assert found == sorted(PERSPECTIVES)
    assert {t["source"] for t in synthesis["triggers"]} == {"reviewer"}


def test_the_wave_replays(wave: Wave) -> None:
    """``loop replay`` runs the parallel recording, tool calls included, without divergence."""
    proc = wave.replay()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "rec.jsonl: 5 iteration(s), completed" in proc.stdout
