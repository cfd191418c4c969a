"""A hat's agent that uses hatloop's tools through the session's MCP endpoint.

Run by a ``command`` backend: it connects to ``$LOOP_MCP_URL`` with ``$LOOP_MCP_TOKEN``
(the official SDK's client over streamable HTTP), calls ``get_session_status`` and
``emit_event`` (the topic given as its argument), and tries the secret an earlier
iteration left in ``old-token`` (which must be refused). What it saw goes to
``seen-<iteration>.json`` in its working folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def use_tools(old_token: str | None) -> dict[str, Any]:
    """Call the tools with this iteration's secret; try the previous one; say what happened."""
    url, token = os.environ["LOOP_MCP_URL"], os.environ["LOOP_MCP_TOKEN"]
    hat, topic = os.environ["LOOP_HAT"], sys.argv[1]
    seen: dict[str, Any] = {"hat": hat, "url": url}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), raise_exceptions=True) as client,
    ):
        status = await client.call_tool("get_session_status", {})
        assert status.structured_content is not None
        seen["status"] = {k: status.structured_content[k] for k in ("session_id", "status")}
        emitted = await client.call_tool("emit_event", {"topic": topic, "payload": {"via": "mcp"}})
        assert emitted.structured_content is not None
        seen["events_file"] = emitted.structured_content["events_file"]
    if old_token is not None:  # the secret of the previous iteration, whose call has ended
        async with httpx2.AsyncClient() as raw:
            reply = await raw.post(
                url,
                headers={"Authorization": f"Bearer {old_token}"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
        seen["old_token_status"] = reply.status_code
    return seen


def main() -> None:
    old = Path("old-token")
    seen = anyio.run(use_tools, old.read_text() if old.exists() else None)
    old.write_text(os.environ["LOOP_MCP_TOKEN"])
    Path(f"seen-{os.environ['LOOP_ITERATION']}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main()
