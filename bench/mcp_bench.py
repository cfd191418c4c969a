"""The MCP section: hatloop's MCP server beside the original Node server.

Run side (:func:`run_mcp`): installs the original server (npm ``task-orchestrator-mcp``)
into ``bench/.npm`` (git-ignored) the first time, offline afterwards, and runs the cases
of :mod:`bench.mcp_cases` interleaved, run by run, each in a fresh worker. Report side:
the target rows (:func:`mcp_targets`) and the section (:func:`render_mcp`).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["NODE_PACKAGE", "ensure_node_server", "mcp_targets", "render_mcp", "run_mcp"]

NODE_PACKAGE = "task-orchestrator-mcp@1.1.0"
NODE_ENTRY = "node_modules/task-orchestrator-mcp/bin/index.js"
NPM_FLAGS = ("--no-audit", "--no-fund", "--loglevel=error")
SHARE_LIMIT_MS = 150  # hatloop's own share of `loop mcp`'s start-up

Worker = Callable[[str, str, dict[str, Any]], dict[str, Any]]


def ensure_node_server(root: Path, log: Callable[[str], None]) -> list[str] | str:
    """The command of the original Node server, installed if need be; else why not."""
    prefix = root / "bench" / ".npm"
    entry = prefix / NODE_ENTRY
    node = shutil.which("node")
    if node is None:
        return "node is not installed"
    if not entry.exists():
        npm = shutil.which("npm")
        if npm is None:
            return "npm is not installed"
        log(f"installing {NODE_PACKAGE} into {prefix}")
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), *NPM_FLAGS, NODE_PACKAGE],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0 or not entry.exists():
            return f"npm install {NODE_PACKAGE} failed: {proc.stderr.strip()[-300:]}"
    return [node, str(entry)]


def _summary(runs: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    values = [float(r[key]) for r in runs if key in r]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_mcp(
    run_worker: Worker,
    python: str,
    *,
    runs: int,
    calls: int,
    root: Path,
    log: Callable[[str], None],
    node: bool = True,
) -> dict[str, Any]:
    """Every MCP case ``runs`` times, interleaved; raw results and summaries.

    With ``node`` false (``--no-peers``) the original server is neither installed nor run.
    """
    server = ensure_node_server(root, log) if node else "not run (--no-peers)"
    hatloop = [python, "-m", "loop", "mcp"]
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-mcp-cache-") as cache:
        warm = {"cache_home": cache}
        run_worker(python, "mcp_startup", warm)  # the catalog cached, as after a first start
        cases: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
            "startup": ("mcp_startup", lambda: warm),
            "startup_cold": ("mcp_startup", lambda: {"cache_home": tempfile.mkdtemp(dir=cache)}),
            "stdio": ("mcp_stdio", lambda: {**warm, "calls": calls, "command": hatloop}),
            "http": ("mcp_http", lambda: {**warm, "calls": calls}),
        }
        if isinstance(server, list):
            cases["node"] = ("mcp_stdio", lambda: {"calls": calls, "command": server})
        raw: dict[str, list[dict[str, Any]]] = {k: [] for k in cases}
        for r in range(runs):
            for key, (case, params) in cases.items():
                log(f"mcp: run {r + 1}/{runs}: {key}")
                raw[key].append(run_worker(python, case, params()))
    out: dict[str, Any] = {"calls": calls, "node_package": NODE_PACKAGE, "results": raw}
    if isinstance(server, str):
        out["node_error"] = server
    keys = (
        "sdk_ms",
        "sdk_cpu_ms",
        "hatloop_ms",
        "hatloop_cpu_ms",
        "import_ms",
        "build_ms",
        "serve_ms",
        "initialize_ms",
        "first_result_ms",
        "median_us",
        "p90_us",
    )
    out["summary"] = {
        case: {k: s for k in keys if (s := _summary(results, k)) is not None}
        for case, results in raw.items()
    }
    out["errors"] = [f"{c}: {r['error']}" for c, rs in raw.items() for r in rs if "error" in r]
    return out


def mcp_targets(mcp: dict[str, Any]) -> list[dict[str, Any]]:
    """The target row: hatloop's share of ``loop mcp``'s start-up under its limit."""
    runs = [r for r in mcp.get("results", {}).get("startup", []) if "hatloop_ms" in r]
    if not runs:
        return []
    values = [float(r["hatloop_ms"]) for r in runs]
    share = statistics.median(values)
    sdk = statistics.median(float(r["sdk_ms"]) for r in runs)
    return [
        {
            "name": "start-up: `python -m loop mcp`, hatloop's share",
            "goal": f"< {SHARE_LIMIT_MS} ms wall (imports, catalog, server)",
            "measured": f"{share:.0f} ms",
            "ratio": share / SHARE_LIMIT_MS,
            "met": share < SHARE_LIMIT_MS,
            "note": f"the SDK's own import: {sdk:.0f} ms; the tool catalog cached",
            "runs_met": f"{sum(v < SHARE_LIMIT_MS for v in values)}/{len(values)}",
        }
    ]


def _f(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _med(mcp: dict[str, Any], case: str, key: str) -> float | None:
    s = mcp.get("summary", {}).get(case, {}).get(key)
    return None if s is None else float(s["median"])


def render_mcp(mcp: dict[str, Any]) -> list[str]:
    """The report's MCP section."""
    if not mcp:
        return []
    lines = [
        "## MCP server",
        "",
        "`python -m loop mcp` (stdio, for users' own agents) and the session endpoint a "
        "running loop serves its agents on (streamable HTTP on 127.0.0.1), beside the "
        f"original Node server (npm `{mcp.get('node_package')}`, over stdio). Medians of "
        f"{len(mcp.get('results', {}).get('startup', []))} runs, each a fresh process.",
        "",
        "Start-up of `python -m loop mcp`, split (in one fresh process: the SDK's import, "
        "then hatloop's path to a built server: its imports, the config, the tool catalog):",
        "",
        "| | SDK import ms | CPU ms | hatloop's share ms | CPU ms |",
        "|---|---|---|---|---|",
    ]
    for case, what in (
        ("startup", "catalog cached (every start after the first)"),
        ("startup_cold", "first start (catalog rendered and cached)"),
    ):
        lines.append(
            f"| {what} | {_f(_med(mcp, case, 'sdk_ms'))} | {_f(_med(mcp, case, 'sdk_cpu_ms'))} "
            f"| {_f(_med(mcp, case, 'hatloop_ms'))} | {_f(_med(mcp, case, 'hatloop_cpu_ms'))} |"
        )
    lines += [
        "",
        f"A client's view: from spawning the server (stdio) or from the client's first "
        f"request (HTTP: the loop started the endpoint before the first iteration) to the "
        f"first tool result (`initialize`, `tools/list`, `createTask`), then "
        f"{mcp.get('calls')} `getTask` calls one after the other. Each client is a raw "
        "JSON-RPC one (pipes; `http.client` with keep-alive) in its own process.",
        "",
        "| server | initialize ms | first tool result ms | per call median us | per call p90 us |",
        "|---|---|---|---|---|",
    ]
    for case, what in (
        ("stdio", "hatloop, stdio (`python -m loop mcp`)"),
        ("http", "hatloop, session endpoint (HTTP)"),
        ("node", "original Node server, stdio"),
    ):
        if case not in mcp.get("summary", {}):
            continue
        lines.append(
            f"| {what} | {_f(_med(mcp, case, 'initialize_ms'))} | "
            f"{_f(_med(mcp, case, 'first_result_ms'))} | {_f(_med(mcp, case, 'median_us'))} | "
            f"{_f(_med(mcp, case, 'p90_us'))} |"
        )
    http = mcp.get("summary", {}).get("http", {})
    if http:
        lines += [
            "",
            f"The endpoint inside the loop: importing it (the SDK, uvicorn, and the tool "
            f"domains, which a loop's extensions load anyway) "
            f"{_f(_med(mcp, 'http', 'import_ms'))} ms, building the server "
            f"{_f(_med(mcp, 'http', 'build_ms'))} ms, serving until it answers "
            f"{_f(_med(mcp, 'http', 'serve_ms'))} ms; once per run, before the first "
            "iteration.",
        ]
    if mcp.get("node_error"):
        lines += ["", f"The Node server was not measured: {mcp['node_error']}."]
    if mcp.get("errors"):
        lines += ["", "Failed runs: " + "; ".join(e[:200] for e in mcp["errors"])]
    return [*lines, ""]
