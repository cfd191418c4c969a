"""The Markdown report (``bench/REPORT.md``) from the results data."""

from __future__ import annotations

import statistics
from typing import Any

from bench.mcp_bench import render_mcp
from bench.parallel import render_parallel
from bench.plan import RECORDING_MODES
from bench.replay_jobs import render_replay_jobs

__all__ = ["render"]


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _verdict(target: dict[str, Any]) -> str:
    if target.get("retired"):  # an older goal, for information: not a target any more
        return f"info ({'met' if target.get('retired_met') else 'not met'})"
    return {True: "met", False: "**not met**", None: "n/a"}[target["met"]]


def _targets(data: dict[str, Any]) -> list[str]:
    lines = [
        "## Targets",
        "",
        "| target | goal | measured | ratio | verdict | runs met | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in data["targets"]:
        lines.append(
            f"| {t['name']} | {t['goal']} | {t['measured']} | {_f(t['ratio'], 2)} | "
            f"{_verdict(t)} | {_f(t.get('runs_met'))} | {t['note']} |"
        )
    lines += [
        "",
        "Ratio: for 'N x faster' targets, peer time / hatloop time (higher is better); "
        "for limits, measured / limit, and limit / measured for a minimum such as replay "
        "throughput (below 1 is within the limit).",
        "",
        "Runs met: how many single runs meet the target on their own, run i of hatloop "
        "against run i of the case it is compared with (the runs of all cases are "
        "interleaved, so a pair ran in the same round). The verdict is the medians'; "
        "a verdict that few runs share is at the mercy of the machine's speed.",
        "",
        "Retired goals (info): older goals of the engine, kept for information; the "
        "bounds above replaced them.",
        "",
    ]
    return lines


def _row(entry: dict[str, Any], ref: float | None) -> str:
    s = entry["summary"]
    n = entry["params"].get("n", "")
    ratio = s["median"] / ref if ref and s["median"] else None
    errors = f" ({len(entry['errors'])} failed run(s))" if entry.get("errors") else ""
    return (
        f"| {entry['label']}{errors} | {_f(n)} | {_f(s['median'])} | {_f(s['min'])} | "
        f"{_f(s['max'])} | {_f(ratio, 2)} |"
    )


def _side_by_side(results: dict[str, Any]) -> list[str]:
    engine = results.get("engine", {})
    floor = results.get("floor", {})
    peers = results.get("peers", {})
    groups = (
        (
            "bare (no recording)",
            "off",
            [floor.get("queue"), floor.get("journaled"), floor.get("contract")]
            + [engine.get("off")]
            + [v for k, v in peers.items() if k.endswith(":bare")],
        ),
        (
            "recording on, not fsynced",
            "recording",
            [engine.get("recording")]
            + [v for k, v in peers.items() if k.split(":")[1] in RECORDING_MODES],
        ),
        (
            "durable (synced to disk per step)",
            "durable",
            [floor.get("fsync"), floor.get("fdatasync")]
            + [engine.get("durable"), engine.get("durable_recording")]
            + [v for k, v in peers.items() if k.endswith(":sqlite")],
        ),
    )
    lines = [
        "## Iteration overhead, side by side",
        "",
        "Microseconds per transition (one hat iteration, one peer step), median of the "
        "runs; measured from the first transition to the last inside each run, so "
        "process and session set-up are excluded. Ratio: row / hatloop in the same group "
        "(above 1: hatloop is faster).",
        "",
    ]
    for title, key, rows in groups:
        ref = engine.get(key, {}).get("summary", {}).get("median")
        lines += [
            f"### {title}",
            "",
            "| what | N | median us | min us | max us | ratio |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_row(r, ref) for r in rows if r]
        lines.append("")
    growth = [
        (k, [x.get("growth") for x in v.get("results", []) if x.get("growth")])
        for k, v in engine.items()
    ]
    lines += [
        "Growth within a run (median interval of the last tenth / first tenth): "
        + ", ".join(f"{k} {statistics.median(g):.2f}x" for k, g in growth if g),
        "",
    ]
    return lines


def _bus(results: dict[str, Any]) -> list[str]:
    bus = results.get("bus", {})
    lines = [
        "## Bus dispatch",
        "",
        "| what | N | median us | min us | max us |",
        "|---|---|---|---|---|",
    ]
    for entry in bus.values():
        s = entry["summary"]
        lines.append(
            f"| {entry['label']} | {_f(entry['params']['n'])} | {_f(s['median'], 2)} | "
            f"{_f(s['min'], 2)} | {_f(s['max'], 2)} |"
        )
    q = results.get("floor", {}).get("queue", {}).get("summary", {}).get("median")
    lines += [
        "",
        f"For scale: a bare asyncio.Queue hop (a task switch, which the bus does not make) "
        f"costs {_f(q, 2)} us.",
        "",
    ]
    return lines


def _replay(replay: dict[str, Any]) -> list[str]:
    lines = ["## Replay", ""]
    if "error" in replay or not replay.get("iterations_per_s"):
        return [*lines, f"Not measured: {replay.get('error', 'no result')}", ""]
    big = replay.get("big") or {}
    lines += [
        f"Recordings generated by the engine with recording on (1 KB outputs), each replayed "
        f"in a fresh process with `loop.replay.replay_file`: a "
        f"{replay['small_file_mb']:.1f} MB one ({replay['small_iterations']:,} iterations) "
        f"{len(replay['results'])} times, and the {replay['file_mb']:.1f} MB one "
        f"({replay['iterations']:,} iterations) {len(replay.get('big_results', []))} times "
        f"(its column shows the median run). All replays matched their recording: "
        f"{replay['ok']}.",
        "",
        "| metric | median | min | max | full-size file |",
        "|---|---|---|---|---|",
    ]
    rows = (
        ("iterations_per_s", "iterations/s", "iterations_per_s"),
        ("mb_per_s", "MB/s", "mb_per_s"),
        ("small_rss_peak_mb", "peak RSS (MB)", "rss_peak_mb"),
        ("rss_before_mb", "RSS before the replay (MB)", "rss_before_mb"),
    )
    for key, label, big_key in rows:
        s = replay[key]
        lines.append(
            f"| {label} | {_f(s['median'])} | {_f(s['min'])} | {_f(s['max'])} | "
            f"{_f(big.get(big_key))} |"
        )
    return [*lines, ""]


def _startup(startup: dict[str, Any]) -> list[str]:
    lines = [
        "## Start-up",
        "",
        f"Wall time over {startup.get('runs')} runs (after a warm-up).",
        "",
        "| command | median ms | min ms | max ms |",
        "|---|---|---|---|",
    ]
    for cmd, s in startup.get("ms", {}).items():
        lines.append(f"| `{cmd}` | {_f(s['median'])} | {_f(s['min'])} | {_f(s['max'])} |")
    return [*lines, ""]


def _tasks(tasks: dict[str, Any]) -> list[str]:
    lines = [
        "## Tasks",
        "",
        "Median latency per tool call through `call_tool` on the file "
        "store. Warm: this process wrote the file last. Cold: another writer changed the "
        "file since (one task renamed behind the store's back, as an agent's CLI call "
        "would). Fresh: a process that never read the file (for information; it parses "
        "and checks the whole file).",
        "",
        "| tasks | file | state | createTask ms | startTask ms | completeTask ms |",
        "|---|---|---|---|---|---|",
    ]
    for count, data in tasks.items():
        if "error" in data:
            lines.append(f"| {count} | | failed: {data['error'][:200]} | | | |")
            continue
        for temp in ("warm", "cold", "fresh"):
            if temp not in data:
                continue
            d = data[temp]
            lines.append(
                f"| {int(count):,} | {data['file_bytes'] / 1e6:.1f} MB | {temp} | "
                f"{_f(d['createTask']['median_ms'], 2)} | "
                f"{_f(d['startTask']['median_ms'], 2)} | "
                f"{_f(d['completeTask']['median_ms'], 2)} |"
            )
    return [*lines, ""]


def _floors(results: dict[str, Any]) -> list[str]:
    floor = results.get("floor", {})
    lines = [
        "## Floors",
        "",
        "Details are medians of the runs too.",
        "",
        "| floor | median us | detail |",
        "|---|---|---|",
    ]
    for key, entry in floor.items():
        runs = [r for r in entry["results"] if "error" not in r]

        def med(field: str, runs: list[dict[str, Any]] = runs) -> float:
            values = [r[field] for r in runs if field in r]
            return statistics.median(values) if values else 0.0

        detail = ""
        if key.startswith("jsonl"):
            encoder = runs[0].get("encoder") if runs else None
            detail = (
                f"encoder {encoder}, {med('line_bytes'):.0f} B/line, "
                f"parse {med('parse_us'):.2f} us/line ({med('parse_mb_per_s'):.0f} MB/s)"
            )
        elif key == "fsync":
            detail = (
                f"{med('line_bytes'):.0f} B/line; with a new folder + file per line: "
                f"{med('with_dir_and_file_us'):.0f} us"
            )
        elif key == "fdatasync":
            detail = f"{med('line_bytes'):.0f} B/line"
        lines.append(f"| {entry['label']} | {_f(entry['summary']['median'], 2)} | {detail} |")
    return [*lines, ""]


def _profiles(profiles: dict[str, Any]) -> list[str]:
    lines = ["## Profiles of the missed targets", ""]
    if not profiles:
        return [*lines, "None (no target missed, or profiling was off).", ""]
    for name, prof in profiles.items():
        lines += [f"### {name}", ""]
        if prof is None or "error" in prof:
            lines += [
                f"Profiler unavailable: {(prof or {}).get('error', 'pyinstrument missing')}",
                "",
            ]
            continue
        if "top_level" in prof:
            lines += [
                f"`{prof['command']}`: {prof['total_import_ms']:.0f} ms of imports.",
                "",
                "| imported first by the command | cumulative ms |",
                "|---|---|",
            ]
            lines += [f"| `{r['module']}` | {r['ms']:.1f} |" for r in prof["top_level"]]
            lines += ["", "| loop module | self ms | cumulative ms |", "|---|---|---|"]
            lines += [
                f"| `{r['module']}` | {r['self_ms']:.1f} | {r['cum_ms']:.1f} |"
                for r in prof["loop_modules"]
            ]
            lines.append("")
            continue
        lines += [
            f"pyinstrument, {prof['case']} {prof['params']}: {prof['total_s']:.2f} s; "
            f"`{prof['focus']}` {prof['focus_s']:.2f} s.",
            "",
            f"| callee of `{prof['focus']}` | s | share |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{r['function']}` | {r['s']:.3f} | {r['share_of_focus']:.0%} |"
            for r in prof["focus_callees"]
        ]
        lines += ["", "| hottest functions (self time) | s | share of run |", "|---|---|---|"]
        lines += [
            f"| `{r['function']}` | {r['s']:.3f} | {r['share']:.0%} |" for r in prof["self_time"]
        ]
        lines.append("")
    return lines


def _environment(meta: dict[str, Any]) -> list[str]:
    m = meta["machine"]
    lines = [
        "## Environment",
        "",
        f"- date: {meta['date']}; mode: {meta['mode']}; runs per case: {meta['runs']}; "
        f"total {meta.get('elapsed_s')} s",
        f"- machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}, "
        f"Python {m['python']}; load average at start {tuple(round(x, 2) for x in m['load_avg'])}",
        f"- interpreter: `{meta['python']}`",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        f"- sizes: `{meta['sizes']}`",
        "",
    ]
    return lines


def render(data: dict[str, Any]) -> str:
    """The whole report."""
    meta = data["meta"]
    res = data["results"]
    m = meta["machine"]
    lines = [
        "# hatloop benchmark report",
        "",
        f"Generated by `python bench/run.py{' --quick' if meta['mode'] == 'quick' else ''}"
        f"{'' if meta['peers'] else ' --no-peers'}` on {meta['date']} "
        f"({m['cpu']}, {m['cores']} cores, Python {m['python']}), hatloop at commit "
        f"`{meta.get('commit') or 'unknown'}`. "
        "Raw data: `results.json` next to this file.",
        "",
    ]
    lines += _targets(data)
    lines += _side_by_side(res)
    lines += _bus(res)
    lines += _replay(res.get("replay", {}))
    lines += render_replay_jobs(res.get("replay_jobs", {}))
    lines += render_parallel(res.get("parallel", {}))
    lines += _startup(res.get("startup", {}))
    lines += render_mcp(res.get("mcp", {}))
    lines += _tasks(res.get("tasks", {}))
    lines += _floors(res)
    lines += _profiles(data.get("profiles", {}))
    lines += _environment(meta)
    return "\n".join(lines)
