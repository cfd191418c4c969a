"""The ``codex`` backend: the real Codex CLI, ``codex exec --json``, prompt on stdin.

Codex prints JSON lines: ``thread.started``, ``turn.started``, ``item.started`` /
``item.completed`` (``agent_message``, ``command_execution``, ``mcp_tool_call``,
``file_change``, ``web_search``, ``error`` for warnings...), then ``turn.completed`` with
the token ``usage`` or ``turn.failed`` with the error (a rate or usage limit's is
classified, :func:`rate_limit`, and waited out by the loop). Its plain stdout carries
only the final message; the stream carries every agent message, so the output here is
all of them in order (tags written before a tool call count).

Unattended defaults (each overridable): ``--skip-git-repo-check`` (else it refuses to
run outside a git repository) and ``--sandbox workspace-write`` (exec's default is
read-only, where ``loop emit`` cannot append to the events file). The events file lives
under the workspace (``.loop/sessions/...``); when the sessions folder is elsewhere its
iteration folder is added as a writable root (``--add-dir``).

hatloop's tools go in as ``-c`` overrides, nothing written to ``~/.codex``: the session's
HTTP endpoint (``mcp_servers.hatloop.url``, token read by Codex from ``LOOP_MCP_TOKEN``
through ``bearer_token_env_var``) or ``python -m loop mcp`` over stdio with the ``LOOP_*``
variables passed through (``env_vars``: Codex does not hand its environment to a server).
``required = true`` makes exec wait for the server before the first model request, and
``default_tools_approval_mode = "approve"`` lets its tools run under approval ``never``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from loop.backends._agent import (
    MCP_SERVER_NAME,
    call_text,
    count_or_none,
    error_line,
    json_line,
    json_lines,
    mcp_endpoint,
    mcp_server_env,
    one_line,
    stdio_command,
)
from loop.backends._limits import classify_text
from loop.backends._process import ProcessResult, stop_reason
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
from loop.config.backends import CodexConfig
from loop.locations import ENV_MCP_TOKEN

__all__ = [
    "CodexBackend",
    "CodexStream",
    "StreamReader",
    "build_argv",
    "mcp_overrides",
    "parse_stream",
    "rate_limit",
    "summarize",
]

log = structlog.get_logger(__name__)

MCP_STARTUP_SECONDS = 60  # a stdio server on a busy machine can take seconds to answer


# -- pure parts ---------------------------------------------------------------------------


def _toml(value: Any) -> str:
    # A JSON string or list of strings is also a TOML one (the -c values are TOML).
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def mcp_overrides(config: CodexConfig, env: Mapping[str, str]) -> list[str]:
    """The ``-c key=value`` pairs that give the agent hatloop's MCP server (pure)."""
    key = f"mcp_servers.{MCP_SERVER_NAME}"
    endpoint = mcp_endpoint(env)
    settings: dict[str, Any]
    if endpoint is not None:
        settings = {"url": endpoint.url, "bearer_token_env_var": ENV_MCP_TOKEN}
    else:
        command = stdio_command(config.mcp_command)
        settings = {
            "command": command[0],
            "args": command[1:],
            "env_vars": sorted(mcp_server_env(env)),
            "startup_timeout_sec": MCP_STARTUP_SECONDS,
        }
    settings["required"] = True
    settings["default_tools_approval_mode"] = "approve"
    return [f"{key}.{name}={_toml(value)}" for name, value in settings.items()]


def _outside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return True
    return False


def build_argv(
    config: CodexConfig,
    overrides: list[str] | None = None,
    writable: Path | None = None,
) -> list[str]:
    """The CLI's argv for one iteration (pure; ``-`` reads the prompt from stdin).

    hatloop's ``-c`` overrides come before the user's ``args``, so that an override of
    the user's (given later) wins.
    """
    argv = [*config.command, "exec", "--json"]
    if config.skip_git_repo_check:
        argv.append("--skip-git-repo-check")
    argv += ["--sandbox", config.sandbox]
    if writable is not None:
        argv += ["--add-dir", str(writable)]
    for override in overrides or []:
        argv += ["-c", override]
    argv += config.args
    if config.model:
        argv += ["--model", config.model]
    return [*argv, "-"]


@dataclass(slots=True)
class CodexStream:
    """What the JSON-lines output said."""

    thread_id: str | None = None
    messages: list[str] = field(default_factory=list)
    tool_uses: list[str] = field(default_factory=list)
    tool_errors: int = 0
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    failed: str | None = None
    error: str | None = None


def _tool_name(item: dict[str, Any]) -> str | None:
    kind = item.get("type")
    if kind == "command_execution":
        return "exec_command"
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server')}__{item.get('tool')}"
    if kind in ("file_change", "web_search"):
        return str(kind)
    return None


def _call_text(item: dict[str, Any]) -> str | None:
    """A tool item in one line for a person (None: not a tool call)."""
    name = _tool_name(item)
    if name is None:
        return None
    kind = item.get("type")
    if kind == "command_execution":
        return call_text(name, {"command": item.get("command")})
    if kind == "mcp_tool_call":
        return call_text(name, item.get("arguments"))
    if kind == "file_change":
        changes = item.get("changes")
        paths = (
            [c.get("path") for c in changes if isinstance(c, dict)]
            if isinstance(changes, list)
            else []
        )
        return call_text(name, " ".join(str(p) for p in paths if p))
    return call_text(name, item.get("query"))


class StreamReader(OutputReader):
    """The JSON lines as they arrive, for a person: each agent message, and each tool
    call when it starts (or, when its start was not seen, when it completes)."""

    def __init__(self) -> None:
        self._started: set[str] = set()

    def read(self, line: str) -> list[tuple[OutputKind, str]]:
        """The message or tool call one JSON line holds."""
        event = json_line(line)
        item = event.get("item") if event else None
        if event is None or not isinstance(item, dict):
            return []
        key = str(item.get("id"))
        if event.get("type") == "item.started" and (call := _call_text(item)) is not None:
            self._started.add(key)
            return [("tool", call)]
        if event.get("type") != "item.completed":
            return []
        if item.get("type") == "agent_message":
            text = str(item.get("text") or "")
            return [("text", text)] if text.strip() else []
        call = _call_text(item) if key not in self._started else None
        return [("tool", call)] if call is not None else []


def _item(item: dict[str, Any], stream: CodexStream) -> None:
    kind = item.get("type")
    if kind == "agent_message":
        if text := str(item.get("text") or "").strip():
            stream.messages.append(text)
    elif kind == "error":
        stream.warnings.append(one_line(str(item.get("message") or "")))
    elif (name := _tool_name(item)) is not None:
        stream.tool_uses.append(name)
        if item.get("status") == "failed":
            stream.tool_errors += 1


def parse_stream(stdout: str) -> CodexStream:
    """Read ``codex exec --json`` output (pure); usage is summed over turns."""
    stream = CodexStream()
    for event in json_lines(stdout):
        kind = event.get("type")
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            _item(item, stream)
        elif kind == "turn.completed":
            stream.turns += 1
            usage = event.get("usage")
            for name, value in (usage if isinstance(usage, dict) else {}).items():
                if (count := count_or_none(value)) is not None:
                    stream.usage[name] = stream.usage.get(name, 0) + count
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            stream.failed = one_line(str(message or "turn failed"))
        elif kind == "error":
            stream.error = one_line(str(event.get("message") or ""))
        elif kind == "thread.started":
            stream.thread_id = event.get("thread_id") or stream.thread_id
    return stream


def summarize(proc: ProcessResult, timeout: float | None, now: float = 0.0) -> BackendResult:
    """Turn a finished CLI run into a :class:`BackendResult` (pure; ``now``: seconds since
    the epoch, to date a reset given as a time of day)."""
    stream = parse_stream(proc.stdout.decode("utf-8", errors="replace"))
    meta: dict[str, Any] = {"tool_uses": stream.tool_uses}
    for key, value in (
        ("thread_id", stream.thread_id),
        ("tool_errors", stream.tool_errors),
        ("warnings", stream.warnings),
        ("usage", stream.usage),
        ("stderr_tail", error_line(proc.stderr)),
        ("truncated", proc.truncated),
    ):
        if value:
            meta[key] = value
    result = BackendResult(
        output="\n\n".join(stream.messages),
        exit_code=proc.returncode,
        input_tokens=stream.usage.get("input_tokens"),
        output_tokens=stream.usage.get("output_tokens"),
        turns=stream.turns or None,
        meta=meta,
        notes=tuple(f"codex: {w}" for w in stream.warnings if w),
    )
    reason = _failure(proc, stream, timeout)
    if reason is not None:
        result.ok = False
        result.reason = reason
        if not proc.timed_out:
            result.limited = rate_limit(stream, now)
    return result


def rate_limit(stream: CodexStream, now: float) -> RateLimit | None:
    """The rate or usage limit a failed turn tells, if any (pure): ``exceeded retry
    limit, last status: 429``, ``rate limit exceeded: ... try again in 2.5s``, ``You've
    hit your usage limit ... try again at 8:33 PM``."""
    text = stream.failed or stream.error
    return classify_text(text, now) if text else None


def _failure(proc: ProcessResult, stream: CodexStream, timeout: float | None) -> str | None:
    stderr = error_line(proc.stderr)
    tail = f": {stderr}" if stderr else ""
    if (stopped := stop_reason(proc, timeout)) is not None:
        return stopped
    if stream.failed is not None:
        return f"codex turn failed: {stream.failed}"
    if stream.turns == 0:
        cap = " (output cap reached)" if proc.truncated else ""
        why = f": {stream.error}" if stream.error else tail
        return f"codex finished no turn{cap} (exit status {proc.returncode}){why}"
    if proc.returncode != 0:
        return f"codex exit status {proc.returncode}{tail}"
    return None


# -- the backend --------------------------------------------------------------------------


class CodexBackend(AgentCliBackend[CodexConfig]):
    """Runs one iteration of a hat with the Codex CLI."""

    kind = "codex"
    reader = StreamReader  # the JSON lines: the agent's messages and tool calls
    reports_tokens = True  # usage in turn.completed (no cost)

    def __init__(self, config: CodexConfig | None = None) -> None:
        super().__init__(config or CodexConfig())

    def prepare(self, request: BackendRequest) -> tuple[list[str], dict[str, str]]:
        """The argv and environment for one iteration."""
        variables = request.variables()
        env = child_env(request, self.config.env)
        overrides = mcp_overrides(self.config, variables) if self.config.mcp else []
        events_dir = request.iteration_dir
        writable = (
            events_dir
            if self.config.sandbox == "workspace-write" and _outside(events_dir, request.workdir)
            else None
        )
        return build_argv(self.config, overrides, writable), env

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the CLI once; failures come back as a failed result, never raised.

        Raises:
            BackendUnavailable: the CLI program is missing or not executable.
        """
        argv, env = self.prepare(request)
        timeout = effective_timeout(self.config.timeout_seconds, request.timeout_seconds)
        log.debug("codex.start", hat=request.hat, iteration=request.iteration, argv=argv)
        proc = await self.run_cli(request, argv, env, timeout=timeout)
        return summarize(proc, timeout, time.time())
