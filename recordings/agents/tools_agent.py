"""A real agent that uses hatloop's task, theme and experience tools (recordings/tools.jsonl).

Run by the ``command`` backend, it reads its prompt on stdin and works only from what the
tools answer (no state of its own), through both ways an agent reaches the tools:

* the CLI: ``python -m loop task create ...`` in a subprocess (``--json`` replies);
* MCP: the session's endpoint (``$LOOP_MCP_URL`` with ``$LOOP_MCP_TOKEN``), through the
  official SDK's client over streamable HTTP.

The ``planner`` creates a release task and its two subtasks (CLI and MCP), reads the
theme status and previews the next theme (CLI), and tries to start a theme whose file is
not in the themebox (MCP: a tool error, recorded as such). The ``worker`` starts the
release (MCP) and completes the subtask it is given (CLI); after the first one it claims
completion too early, which the loop refuses (tasks are open). Once every task is done
it exports what it learnt as an experience (MCP and CLI) and completes the loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SUMMARY = {
    "ai_name": "tools agent",
    "ai_context": "A scripted agent of hatloop's recordings",
    "experience_summary": "Planned a release as tasks and finished them in order.",
    "experience_flow": ["plan", "work", "review"],
    "main_topics": ["task order", "completion gate"],
}


def cli(*args: str) -> dict[str, Any]:
    """``python -m loop ARGS --json``: the reply (an error's JSON too)."""
    proc = subprocess.run(
        [sys.executable, "-m", "loop", *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    reply: dict[str, Any] = json.loads(proc.stdout)
    return reply


async def mcp(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Call tools over the session's MCP endpoint; each reply (an error's JSON too)."""
    url, token = os.environ["LOOP_MCP_URL"], os.environ["LOOP_MCP_TOKEN"]
    replies = []
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            if result.structured_content is not None:
                replies.append(dict(result.structured_content))
            else:
                text = result.content[0].text if result.content else "{}"  # type: ignore[union-attr]
                replies.append(json.loads(text))
    return replies


def call_mcp(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`mcp`, from synchronous code."""
    return anyio.run(mcp, list(calls))


def emit(topic: str, payload: str) -> None:
    subprocess.run([sys.executable, "-m", "loop", "emit", topic, payload], check=True)


def planner() -> None:
    root = cli("task", "create", "--name", "Release 1.0", "--description", "ship it")["task"]
    cli("task", "create", "--name", "Write the notes", "--parent-id", root["id"])
    [tag, theme_error] = call_mcp(
        ("createTask", {"name": "Tag the release", "parent_id": root["id"]}),
        (
            "start_theme",
            {
                "target_filename": "release.md",
                "themeName": "Release",
                "themeDirectoryPart": "release",
                "reason": "the release is planned",
            },
        ),
    )
    status = cli("theme", "status")
    preview = cli("theme", "preview")
    print(f"Planned {root['name']}: notes, then {tag['task']['name']}.")
    print(f"Theme: {status['message'].splitlines()[0]} / {preview['message']}")
    print(f"start_theme said: {theme_error['error']['code']}")
    emit("plan.ready", root["id"])


def worker() -> None:
    [listed] = call_mcp(("listTasks", {}))
    tasks = listed["tasks"]
    todo = [t for t in tasks if t["status"] != "done"]
    if not todo:
        export()
        return
    working = [t for t in todo if t["status"] == "in_progress" and t.get("parent_id")]
    if not working:
        root = next(t for t in tasks if not t.get("parent_id"))
        [started] = call_mcp(("startTask", {"id": root["id"]}))
        working = [started["subtask"]]
    task = working[0]
    done = cli("task", "complete", "--id", task["id"], "--resolution", f"did {task['name']}")
    print(f"Completed {task['name']}; next: {done.get('next_task_id')}.")
    if task["name"] == "Write the notes":  # too early on purpose: tasks are still open
        print('<event topic="LOOP_COMPLETE">surely done</event>')
    else:
        print(f'<event topic="work.next">{task["name"]} done</event>')


def export() -> None:
    init = {"summary": SUMMARY, "metadata": {"by": "agent"}}
    [started] = call_mcp(("export_experience_init", init))
    sid = started["session_id"]
    batch = [{"user_input": "plan it", "ai_response": "three tasks", "reasoning": "small steps"}]
    cli(
        "experience",
        "conversations",
        sid,
        "--batch-number",
        "1",
        "--conversations-batch",
        json.dumps(batch),
    )
    thoughts = {"session_id": sid, "thoughts": {"insights": ["order first"]}}
    call_mcp(("export_experience_thoughts", thoughts))
    final = cli("experience", "finalize", sid)
    listed = cli("experience", "list")
    count = len(listed["experience_directories"])
    print(f"Exported {sid}: {final['directory_path']}, {count} listed.")
    print('<event topic="LOOP_COMPLETE">release shipped</event>')


def main() -> int:
    sys.stdin.read()
    if os.environ["LOOP_HAT"] == "planner":
        planner()
    else:
        worker()
    return 0


if __name__ == "__main__":
    sys.exit(main())
