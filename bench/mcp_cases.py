"""MCP server cases, each run in a fresh worker process (``bench.worker``).

* ``mcp_startup``: what ``python -m loop mcp`` does before it can answer, split into
  the official SDK's import and hatloop's own share (its imports, the tool catalog,
  the server), wall and CPU time, in this fresh process.
* ``mcp_stdio``: a stdio server as a client sees it: spawn, ``initialize``,
  ``tools/list``, ``tools/call createTask`` (start to first tool result), then
  ``getTask`` calls one after the other (per-call latency). The same raw JSON-RPC
  client drives hatloop (``python -m loop mcp``) and the original Node server (npm
  ``task-orchestrator-mcp``); both keep their tasks in a JSON file.
* ``mcp_http``: the session's endpoint as a running loop serves it, in a child
  process (import, build, serve: what a loop does before its first iteration); then a
  client (the standard library's ``http.client``, keep-alive) with an iteration's
  secret does the same calls over HTTP, timed from its first request.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

__all__ = ["mcp_http", "mcp_startup", "mcp_stdio"]

PROTOCOL = "2025-11-25"


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def _latency(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": round(statistics.median(ordered) * 1e6, 1),
        "p90_us": round(ordered[int(len(ordered) * 0.9)] * 1e6, 1),
        "min_us": round(ordered[0] * 1e6, 1),
        "calls": len(ordered),
    }


def mcp_startup(params: dict[str, Any]) -> dict[str, Any]:
    """The SDK's import, then hatloop's path of ``loop mcp`` up to a built server."""
    os.environ["XDG_CACHE_HOME"] = params["cache_home"]
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-mcp-") as tmp:
        os.chdir(tmp)
        Path("loop.toml").write_text('[tasks]\nfile = "tasks.json"\n', encoding="utf-8")
        w0, c0 = time.perf_counter(), time.process_time()
        import mcp.server.mcpserver  # the SDK's share: what loop mcp imports
        import mcp.server.stdio  # noqa: F401

        w1, c1 = time.perf_counter(), time.process_time()
        before = {m for m in sys.modules if m == "loop" or m.startswith("loop.")}
        from loop.cli import build_parser

        args = build_parser("mcp").parse_args(["mcp"])
        from loop._log import configure_logging

        configure_logging("json")
        from loop.commands.tools import context_from_args
        from loop.tools.mcp_server import build_server
        from loop.tools.stdio import serve_stdio  # noqa: F401 - on loop mcp's path too

        server = build_server(context_from_args(args))
        w2, c2 = time.perf_counter(), time.process_time()
        loop_modules = {m for m in sys.modules if m == "loop" or m.startswith("loop.")} - before
    return {
        "sdk_ms": _ms(w1 - w0),
        "sdk_cpu_ms": _ms(c1 - c0),
        "hatloop_ms": _ms(w2 - w1),
        "hatloop_cpu_ms": _ms(c2 - c1),
        "tools": len(server.catalog),
        "loop_modules": len(loop_modules),
    }


class _Wire:
    """A raw JSON-RPC client over a child's stdin and stdout (one message per line)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin, self.stdout = stdin, stdout
        self.next_id = 0

    def notify(self, method: str) -> None:
        self.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.stdin.flush()

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout before answering {method}")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply


def _task_id(reply: dict[str, Any]) -> str:
    result = reply["result"]
    if result.get("isError"):
        raise RuntimeError(f"createTask failed: {result}")
    data = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    return str(data["task"]["id"])


def _session(call: Any, t0: float, calls: int) -> dict[str, Any]:
    """initialize, tools/list, createTask (first result), then ``calls`` getTask calls."""
    init = {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    }
    call("initialize", init)
    t_init = time.perf_counter()
    call("notifications/initialized", None)
    tools = call("tools/list", {})["result"]["tools"]
    created = call("tools/call", {"name": "createTask", "arguments": {"name": "bench"}})
    t_first = time.perf_counter()
    task = {"name": "getTask", "arguments": {"id": _task_id(created)}}
    samples = []
    for _ in range(calls):
        t = time.perf_counter()
        reply = call("tools/call", task)
        samples.append(time.perf_counter() - t)
        if reply["result"].get("isError"):
            raise RuntimeError(f"getTask failed: {reply['result']}")
    return {
        "initialize_ms": _ms(t_init - t0),
        "first_result_ms": _ms(t_first - t0),
        "tools": len(tools),
        **_latency(samples),
    }


def mcp_stdio(params: dict[str, Any]) -> dict[str, Any]:
    """Spawn a stdio server and drive it (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-mcp-") as tmp:
        tasks = str(Path(tmp) / "tasks.json")
        env = {**os.environ, "FILE_PATH": tasks, "XDG_CACHE_HOME": params.get("cache_home", tmp)}
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            params["command"],
            cwd=tmp,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        wire = _Wire(proc.stdin, proc.stdout)

        def call(method: str, body: dict[str, Any] | None) -> dict[str, Any]:
            if method.startswith("notifications/"):
                wire.notify(method)
                return {}
            return wire.call(method, body)

        try:
            out = _session(call, t0, int(params["calls"]))
        finally:
            proc.stdin.close()  # only after the last reply: EOF ends the server
            proc.wait(timeout=60)
    return out


def mcp_http(params: dict[str, Any]) -> dict[str, Any]:
    """Start the session endpoint in a child process, as a loop does, and drive it."""
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-mcp-") as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.mcp_cases", "serve", tmp],
            env={**os.environ, "XDG_CACHE_HOME": params.get("cache_home", tmp)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            served: dict[str, Any] = json.loads(proc.stdout.readline())
            url = urlsplit(served["url"])
            connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
            headers = {
                "Authorization": f"Bearer {served['token']}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": PROTOCOL,
            }
            next_id = 0

            def call(method: str, body: dict[str, Any] | None) -> dict[str, Any]:
                nonlocal next_id
                message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
                if not method.startswith("notifications/"):
                    next_id += 1
                    message["id"] = next_id
                if body is not None:
                    message["params"] = body
                connection.request("POST", url.path, json.dumps(message).encode(), headers)
                reply = connection.getresponse()
                data = reply.read()
                if reply.status >= 400:
                    raise RuntimeError(f"{method}: HTTP {reply.status}: {data[:200]!r}")
                return json.loads(data) if data else {}

            out = _session(call, time.perf_counter(), int(params["calls"]))
            connection.close()
        finally:
            proc.stdin.close()  # the server stops when its stdin closes
            proc.wait(timeout=60)
    return {**{k: served[k] for k in ("import_ms", "build_ms", "serve_ms")}, **out}


async def _serve_endpoint(root: Path) -> None:
    """Import, build and serve the endpoint; print its URL, a secret and the timings;
    serve until stdin closes."""
    import anyio

    w0 = time.perf_counter()
    from loop._log import configure_logging
    from loop.extensions import RunningIteration
    from loop.tools.base import ToolContext
    from loop.tools.endpoint import SessionEndpoint
    from loop.tools.registry import all_tools

    all_tools()  # the domains: a loop's task, theme and experience extensions load them
    w1 = time.perf_counter()
    configure_logging("json")
    endpoint = SessionEndpoint(ToolContext(root=root, tasks_file=Path("tasks.json")))
    w2 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        url = await tg.start(endpoint.serve)
        w3 = time.perf_counter()
        iteration = RunningIteration("bench", root, "hat", 1, 0, root / "events.jsonl")
        served = {
            "url": url,
            "token": endpoint.child_env(iteration)["LOOP_MCP_TOKEN"],
            "import_ms": _ms(w1 - w0),
            "build_ms": _ms(w2 - w1),
            "serve_ms": _ms(w3 - w2),
        }
        sys.stdout.write(json.dumps(served) + "\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the client closes stdin
        tg.cancel_scope.cancel()


if __name__ == "__main__":  # python -m bench.mcp_cases serve DIR
    import anyio

    anyio.run(_serve_endpoint, Path(sys.argv[2]), backend="asyncio")
