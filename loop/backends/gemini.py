"""The ``gemini`` backend: the real Gemini CLI, headless, reading its stream-json output.

One iteration runs ``gemini --output-format stream-json --approval-mode yolo -p ""`` with
the prompt on stdin (any size; ``-p ""`` only selects headless mode). The CLI prints
JSON lines: ``init`` (session id, model), ``message`` (the user's prompt, then the
assistant's text in ``delta`` pieces), ``tool_use`` / ``tool_result``, ``error``
(warnings) and a final ``result`` with ``status`` and ``stats`` (tokens per model, tool
calls, duration). The output is every assistant message, in order (text written before a
tool call counts: its ``<event>`` tags are read); the result line decides success. An
error result from a quota or rate limit is classified (:func:`rate_limit`): the loop
waits it out.

Two timing windows of the CLI (0.61), which a busy machine hits, are closed here. Its
stdout goes to a file, not a pipe: Node drops the writes still queued for a full pipe
when the CLI exits, so a slow reader lost the end of the stream (the result line). And
the CLI gives stdin 500 ms to deliver a first chunk; when its event loop stalls longer
it runs as if stdin were empty and exits 42 ("No input provided via stdin") before any
model call: the run is then repeated once, with a warning. Its first user message
echoes the input it got: a run whose echo lacks the prompt fails, never passes unnoticed.

Unattended defaults (each overridable): the working folder is trusted for the run
(``GEMINI_CLI_TRUST_WORKSPACE=true``; without it a headless run exits 55), and the
approval mode is ``yolo`` (headless, any other mode offers the agent only read-only
tools: no shell, so no ``loop emit``, and no MCP tools).

hatloop's tools: with ``mcp = true`` the agent gets an ``mcpServers.hatloop`` entry, the
session's HTTP endpoint (``LOOP_MCP_URL``, header ``Authorization: Bearer
${LOOP_MCP_TOKEN}``, expanded by the CLI from its environment so the secret is never
written to disk) or, without one, ``python -m loop mcp`` over stdio with the ``LOOP_*``
variables; ``trust: true`` lets its tools run unprompted. The CLI reads settings only
from its home (``~/.gemini``), a project's ``.gemini/`` and root-owned system files, so
the entry goes into a home of the attempt's own (``GEMINI_CLI_HOME`` =
``<attempt folder>/gemini-home``: the entry names the attempt's files) whose
``settings.json`` is the user's own plus the entry, and whose other files link to the
user's ``~/.gemini`` (login, history): nothing is written into the user's home.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from loop._fs import make_folders, open_folder, write_json
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
from loop.backends._limits import classify_text, next_pacific_midnight
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
from loop.config.backends import GeminiConfig
from loop.errors import InputError
from loop.locations import ENV_MCP_TOKEN

__all__ = [
    "GeminiBackend",
    "GeminiStream",
    "StreamReader",
    "build_argv",
    "lost_prompt",
    "mcp_settings",
    "parse_stream",
    "prepare_home",
    "rate_limit",
    "read_settings",
    "summarize",
]

log = structlog.get_logger(__name__)

HOME_DIR_NAME = "gemini-home"
SETTINGS_NAME = "settings.json"
ENV_HOME = "GEMINI_CLI_HOME"
ENV_TRUST = "GEMINI_CLI_TRUST_WORKSPACE"
# The CLI's exit status and message when it read nothing from stdin (its 500 ms wait).
EXIT_NO_INPUT = 42
NO_INPUT = b"No input provided via stdin"
MCP_ISSUES = b"MCP issues detected"  # on stderr: an MCP server failed to start


# -- pure parts ---------------------------------------------------------------------------


def build_argv(config: GeminiConfig) -> list[str]:
    """The CLI's argv for one iteration (pure; the prompt goes on stdin).

    The user's ``args`` follow the fixed flags; ``-p ""`` comes last (headless mode; the
    CLI appends it to the prompt read from stdin).
    """
    argv = [*config.command, "--output-format", "stream-json"]
    argv += ["--approval-mode", config.approval_mode, *config.args]
    if config.model:
        argv += ["--model", config.model]
    return [*argv, "-p", ""]


def mcp_settings(config: GeminiConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """The ``mcpServers.hatloop`` entry for the iteration's environment (pure).

    The HTTP form names the token by variable (``${LOOP_MCP_TOKEN}``); the CLI expands it.
    """
    endpoint = mcp_endpoint(env)
    if endpoint is not None:
        server: dict[str, Any] = {
            "httpUrl": endpoint.url,
            "headers": {"Authorization": f"Bearer ${{{ENV_MCP_TOKEN}}}"},
        }
    else:
        command = stdio_command(config.mcp_command)
        server = {"command": command[0], "args": command[1:], "env": mcp_server_env(env)}
    server["trust"] = True  # its tools run without a confirmation nobody could give
    return {"mcpServers": {MCP_SERVER_NAME: server}}


def _strip_comments(text: str) -> str:
    # settings.json may hold // and /* */ comments (the CLI strips them before parsing).
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_settings(text: str) -> dict[str, Any] | None:
    """A settings file's object (comments allowed), or ``None`` when it is not one."""
    try:
        data = json.loads(_strip_comments(text))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass(slots=True)
class GeminiStream:
    """What the stream-json output said."""

    result: dict[str, Any] | None = None
    prompt: str | None = None  # the CLI's echo of the prompt it got
    session_id: str | None = None
    model: str | None = None
    messages: list[str] = field(default_factory=list)
    tool_uses: list[str] = field(default_factory=list)
    tool_errors: int = 0
    warnings: list[str] = field(default_factory=list)


def parse_stream(stdout: str) -> GeminiStream:
    """Read the CLI's JSON lines (pure). Assistant text arrives in pieces; a tool call
    ends the message it follows."""
    stream = GeminiStream()
    current: list[str] = []

    def close_message() -> None:
        if text := "".join(current).strip():
            stream.messages.append(text)
        current.clear()

    for item in json_lines(stdout):
        kind = item.get("type")
        if kind == "message" and item.get("role") == "assistant":
            current.append(str(item.get("content") or ""))
        elif kind == "message" and item.get("role") == "user" and stream.prompt is None:
            stream.prompt = str(item.get("content") or "")
        elif kind == "tool_use":
            close_message()
            stream.tool_uses.append(str(item.get("tool_name")))
        elif kind == "tool_result" and item.get("status") == "error":
            stream.tool_errors += 1
        elif kind == "error":
            stream.warnings.append(one_line(str(item.get("message") or "")))
        elif kind == "init":
            stream.session_id = item.get("session_id") or stream.session_id
            stream.model = item.get("model") or stream.model
        elif kind == "result":
            stream.result = item
    close_message()
    return stream


class StreamReader(OutputReader):
    """The JSON lines as they arrive, for a person: the assistant's text, whole lines at a
    time (it arrives in pieces), and its tool calls."""

    def __init__(self) -> None:
        self._text = ""  # assistant text after its last line end

    def read(self, line: str) -> list[tuple[OutputKind, str]]:
        """The complete lines of text and the tool call one JSON line completes."""
        item = json_line(line)
        kind = item.get("type") if item else None
        if item is None:
            return []
        if kind == "message" and item.get("role") == "assistant":
            head, newline, self._text = (self._text + str(item.get("content") or "")).rpartition(
                "\n"
            )
            return [("text", head)] if newline and head.strip() else []
        if kind == "tool_use":
            call = call_text(str(item.get("tool_name")), item.get("parameters"))
            return [*self.end(), ("tool", call)]
        return self.end() if kind == "result" else []

    def end(self) -> list[tuple[OutputKind, str]]:
        """The text held back for its line end."""
        text, self._text = self._text, ""
        return [("text", text)] if text.strip() else []


def lost_prompt(proc: ProcessResult) -> bool:
    """Whether the CLI gave up waiting for the prompt on stdin and did nothing (pure)."""
    return proc.returncode == EXIT_NO_INPUT and not proc.stdout.strip() and NO_INPUT in proc.stderr


def summarize(
    proc: ProcessResult, timeout: float | None, prompt: str | None = None, now: float = 0.0
) -> BackendResult:
    """Turn a finished CLI run into a :class:`BackendResult` (pure).

    With ``prompt``, a run whose echo of the prompt (the first user message) lacks it
    fails. ``now`` (seconds since the epoch) dates a reset the CLI gives as a time of day.
    """
    stream = parse_stream(proc.stdout.decode("utf-8", errors="replace"))
    res = stream.result or {}
    stats = res.get("stats") if isinstance(res.get("stats"), dict) else {}
    assert isinstance(stats, dict)
    meta: dict[str, Any] = {"tool_uses": stream.tool_uses}
    for key, value in (
        ("session_id", stream.session_id),
        ("model", stream.model),
        ("tool_errors", stream.tool_errors),
        ("warnings", stream.warnings),
        ("duration_ms", stats.get("duration_ms")),
        ("models", stats.get("models")),
        ("stderr_tail", error_line(proc.stderr)),
        ("truncated", proc.truncated),
    ):
        if value:
            meta[key] = value
    result = BackendResult(
        output="\n\n".join(stream.messages),
        exit_code=proc.returncode,
        input_tokens=count_or_none(stats.get("input_tokens")),
        output_tokens=count_or_none(stats.get("output_tokens")),
        meta=meta,
        notes=tuple(f"gemini: {w}" for w in stream.warnings if w),
    )
    reason = _failure(proc, stream.result, timeout, stream.warnings)
    echo = stream.prompt
    if reason is None and prompt is not None and echo is not None and prompt not in echo:
        reason = "gemini ran without the whole prompt (its echo of the prompt lacks it)"
    if reason is not None:
        result.ok = False
        result.reason = reason
        if stream.result is not None and not proc.timed_out:
            result.limited = rate_limit(stream.result, proc.stderr, now)
    return result


_RETRY_DELAY_MS = re.compile(rb"retryDelayMs: (\d+)")
_QUOTA_ERROR = re.compile(rb"\b(?:Retryable|Terminal)QuotaError\b")


def rate_limit(res: dict[str, Any], stderr: bytes, now: float) -> RateLimit | None:
    """The rate or usage limit an error result tells, if any (pure).

    The CLI's quota errors (``RetryableQuotaError``, ``TerminalQuotaError`` on stderr)
    and its messages for a 429; ``Suggested retry after 41s`` or ``retryDelayMs`` give
    the delay; a daily quota resets at the next midnight in Pacific time.
    """
    if res.get("status") == "success":
        return None
    error = res.get("error") if isinstance(res.get("error"), dict) else {}
    assert isinstance(error, dict)
    text = str(error.get("message") or "")
    quota_error = _QUOTA_ERROR.search(stderr) is not None
    limited = classify_text(text, now, status=429 if quota_error else None)
    if limited is None:
        return None
    retry_after = limited.retry_after
    if retry_after is None and (delay := _RETRY_DELAY_MS.search(stderr)):
        retry_after = int(delay.group(1)) / 1000
    reset_at = limited.reset_at
    if reset_at is None and "daily quota" in text.lower():
        reset_at = next_pacific_midnight(now)
        return RateLimit("usage_limit", limited.message, reset_at, retry_after)
    return RateLimit(limited.kind, limited.message, reset_at, retry_after)


def _failure(
    proc: ProcessResult, res: dict[str, Any] | None, timeout: float | None, warnings: list[str]
) -> str | None:
    stderr = error_line(proc.stderr)
    tail = f": {stderr}" if stderr else ""
    if (stopped := stop_reason(proc, timeout)) is not None:
        return stopped
    if lost_prompt(proc):
        return "gemini read no prompt from stdin (it gives up after 500 ms without input)"
    if res is None:
        cap = " (output cap reached)" if proc.truncated else ""
        return f"gemini printed no result line{cap} (exit status {proc.returncode}){tail}"
    if res.get("status") != "success":
        error = res.get("error") if isinstance(res.get("error"), dict) else {}
        assert isinstance(error, dict)
        text = one_line(str(error.get("message") or error.get("type") or ""))
        text = text or (warnings[-1] if warnings else "")  # an error inside the stream
        return f"gemini reported an error: {text}" if text else "gemini reported an error"
    if proc.returncode != 0:
        return f"gemini exit status {proc.returncode}{tail}"
    return None


# -- the attempt's home --------------------------------------------------------------------


def _user_gemini_dir(env: Mapping[str, str]) -> Path:
    home = env.get(ENV_HOME) or env.get("HOME") or str(Path.home())
    return Path(home) / ".gemini"


def prepare_home(
    home: Path, user_dir: Path, overlay: Mapping[str, Any], *, root: Path | None = None
) -> None:
    """Make ``home/.gemini``: the user's settings plus ``overlay``, the rest linked.

    ``settings.json`` is the user's (``user_dir/settings.json``) with ``overlay``'s
    ``mcpServers`` entries added (the CLI merges them by name); every other entry of
    ``user_dir`` (credentials, history, extensions) is a symlink to the user's own.
    The folders and the settings are reached from ``root`` without following links.

    Raises:
        ValueError: the user's settings file cannot be read as a JSON object.
    """
    gemini_dir = home / ".gemini"
    make_folders(gemini_dir, root=root)
    settings: dict[str, Any] = {}
    user_settings = user_dir / SETTINGS_NAME
    if user_settings.is_file():
        parsed = read_settings(user_settings.read_text(encoding="utf-8"))
        if parsed is None:
            raise ValueError(f"{user_settings} is not a JSON object")
        settings = parsed
    servers = settings.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers.update(overlay.get("mcpServers", {}))
    settings = {**settings, **overlay, "mcpServers": servers}
    write_json(gemini_dir / SETTINGS_NAME, settings, root=root, durable=False)
    if user_dir.is_dir() and user_dir.resolve() != gemini_dir.resolve():
        with open_folder(gemini_dir, root=root) as folder:
            for entry in user_dir.iterdir():
                if entry.name != SETTINGS_NAME:
                    with contextlib.suppress(FileExistsError):  # linked by an earlier run
                        os.symlink(entry, entry.name, dir_fd=folder)


# -- the backend --------------------------------------------------------------------------


class GeminiBackend(AgentCliBackend[GeminiConfig]):
    """Runs one iteration of a hat with the Gemini CLI."""

    kind = "gemini"
    reader = StreamReader  # the stream-json lines: the agent's text and tool calls
    reports_tokens = True  # stats in the result line (no cost)

    def __init__(self, config: GeminiConfig | None = None) -> None:
        super().__init__(config or GeminiConfig())

    def prepare(self, request: BackendRequest) -> tuple[list[str], dict[str, str]]:
        """Set up the attempt's Gemini home (with ``mcp``) and return argv and environment."""
        variables = request.variables()
        env = child_env(request, self.config.env)
        if self.config.trust_workspace:
            env[ENV_TRUST] = "true"
        if self.config.mcp:
            home = request.iteration_dir / HOME_DIR_NAME  # the attempt's own: its settings
            overlay = mcp_settings(self.config, variables)  # name the attempt's files
            try:
                prepare_home(home, _user_gemini_dir(env), overlay, root=request.root)
            except (OSError, ValueError, InputError) as exc:
                log.warning("gemini.no_mcp", reason=str(exc), hat=request.hat)
            else:
                env[ENV_HOME] = str(home)
        return build_argv(self.config), env

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the CLI once; failures come back as a failed result, never raised.

        Raises:
            BackendUnavailable: the CLI program is missing or not executable.
        """
        argv, env = self.prepare(request)
        timeout = effective_timeout(self.config.timeout_seconds, request.timeout_seconds)
        deadline = None if timeout is None else anyio.current_time() + timeout
        log.debug("gemini.start", hat=request.hat, iteration=request.iteration, argv=argv)

        async def attempt() -> ProcessResult:
            left = None if deadline is None else max(deadline - anyio.current_time(), 0.0)
            # output files: see the module's docstring
            return await self.run_cli(request, argv, env, timeout=left, output_files=True)

        proc = await attempt()
        if lost_prompt(proc):
            log.warning(
                "gemini.prompt_not_read",
                hat=request.hat,
                iteration=request.iteration,
                note="the CLI gave up waiting for the prompt on stdin (500 ms); running it again",
            )
            proc = await attempt()
        result = summarize(proc, timeout, request.prompt, time.time())
        if self.uses_loop_tools and MCP_ISSUES in proc.stderr:
            # claude names the server it could not connect, codex fails: gemini goes on
            # without the tools, and says so only on stderr
            log.warning(
                "gemini.mcp_not_connected",
                hat=request.hat,
                note="the agent ran without hatloop's tools (gemini: MCP issues detected)",
            )
        return result
