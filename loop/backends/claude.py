"""The ``claude`` backend: the real Claude Code CLI in headless stream-json mode.

One iteration runs ``claude -p --output-format stream-json --verbose`` with the prompt
on stdin. The CLI prints NDJSON: a ``system``/``init`` line (tools, MCP servers and
their status), ``assistant`` and ``user`` lines (text, tool uses, tool results) and a
final ``result`` line with the answer, ``is_error``, ``total_cost_usd``, ``usage`` and
``num_turns``. The result line is the truth: no result line, ``is_error``, a non-zero
exit or a timeout make a failed iteration whose reason says which. A failure caused by
a rate or usage limit (``api_error_status`` 429, a rejected ``rate_limit_event`` with
its ``resetsAt``) is classified as such (:func:`rate_limit`): the loop waits it out.

With ``mcp = true`` (the default) the agent gets hatloop's tools through a
``--mcp-config`` file written in the iteration's folder, and the whole server is allowed
(``--allowedTools mcp__hatloop``). Inside a loop that serves them (``LOOP_MCP_URL`` and
``LOOP_MCP_TOKEN`` in the iteration's environment) the entry is the session's endpoint
over HTTP, already up when the CLI starts; the file names the two variables, which the
CLI expands, so the secret is never written to disk. Otherwise it starts
``python -m loop mcp`` over stdio with the session's ``LOOP_*`` variables.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from loop._fs import make_folders, write_json
from loop.backends._agent import (
    call_text,
    cost_or_none,
    count_or_none,
    json_line,
    mcp_endpoint,
    mcp_server_env,
)
from loop.backends._limits import classify_text
from loop.backends._process import ProcessResult, last_line, stop_reason
from loop.backends.agent_cli import AgentCliBackend
from loop.backends.base import (
    BackendRequest,
    BackendResult,
    OutputKind,
    OutputReader,
    RateLimit,
    child_env,
    effective_timeout,
)
from loop.config.backends import ClaudeConfig
from loop.locations import ENV_MCP_TOKEN, ENV_MCP_URL

__all__ = [
    "MCP_SERVER_NAME",
    "ClaudeBackend",
    "ClaudeConfig",
    "StreamReader",
    "StreamSummary",
    "build_argv",
    "effective_timeout",
    "mcp_config",
    "parse_stream",
    "rate_limit",
    "summarize",
]

log = structlog.get_logger(__name__)

MCP_SERVER_NAME = "hatloop"
MCP_CONFIG_NAME = "claude-mcp.json"
# The agent's first turn waits for hatloop's tools. In print mode (-p) the CLI connects
# its MCP servers in the background and asks the model at once (checked with 2.1.197: a
# server that is slow to start is missing from the first request); with
# MCP_CONNECTION_NONBLOCKING=false it waits, up to MCP_CONNECT_TIMEOUT_MS (default 5 s),
# and the wait ends as soon as the server is connected. The session's endpoint is up
# before the CLI starts and answers in milliseconds; the stdio fallback starts a Python
# process, which took over 3 s on a busy machine. A user's own values win.
MCP_WAIT_ENV = {"MCP_CONNECTION_NONBLOCKING": "false", "MCP_CONNECT_TIMEOUT_MS": "60000"}


# -- pure parts ---------------------------------------------------------------------------


def mcp_config(config: ClaudeConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """The ``--mcp-config`` document naming hatloop's MCP server (pure).

    With the session's endpoint in ``env``, an HTTP entry whose URL and secret the CLI
    takes from its environment (``${LOOP_MCP_URL}``...); else a stdio entry starting the
    server (as the other agent backends do).

    Args:
        config: the backend settings (``mcp_command``: the stdio server's command).
        env: the variables of the iteration; only those the server needs are passed on
            (:func:`~loop.backends._agent.mcp_server_env`).
    """
    if mcp_endpoint(env) is not None:
        server: dict[str, Any] = {
            "type": "http",
            "url": f"${{{ENV_MCP_URL}}}",
            "headers": {"Authorization": f"Bearer ${{{ENV_MCP_TOKEN}}}"},
        }
        return {"mcpServers": {MCP_SERVER_NAME: server}}
    command = config.mcp_command or [sys.executable, "-m", "loop", "mcp"]
    server_env = mcp_server_env(env)
    server = {"command": command[0], "args": list(command[1:]), "env": server_env}
    return {"mcpServers": {MCP_SERVER_NAME: server}}


def build_argv(config: ClaudeConfig, mcp_config_file: Path | None = None) -> list[str]:
    """The CLI's argv for one iteration (pure; the prompt goes on stdin).

    The user's ``args`` come right after the fixed flags; hatloop's own options follow,
    each introduced by its flag, so that a variadic option in ``args`` (the CLI has
    several) cannot swallow them. ``--allowedTools`` is last, as one comma-joined value.
    """
    argv = [*config.command, "-p", "--output-format", "stream-json", "--verbose", *config.args]
    if config.model:
        argv += ["--model", config.model]
    if config.permission_mode:
        argv += ["--permission-mode", config.permission_mode]
    allowed = list(config.allowed_tools)
    if mcp_config_file is not None:
        argv += ["--mcp-config", str(mcp_config_file)]
        allowed.insert(0, f"mcp__{MCP_SERVER_NAME}")
    if allowed:
        argv += ["--allowedTools", ",".join(allowed)]
    return argv


@dataclass(slots=True)
class StreamSummary:
    """What the NDJSON stream said: the result line and what led to it."""

    result: dict[str, Any] | None = None
    session_id: str | None = None
    tool_uses: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    api_retries: int = 0
    bad_lines: int = 0
    rate_limit: dict[str, Any] | None = None  # the last rejected rate_limit_info
    error: str | None = None  # an assistant message's error kind (rate_limit...)


def parse_stream(stdout: str) -> StreamSummary:
    """Read the CLI's NDJSON output, skipping lines that are not JSON objects (pure)."""
    summary = StreamSummary()
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            summary.bad_lines += 1
            continue
        if not isinstance(item, dict):
            summary.bad_lines += 1
            continue
        summary.session_id = item.get("session_id") or summary.session_id
        kind = item.get("type")
        if kind == "result":
            summary.result = item
        elif kind == "system" and item.get("subtype") == "init":
            summary.mcp_servers = [s for s in item.get("mcp_servers") or [] if isinstance(s, dict)]
        elif kind == "system" and item.get("subtype") == "api_retry":
            summary.api_retries += 1
        elif kind == "assistant":
            _collect_assistant(item, summary)
            if isinstance(item.get("error"), str):
                summary.error = item["error"]
        elif kind == "rate_limit_event":
            info = item.get("rate_limit_info")
            if isinstance(info, dict) and info.get("status") == "rejected":
                summary.rate_limit = info
    return summary


def _collect_assistant(item: dict[str, Any], summary: StreamSummary) -> None:
    message = item.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            summary.tool_uses.append(str(block.get("name")))
        elif block.get("type") == "text":
            summary.texts.append(str(block.get("text", "")))


class StreamReader(OutputReader):
    """The NDJSON lines as they arrive, for a person: each assistant message's text and
    tool calls (a ``tool_use`` block: its name and its most telling input)."""

    def read(self, line: str) -> list[tuple[OutputKind, str]]:
        """The text and tool calls of one ``assistant`` line; nothing for the others."""
        item = json_line(line)
        message = item.get("message") if item and item.get("type") == "assistant" else None
        content = message.get("content") if isinstance(message, dict) else None
        pieces: list[tuple[OutputKind, str]] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text") or "").strip():
                pieces.append(("text", str(block["text"])))
            elif block.get("type") == "tool_use":
                pieces.append(("tool", call_text(str(block.get("name")), block.get("input"))))
        return pieces


def _output(texts: list[str], final: str) -> str:
    """The iteration's output: the text of every assistant message, as with the other
    agent CLIs (an ``<event>`` tag written before a tool call counts), and the result's
    text where the messages do not end with it."""
    output = "\n\n".join(t for t in texts if t.strip())
    if final.strip() and not output.rstrip().endswith(final.strip()):
        output = f"{output}\n\n{final}" if output else final
    return output


def summarize(proc: ProcessResult, timeout: float | None, now: float = 0.0) -> BackendResult:
    """Turn a finished CLI run into a :class:`BackendResult` (pure; ``now``: seconds since
    the epoch, to read a reset time given as a time of day)."""
    summary = parse_stream(proc.stdout.decode("utf-8", errors="replace"))
    res = summary.result
    output = _output(summary.texts, str(res.get("result") or "") if res else "")
    stderr_tail = last_line(proc.stderr)
    meta: dict[str, Any] = {"tool_uses": summary.tool_uses}
    if summary.session_id:
        meta["session_id"] = summary.session_id
    if summary.mcp_servers:
        meta["mcp_servers"] = summary.mcp_servers
    if summary.api_retries:
        meta["api_retries"] = summary.api_retries
    if stderr_tail:
        meta["stderr_tail"] = stderr_tail
    if proc.truncated:
        meta["truncated"] = True
    usage = res.get("usage") if res else None
    usage = usage if isinstance(usage, dict) else {}
    cost = res.get("total_cost_usd") if res else None
    if res:
        meta.update({k: res[k] for k in ("duration_ms", "stop_reason", "subtype") if k in res})
        if res.get("api_error_status") is not None:
            meta["api_error_status"] = res["api_error_status"]
    result = BackendResult(
        output=output,
        exit_code=proc.returncode,
        cost_usd=cost_or_none(cost),
        input_tokens=count_or_none(usage.get("input_tokens")),
        output_tokens=count_or_none(usage.get("output_tokens")),
        turns=count_or_none(res.get("num_turns")) if res else None,
        meta=meta,
    )
    reason = _failure(proc, res, timeout, stderr_tail)
    if reason is not None:
        result.ok = False
        result.reason = reason
        if not proc.timed_out:
            result.limited = rate_limit(summary, res, reason, now)
    return result


def rate_limit(
    summary: StreamSummary, res: dict[str, Any] | None, reason: str, now: float
) -> RateLimit | None:
    """The rate or usage limit that made the run fail, if one did (pure).

    A rejected ``rate_limit_event`` (a subscription's usage window, with ``resetsAt``),
    an ``api_error_status`` of 429 or 529, an assistant error ``rate_limit``, or the
    words of a limit in the result (``usage limit reached|<epoch>``...).
    """
    status = res.get("api_error_status") if res else None
    status = status if isinstance(status, int) else None
    info = summary.rate_limit
    limited = classify_text(reason, now, status=status)
    if limited is None and summary.error in ("rate_limit", "overloaded"):
        limited = RateLimit(kind="rate_limit", message=reason[:300])
    if info is None:
        return limited
    resets = info.get("resetsAt")
    window = info.get("rateLimitType")
    return RateLimit(
        kind="usage_limit",
        message=(limited.message if limited else reason[:300])
        + (f" ({window} limit)" if isinstance(window, str) else ""),
        reset_at=float(resets) if isinstance(resets, int | float) else None,
    )


def _failure(
    proc: ProcessResult, res: dict[str, Any] | None, timeout: float | None, stderr_tail: str
) -> str | None:
    tail = f": {stderr_tail}" if stderr_tail else ""
    if (stopped := stop_reason(proc, timeout)) is not None:
        return stopped
    if res is None:
        cap = " (output cap reached)" if proc.truncated else ""
        return f"claude printed no result line{cap} (exit status {proc.returncode}){tail}"
    if res.get("is_error"):
        status = res.get("api_error_status")
        what = f"API error {status}" if status is not None else "error result"
        text = str(res.get("result") or res.get("subtype") or "").strip()
        return f"claude reported an {what}: {text}" if text else f"claude reported an {what}"
    if proc.returncode != 0:
        return f"claude exit status {proc.returncode}{tail}"
    return None


# -- the backend --------------------------------------------------------------------------


class ClaudeBackend(AgentCliBackend[ClaudeConfig]):
    """Runs one iteration of a hat with the Claude Code CLI."""

    kind = "claude"
    reader = StreamReader  # the stream-json lines: the agent's text and tool calls
    reports_cost = True  # total_cost_usd and usage in the result line
    reports_tokens = True

    def __init__(self, config: ClaudeConfig | None = None) -> None:
        super().__init__(config or ClaudeConfig())

    def prepare(self, request: BackendRequest) -> tuple[list[str], dict[str, str]]:
        """Write the MCP config file (when enabled) and return the argv and environment."""
        variables = request.variables()
        mcp_file: Path | None = None
        if self.config.mcp:
            mcp_file = request.iteration_dir / MCP_CONFIG_NAME  # in the attempt's own folder
            make_folders(request.iteration_dir, root=request.root)
            config = mcp_config(self.config, variables)
            write_json(mcp_file, config, root=request.root, durable=False)
        env = child_env(request, self.config.env)
        if mcp_file is not None:  # the agent's first turn waits for hatloop's tools
            env = {**MCP_WAIT_ENV, **env}
        return build_argv(self.config, mcp_file), env

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the CLI once; failures come back as a failed result, never raised.

        Raises:
            BackendUnavailable: the CLI program is missing or not executable.
        """
        argv, env = self.prepare(request)
        timeout = effective_timeout(self.config.timeout_seconds, request.timeout_seconds)
        log.debug("claude.start", hat=request.hat, iteration=request.iteration, argv=argv)
        # output files: Bun drops pipe writes still queued at exit (see _process)
        proc = await self.run_cli(request, argv, env, timeout=timeout, output_files=True)
        result = summarize(proc, timeout, time.time())
        failed = [
            s.get("name")
            for s in result.meta.get("mcp_servers", [])
            if s.get("status") != "connected"
        ]
        if failed:
            log.warning("claude.mcp_not_connected", hat=request.hat, servers=failed)
        return result
