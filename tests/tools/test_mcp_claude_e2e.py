"""End to end: the real Claude Code CLI in a hat calls hatloop's tools over MCP.

A loop runs ``python -m loop run --record-session`` with two hats: ``worker`` on the
``claude`` backend (the real CLI, offline against the local mock Messages API) and
``finisher`` (scripted) triggered by ``work.done``. The mock's scripted replies make
the agent call ``mcp__hatloop__createTask``, a failing ``getTask``,
``get_session_status`` and ``emit_event``; the loop then routes ``work.done`` to the
finisher, which completes it.

It runs twice: with the session's MCP endpoint (the default: the CLI connects to the
loop's server over HTTP with the iteration's secret), and with ``[mcp] serve = false``
(the CLI starts ``python -m loop mcp`` over stdio for the iteration).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from loop.testing.anthropic_mock import MockAnthropic, ToolUseTurn, Turn
from tests.backends.conftest import claude_env, require_claude
from tests.tools.agent_e2e import SESSION, Run, run_recorded, toml_table

pytestmark = pytest.mark.claude

TURNS: list[Turn | str] = [
    ToolUseTurn("mcp__hatloop__createTask", {"name": "Write the docs"}),
    ToolUseTurn("mcp__hatloop__getTask", {"id": "no-such-task"}),
    ToolUseTurn("mcp__hatloop__get_session_status", {}),
    ToolUseTurn("mcp__hatloop__emit_event", {"topic": "work.done", "payload": {"docs": 1}}),
    "Created the task and reported work.done.",
]

LOOP_TOML = """
[loop]
prompt = "Create a task for the docs, then publish work.done"
max_iterations = 4
iteration_timeout_seconds = 100

[tasks]
block_completion = false   # the agent leaves its task open; the finisher may complete

[mcp]
serve = {serve}

[hats.worker]
description = "Creates the task and reports"
triggers = ["task.start"]
publishes = ["work.done"]
backend = {{ type = "claude", command = [{claude}], env = {env} }}

[hats.finisher]
triggers = ["work.done"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">finished</event>'] }}
"""


@dataclass
class ClaudeRun(Run):
    """What the end-to-end run left behind, and the transport its tools went through."""

    transport: str = field(kw_only=True)

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results the CLI sent back to the model, in order."""
        return self.requests[-1].tool_results()


@pytest.fixture(scope="module", params=["endpoint", "stdio"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ClaudeRun:
    """Run the loop once per transport (the real CLI is slow to start); every test reads
    the results."""
    claude = require_claude()
    transport: str = request.param
    root = tmp_path_factory.mktemp(f"e2e-{transport}")
    (root / "home").mkdir()
    with MockAnthropic(turns=TURNS) as mock:
        env = claude_env(root / "home", mock.base_url)
        (root / "loop.toml").write_text(
            LOOP_TOML.format(
                claude=json.dumps(str(claude)),
                env=toml_table(env),
                serve='"auto"' if transport == "endpoint" else "false",
            ),
            "utf-8",
        )
        proc = run_recorded(root, timeout=110)
        run = ClaudeRun(root, proc, mock.turn_requests, mock.exhausted, transport=transport)
    assert not run.exhausted, "the agent asked the model more often than scripted"
    return run


def test_loop_completes(run: ClaudeRun) -> None:
    """The run ends completed (exit 0) after the worker and the finisher."""
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    summary = json.loads(run.proc.stdout)
    assert summary["reason"] == "completed"
    assert summary["activations"] == {"worker": 1, "finisher": 1}


def test_the_agent_had_the_tools_from_its_first_turn(run: ClaudeRun) -> None:
    """The first request to the model already offered hatloop's tools, through the
    transport the run chose (the endpoint's secret is not in the file)."""
    first = run.requests[0].body
    offered = [t["name"] for t in first.get("tools", [])]
    assert "mcp__hatloop__createTask" in offered and "mcp__hatloop__emit_event" in offered
    folder = run.root / ".loop" / "sessions" / SESSION / "iterations" / "000001" / "attempt-1"
    server = json.loads((folder / "claude-mcp.json").read_text())["mcpServers"]["hatloop"]
    if run.transport == "endpoint":
        assert server == {
            "type": "http",
            "url": "${LOOP_MCP_URL}",
            "headers": {"Authorization": "Bearer ${LOOP_MCP_TOKEN}"},
        }
    else:
        assert server["args"] == ["-m", "loop", "mcp"]


def test_agent_created_the_task_in_the_tasks_file(run: ClaudeRun) -> None:
    """createTask over MCP wrote the task to the loop's tasks file."""
    tasks = json.loads((run.root / ".loop" / "tasks.json").read_text())
    assert [(t["name"], t["status"]) for t in tasks] == [("Write the docs", "todo")]


def test_tool_results_reached_the_model(run: ClaudeRun) -> None:
    """Results and the structured error came back to the model as tool results."""
    results = run.tool_results()
    assert len(results) == 4
    created, missing, status, emitted = (json.loads(str(r["content"])) for r in results)
    assert created["task"]["name"] == "Write the docs"
    assert missing == {
        "error": {
            "code": "task_not_found",
            "message": "task 'no-such-task' not found",
            "details": {"id": "no-such-task"},
        }
    }
    assert results[1].get("is_error") is True
    assert not any(r.get("is_error") for i, r in enumerate(results) if i != 1)
    assert (status["session_id"], status["status"]) == (SESSION, "running")
    assert emitted["topic"] == "work.done"


def test_emitted_event_reached_the_bus_and_the_journal(run: ClaudeRun) -> None:
    """work.done, emitted through MCP, is the worker's event and triggered the finisher."""
    worker = run.iteration("worker")
    assert worker["status"] == "ok"
    assert worker["meta"]["mcp_servers"] == [{"name": "hatloop", "status": "connected"}]
    assert worker["meta"]["tool_uses"] == [
        "mcp__hatloop__createTask",
        "mcp__hatloop__getTask",
        "mcp__hatloop__get_session_status",
        "mcp__hatloop__emit_event",
    ]
    assert [(e["topic"], e["payload"], e["source"]) for e in worker["emitted"]] == [
        ("work.done", {"docs": 1}, "worker")
    ]
    finisher = run.iteration("finisher")
    assert [(e["topic"], e["source"]) for e in finisher["triggers"]] == [("work.done", "worker")]


def test_iterations_are_recorded(run: ClaudeRun) -> None:
    """The recording holds both iterations with their events and a completed footer."""
    records = [json.loads(line) for line in (run.root / "rec.jsonl").read_text().splitlines()]
    iterations = [r for r in records if r["kind"] == "iteration"]
    assert [(r["hat"], [e["topic"] for e in r["events"]]) for r in iterations] == [
        ("worker", ["work.done"]),
        ("finisher", ["LOOP_COMPLETE"]),
    ]
    assert iterations[0]["output"] == "Created the task and reported work.done."
    assert records[-1]["kind"] == "footer"


def test_recording_replays(run: ClaudeRun) -> None:
    """``loop replay`` runs the recording again without a divergence."""
    proc = run.replay()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "rec.jsonl: 2 iteration(s), completed" in proc.stdout
