"""What the agent-CLI backends (``claude``, ``gemini``, ``codex``) share, in pure code.

* which of the iteration's variables hatloop's MCP server needs;
* where that server is: the session's loopback endpoint (``LOOP_MCP_URL`` with the
  bearer secret ``LOOP_MCP_TOKEN``) when the loop serves one, else a stdio command;
* reading a CLI's JSON-lines stream without tripping on noise;
* turning a CLI's error text into one clean line for an iteration's reason;
* a tool call in one short line, for a person following the agent (``-v``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loop.locations import ENV_MCP_TOKEN, ENV_MCP_URL, TOOL_SERVER_VARIABLES

__all__ = [
    "MCP_SERVER_NAME",
    "McpEndpoint",
    "call_text",
    "cost_or_none",
    "count_or_none",
    "error_line",
    "json_line",
    "json_lines",
    "mcp_endpoint",
    "mcp_server_env",
    "one_line",
    "stdio_command",
]

MCP_SERVER_NAME = "hatloop"
REASON_LIMIT = 300  # characters of a CLI's message kept in an iteration's reason

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_SPACE = re.compile(r"\s+")
_ERROR_START = re.compile(r"(error|fatal)\b", re.IGNORECASE)
_USAGE = re.compile(r"usage:", re.IGNORECASE)
_HEADING = re.compile(r"[\w -]+:\s*")  # a usage text's "Options:", "Commands:"


@dataclass(frozen=True, slots=True)
class McpEndpoint:
    """The session's MCP endpoint: streamable HTTP on loopback, behind a bearer secret."""

    url: str
    token: str


def mcp_endpoint(env: Mapping[str, str]) -> McpEndpoint | None:
    """The endpoint named by ``LOOP_MCP_URL`` and ``LOOP_MCP_TOKEN``, if both are set."""
    url = env.get(ENV_MCP_URL, "")
    token = env.get(ENV_MCP_TOKEN, "")
    return McpEndpoint(url, token) if url and token else None


def stdio_command(mcp_command: Sequence[str] | None) -> list[str]:
    """The stdio server's command: the configured one, else this Python ``-m loop mcp``."""
    return list(mcp_command) if mcp_command else [sys.executable, "-m", "loop", "mcp"]


def mcp_server_env(env: Mapping[str, str]) -> dict[str, str]:
    """Of ``env``, the variables hatloop's MCP server needs (``TOOL_SERVER_VARIABLES``)."""
    return {key: env[key] for key in TOOL_SERVER_VARIABLES if env.get(key)}


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines stream; other lines (warnings, noise) are skipped."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            yield item


def json_line(line: str) -> dict[str, Any] | None:
    """One line of a JSON-lines stream as its object, or None (noise, a cut line)."""
    return next(json_lines(line), None) if line.lstrip().startswith("{") else None


CALL_TEXT_LIMIT = 160  # characters of a tool call shown to a person
# The input that says most about a call, by the names the CLIs' tools give it.
_TELLING = ("command", "cmd", "file_path", "path", "absolute_path", "pattern", "query", "url")


def call_text(name: str, args: Any = None) -> str:
    """A tool call in one line: its name and its most telling input (a shell command, a
    path...), else its input as compact JSON; cut at :data:`CALL_TEXT_LIMIT`."""
    shown = ""
    if isinstance(args, dict):
        telling = next((args[k] for k in _TELLING if isinstance(args.get(k), str | list)), None)
        if isinstance(telling, list):
            telling = " ".join(str(part) for part in telling)
        shown = (
            telling
            if telling is not None
            else (json.dumps(args, ensure_ascii=False) if args else "")
        )
    elif args not in (None, ""):
        shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return one_line(f"{name} {shown}".strip(), CALL_TEXT_LIMIT)


def count_or_none(value: Any) -> int | None:
    """``value`` when it is a count (an int, not a bool, not negative), else ``None``: a
    CLI's token count of -5 is no count, and would give a budget tokens back."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cost_or_none(value: Any) -> float | None:
    """``value`` as dollars when it is a finite number, not negative (not a bool), else
    ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and cost >= 0 else None


def _embedded_message(text: str) -> str:
    # APIs' error bodies often arrive as JSON text inside the CLI's message:
    # '[API Error: {"error":{"code":400,"message":"bad model","status":...}}]'
    start = text.find("{")
    if start < 0:
        return text
    try:
        body, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(error, dict) or not isinstance(message, str) or not message.strip():
        return text
    head = text[:start].rstrip(" :[").removeprefix("[")
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        head = f"{head} {code}".strip()
    tail = text[end:].lstrip("]").strip()
    return (f"{head}: " if head else "") + message.strip() + (f" ({tail})" if tail else "")


def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    """``text`` as one clean line: no ANSI codes, an embedded API error body reduced to its
    message, whitespace collapsed, and cut at ``limit`` characters keeping the start."""
    clean = _SPACE.sub(" ", _embedded_message(_ANSI.sub("", text))).strip()
    return clean if len(clean) <= limit else clean[: limit - 1].rstrip() + "…"


def error_line(raw: bytes | str) -> str:
    """The line of a CLI's stderr that best says what went wrong, as :func:`one_line`.

    The last line that starts with ``error`` (or ``fatal``), else the last line that reads
    as a message: stack frames and dumped objects (indented lines) and lone brackets are
    skipped, so neither a trace nor a usage text after the message hides it. A usage text
    (from its ``Usage:`` line on: headings, options) follows the message it explains
    (Gemini CLI's ``Unknown arguments: ...``): a message before it is the one.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    usage = next((i for i, ln in enumerate(lines) if _USAGE.match(ln)), None)
    if usage:  # something came before the usage text: the message
        lines = lines[:usage]
    messages = [
        ln
        for ln in lines
        if not ln[:1].isspace() and any(c.isalnum() for c in ln) and not _HEADING.fullmatch(ln)
    ]
    errors = [ln for ln in messages if _ERROR_START.match(ln)]
    chosen = errors or messages or lines
    return one_line(chosen[-1]) if chosen else ""
