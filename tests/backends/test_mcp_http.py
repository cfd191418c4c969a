"""The streamable-HTTP stand-in of the session's MCP endpoint refuses a caller without the token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from loop.tools.base import ToolContext
from tests.backends.mcp_http import HttpMCP

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


def _post(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(INIT).encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **headers,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def test_token_is_required(tmp_path: Path) -> None:
    """No token or a wrong one: 401; the right bearer token: the server answers."""
    with HttpMCP(ToolContext(root=tmp_path)) as server:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(urllib.error.HTTPError, match="401"):
                _post(server.url, headers)
        assert _post(server.url, {"Authorization": f"Bearer {server.token}"}) == 200
    assert server.refused == ["/mcp", "/mcp"]
