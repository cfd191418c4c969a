"""The three-hat loop the end-to-end agent tests run, once per agent CLI.

``python -m loop run --record-session`` runs three hats on the real CLI, offline against
a local mock of its model API, with a 200 KB prompt. The mock's script makes each hat
publish through a different channel:

* ``planner`` calls hatloop's MCP tools: ``createTask`` (the task reaches the tasks file)
  and ``emit_event`` (``plan.ready``);
* ``builder`` runs ``"$LOOP_PYTHON" -m loop emit build.done`` through the agent's shell
  tool (Codex's is a login shell);
* ``reviewer`` writes ``<event topic="LOOP_COMPLETE">`` in a message *before* a tool call,
  then ends with plain text: the tag counts although it is not in the final message.

The recording then replays without the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.testing.mock_api import MockServer, RecordedRequest, ToolUseTurn, Turn

SESSION = "e2e"
PROMPT_MARK = "END-OF-OBJECTIVE-7e1"
PROMPT = "Write the docs.\n" + "Background: " + "context " * 25_000 + "\n" + PROMPT_MARK + "\n"
EMIT = '"$LOOP_PYTHON" -m loop emit build.done "docs built"'

LOOP_TOML = """
[loop]
prompt_file = "PROMPT.md"
max_iterations = 6
iteration_timeout_seconds = {timeout}

[tasks]
block_completion = false   # the agent leaves its task open; the reviewer completes

[mcp]
serve = {serve}

[backend]
{backend}

[hats.planner]
description = "Plans the work as tasks"
triggers = ["task.start"]
publishes = ["plan.ready"]

[hats.builder]
description = "Builds what was planned"
triggers = ["plan.ready"]
publishes = ["build.done"]

[hats.reviewer]
description = "Reviews the build"
triggers = ["build.done"]
publishes = ["LOOP_COMPLETE"]
"""


def script(
    mcp_tool: Callable[[str, dict[str, Any]], ToolUseTurn],
    shell: Callable[[str], ToolUseTurn],
) -> list[Turn | str]:
    """The mock's turns for the three hats, given how this CLI names MCP and shell calls."""
    review = shell("echo reviewed")
    return [
        mcp_tool("createTask", {"name": "Write the docs"}),
        mcp_tool("emit_event", {"topic": "plan.ready", "payload": {"steps": 2}}),
        "Planned the docs.",
        shell(EMIT),
        "Built the docs.",
        ToolUseTurn(
            review.name,
            review.input,
            text='Approved. <event topic="LOOP_COMPLETE">docs approved</event>',
        ),
        "Review finished.",
    ]


def toml_table(values: dict[str, Any]) -> str:
    """An inline TOML table of strings, lists of strings and booleans."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, dict):
            return toml_table(v)
        return json.dumps(v)

    return "{ " + ", ".join(f"{k} = {value(v)}" for k, v in values.items()) + " }"


@dataclass
class Run:
    """What the end-to-end run left behind."""

    root: Path
    proc: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    exhausted: bool

    def journal(self) -> list[dict[str, Any]]:
        """The session journal's records."""
        path = self.root / ".loop" / "sessions" / SESSION / "journal.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def ends(self, hat: str) -> list[dict[str, Any]]:
        """The journal's ``iteration.end`` records of ``hat``."""
        return [r for r in self.journal() if r["kind"] == "iteration.end" and r["hat"] == hat]

    def iteration(self, hat: str) -> dict[str, Any]:
        """The journal's ``iteration.end`` record of ``hat`` (each hat runs once)."""
        ends = self.ends(hat)
        assert len(ends) == 1, ends
        return ends[0]

    def replay(self) -> subprocess.CompletedProcess[str]:
        """``python -m loop replay rec.jsonl`` in the run's folder (no CLI, no mock)."""
        return subprocess.run(
            [sys.executable, "-m", "loop", "replay", "rec.jsonl"],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def run_recorded(root: Path, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m loop run --quiet --json --record-session rec.jsonl`` in ``root``."""
    flags = ["--quiet", "--json", "--session-id", SESSION, "--record-session", "rec.jsonl"]
    return subprocess.run(
        [sys.executable, "-m", "loop", "run", *flags],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# How the agents reach hatloop's tools: the session's endpoint (its stdio server made
# unstartable, so a tool call that went that way would fail the run), or stdio alone.
TRANSPORTS = {
    "endpoint": ("true", {"mcp_command": ["false"]}),
    "stdio": ("false", {}),
}


def run_loop(
    root: Path,
    mock: MockServer,
    backend: dict[str, Any],
    *,
    transport: str = "endpoint",
    timeout: float = 240,
) -> Run:
    """Write the loop into ``root`` and run it once with ``backend`` as every hat's, its
    agents reaching hatloop's tools through ``transport`` (a key of :data:`TRANSPORTS`)."""
    (root / "PROMPT.md").write_text(PROMPT, encoding="utf-8")
    serve, extra = TRANSPORTS[transport]
    backend = {**backend, **extra}
    lines = [
        f"{k} = {toml_table(v) if isinstance(v, dict) else json.dumps(v)}"
        for k, v in backend.items()
    ]
    text = LOOP_TOML.format(timeout=timeout, serve=serve, backend="\n".join(lines))
    (root / "loop.toml").write_text(text, encoding="utf-8")
    proc = run_recorded(root, timeout=timeout * 3 + 60)
    return Run(root=root, proc=proc, requests=mock.turn_requests, exhausted=mock.exhausted)


def check_run(run: Run, *, mcp_names: Sequence[str], shell_name: str) -> None:
    """Everything the three-hat loop must show, for any agent CLI."""
    assert run.proc.returncode == 0, run.proc.stderr[-4000:]
    assert not run.exhausted, "the agents asked the model more often than scripted"
    summary = json.loads(run.proc.stdout)
    assert summary["reason"] == "completed"
    assert summary["activations"] == {"planner": 1, "builder": 1, "reviewer": 1}
    # the 200 KB prompt reached the model whole
    first = "\n".join(run.requests[0].user_texts())
    assert PROMPT_MARK in first and len(first) > 200_000
    # MCP: createTask reached the tasks file, emit_event published plan.ready
    tasks = json.loads((run.root / ".loop" / "tasks.json").read_text())
    assert [(t["name"], t["status"]) for t in tasks] == [("Write the docs", "todo")]
    planner = run.iteration("planner")
    assert planner["status"] == "ok", planner["reason"]
    assert planner["meta"]["tool_uses"] == list(mcp_names)
    assert "tool_errors" not in planner["meta"], planner["meta"]
    assert [(e["topic"], e["payload"]) for e in planner["emitted"]] == [
        ("plan.ready", {"steps": 2})
    ]
    # the shell: "$LOOP_PYTHON" -m loop emit through the agent's shell tool
    builder = run.iteration("builder")
    assert builder["meta"]["tool_uses"] == [shell_name]
    assert [(e["topic"], e["payload"]) for e in builder["emitted"]] == [
        ("build.done", "docs built")
    ]
    assert [(e["topic"], e["source"]) for e in builder["triggers"]] == [("plan.ready", "planner")]
    # a tag written before a tool call, not in the final message
    reviewer = run.iteration("reviewer")
    assert reviewer["output"].endswith("Review finished.")
    assert [e["topic"] for e in reviewer["events"]] == ["LOOP_COMPLETE"]
    assert reviewer["completed"] is True
    # tokens were recorded for every iteration
    for record in (planner, builder, reviewer):
        assert record["input_tokens"] and record["output_tokens"], record
    # and the recording replays without the CLI
    replay = run.replay()
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr[-2000:]
    assert "rec.jsonl: 3 iteration(s), completed" in replay.stdout
