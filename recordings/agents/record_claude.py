"""Make recordings/claude.jsonl: a real run of the `claude` backend, offline.

The real Claude Code CLI (npm `@anthropic-ai/claude-code`, installed by
`./scripts/check` into .cache/npm) runs against hatloop's local mock of the Anthropic
Messages API (`loop.testing.anthropic_mock`). The mock's scripted replies make the agent
call hatloop's MCP tools (createTask, emit_event); the loop then routes `work.done` to a
scripted finisher. Run from the repository root:

    .venv/bin/python recordings/agents/record_claude.py

Replaying the recording needs neither the CLI nor the mock: the replay backend serves
the recorded outputs through the real engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from loop.testing.anthropic_mock import MockAnthropic, ToolUseTurn

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / ".cache/npm/node_modules/@anthropic-ai/claude-code-linux-x64/claude"

LOOP_TOML = """
[loop]
prompt = "Create a task for the release notes, then publish work.done"
max_iterations = 4
iteration_timeout_seconds = 120

[tasks]
block_completion = false

[hats.writer]
description = "Plans the release notes as a task and reports"
triggers = ["task.start"]
publishes = ["work.done"]
backend = {{ type = "claude", command = [{claude}], env = {env} }}

[hats.finisher]
description = "Closes the loop once the writer reported"
triggers = ["work.done"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">notes planned</event>'] }}
"""


def main() -> int:
    """Run the loop once and copy its recording into recordings/."""
    claude = Path(os.environ.get("HATLOOP_CLAUDE_BIN", CLAUDE))
    if not claude.exists():
        print(f"error: no Claude Code CLI at {claude}; run ./scripts/check first", file=sys.stderr)
        return 2
    turns = [
        ToolUseTurn("mcp__hatloop__createTask", {"name": "Write the release notes"}),
        ToolUseTurn("mcp__hatloop__emit_event", {"topic": "work.done", "payload": "task created"}),
        "Created the task for the release notes and reported work.done.",
    ]
    with tempfile.TemporaryDirectory() as tmp, MockAnthropic(turns=turns) as mock:
        work = Path(tmp)
        (work / "home").mkdir()
        env = {
            "HOME": str(work / "home"),
            "ANTHROPIC_BASE_URL": mock.base_url,
            "ANTHROPIC_API_KEY": "offline-test-key",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        table = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"
        (work / "loop.toml").write_text(
            LOOP_TOML.format(claude=json.dumps(str(claude)), env=table), encoding="utf-8"
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "loop",
                "run",
                "--session-id",
                "claude-demo",
                "--record-session",
                "claude.jsonl",
            ],
            cwd=work,
            env={**os.environ, "ANTHROPIC_API_KEY": "offline-test-key"},
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            print(f"error: the loop ended with exit {proc.returncode}", file=sys.stderr)
            return 1
        shutil.copyfile(work / "claude.jsonl", ROOT / "recordings" / "claude.jsonl")
    print("wrote recordings/claude.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
