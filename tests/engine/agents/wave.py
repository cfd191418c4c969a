"""A real subprocess agent for parallel hats: ``wave.py DIR [MODE]``.

* ``coordinator`` fans out three ``review.perspective`` events with ``emit --payloads``;
* ``reviewer`` writes ``DIR/started-N`` for its perspective N, then waits until the three
  reviewers have started (which proves they overlap, with no timing), then publishes
  ``review.done`` (MODE ``failN``: perspective N fails instead; ``hangN``: it hangs,
  writing its pid to ``DIR/pid-N``; ``hangall``: the three hang; ``solo``: it does not
  wait for the others);
  ``hold``: perspectives 1 and 3 hang until ``DIR/release`` exists, 2 ends at once;
  ``hold-tasks``: as ``hold``, each first creating a task ``review N`` through the CLI, in
  perspective order (N waits for ``DIR/task-(N-1)``), so a replay makes them in that order;
  ``mcp``: it publishes through the session's MCP endpoint (``emit_event`` with its own
  ``$LOOP_MCP_TOKEN``), the three calls at once, and writes the reply to ``DIR/mcp-N.json``;
* ``synthesizer`` writes its prompt to ``DIR/synthesis.txt`` and completes the loop.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def emit_through_mcp(n: str) -> dict[str, object]:
    """Publish ``review.done`` with the session endpoint's ``emit_event``; its reply."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def call() -> dict[str, object]:
        headers = {"Authorization": f"Bearer {os.environ['LOOP_MCP_TOKEN']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(os.environ["LOOP_MCP_URL"], http_client=http)) as client,
        ):
            args = {"topic": "review.done", "payload": f"findings of perspective {n}"}
            reply = await client.call_tool("emit_event", args)
            assert not reply.is_error, reply
            return dict(reply.structured_content or {})

    return anyio.run(call)


folder = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else ""
prompt = sys.stdin.read()
hat = os.environ["LOOP_HAT"]
python = os.environ.get("LOOP_PYTHON", sys.executable)
if hat == "coordinator":
    payloads = ["perspective-1", "perspective-2", "perspective-3"]
    subprocess.run(
        [python, "-m", "loop", "emit", "review.perspective", "--payloads", *payloads], check=True
    )
elif hat == "reviewer":
    found = re.search(r"perspective-(\d)", prompt)
    assert found, prompt
    n = found.group(1)
    (folder / f"started-{n}").write_text(os.environ["LOOP_ITERATION"])
    if mode in (f"hang{n}", "hangall"):
        (folder / f"pid-{n}").write_text(str(os.getpid()))
        time.sleep(3600)
    if mode == "hold-tasks":
        while n != "1" and not (folder / f"task-{int(n) - 1}").exists():
            time.sleep(0.01)
        task = [python, "-m", "loop", "task", "create", f"review {n}", "--json"]
        subprocess.run(task, check=True, stdout=subprocess.DEVNULL)
        (folder / f"task-{n}").write_text("")
    hold = mode in ("hold", "hold-tasks")
    if hold and n != "2" and not (folder / "release").exists():
        (folder / f"pid-{n}").write_text(str(os.getpid()))
        time.sleep(3600)  # until the test kills the loop (and then this orphan)
    deadline = time.monotonic() + 120  # a safety net only: the three start at once
    while mode not in ("solo", "hold", "hold-tasks") and len(list(folder.glob("started-*"))) < 3:
        if time.monotonic() > deadline:
            sys.exit("the other reviewers never started: the wave did not run in parallel")
        time.sleep(0.01)
    if mode == f"fail{n}":
        sys.exit(f"reviewer {n} broke")
    if mode == "mcp":
        (folder / f"mcp-{n}.json").write_text(json.dumps(emit_through_mcp(n)))
    else:
        print(f'<event topic="review.done">findings of perspective {n}</event>')
else:
    (folder / "synthesis.txt").write_text(prompt)
    print('<event topic="LOOP_COMPLETE">report written</event>')
