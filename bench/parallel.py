"""Parallel hats: the scheduling overhead per activation, and the wall time of a 3-wide
wave of 2-second agents (the floor is 2 s; three one after another take 6 s).

* ``parallel_overhead`` (a worker case): the real engine on a wave topology with
  instant scripted backends (a fan-out hat publishes three ``work.item`` events, a hat
  of ``concurrency = 3`` takes them, an aggregator gathers them and starts the next
  round), against the sequential ping-pong of ``engine_cases`` in the same process:
  time per activation, and the difference (what scheduling, lanes and turns cost).
* ``parallel_wave`` (a worker case): three reviewers, real subprocesses that each sleep
  2 s, between an instant coordinator and an instant aggregator; the wave's wall time
  is from the first reviewer's ``iteration.start`` to the last one's ``iteration.end``
  (the journal's times), and the speed-up is the sum of the three activations'
  durations over it.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

__all__ = ["parallel_overhead", "parallel_wave", "render_parallel", "run_parallel"]

HATS = """
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.fan]
triggers = ["task.start", "round.next"]
publishes = ["work.item"]
[hats.worker]
triggers = ["work.item"]
publishes = ["work.done"]
concurrency = 3
[hats.gather]
triggers = ["work.done"]
publishes = ["round.next", "LOOP_COMPLETE"]
aggregate = {{ mode = "wait_for_all" }}
{worker_backend}
"""

SLEEPER = """\
import sys, time
sys.stdin.read()
time.sleep(float(sys.argv[1]))
print('<event topic="work.done">done</event>')
"""

Worker = Callable[[str, str, dict[str, Any]], dict[str, Any]]


def _config(folder: Path, *, n: int, worker_backend: str = "") -> Any:
    from loop.config import load_config

    loop = (
        f'[loop]\nprompt = "bench"\nmax_iterations = {n}\nstale_threshold = 1000000\n'
        "max_runtime_seconds = 86400\ndurable = false\n"
    )
    path = folder / "loop.toml"
    path.write_text(loop + HATS.format(worker_backend=worker_backend), encoding="utf-8")
    return load_config(path, root=folder)


def _scripted(topic: str, count: int, per: int = 1) -> Any:
    from loop.backends.scripted import ScriptedBackend

    return ScriptedBackend(
        [
            "".join(f'<event topic="{topic}">{k}.{j}</event>' for j in range(per))
            for k in range(count)
        ]
    )


def parallel_overhead(params: dict[str, Any]) -> dict[str, Any]:
    """Time per activation of the wave topology (instant backends), ``n`` activations,
    after a short warm-up of both engines (lazy imports are not scheduling)."""
    from bench.engine_cases import engine_pingpong

    _wave_run(20)
    engine_pingpong({"n": 20, "recording": False, "durable": False})
    n = int(params["n"])
    total, summary = _wave_run(n)
    seq = engine_pingpong({"n": n, "recording": False, "durable": False})
    per = total / max(summary.iterations, 1) * 1e6
    seq_per = seq["total_s"] / max(seq["iterations"], 1) * 1e6
    out: dict[str, Any] = {
        "activations": summary.iterations,
        "reason": summary.reason,
        "total_s": round(total, 6),
        "per_activation_us": round(per, 1),
        "sequential_per_iteration_us": round(seq_per, 1),
        "overhead_us": round(per - seq_per, 1),
    }
    out.update(_replays(n))
    return out


def _replays(n: int) -> dict[str, Any]:
    """Replay speed of a recorded parallel session against a sequential one of ``n``,
    and of the sequential session (the same ping-pong) recorded through the lanes
    (``ping`` of ``concurrency = 2``: one event pending at a time, nothing at once): the
    same iterations, so the difference is what the lanes cost a replay."""
    from bench.engine_cases import engine_pingpong
    from loop.replay import replay_file

    with tempfile.TemporaryDirectory(prefix="hatloop-bench-par-rec-") as tmp:
        par, seq = Path(tmp) / "parallel.jsonl", Path(tmp) / "sequential.jsonl"
        lanes = Path(tmp) / "lanes.jsonl"
        _wave_run(n, record=par)
        engine_pingpong({"n": n, "recording": True, "durable": False, "keep": str(seq)})
        pingpong = {"n": n, "recording": True, "durable": False, "keep": str(lanes)}
        engine_pingpong({**pingpong, "concurrency": 2})
        speeds = {}
        for name, path in (("parallel", par), ("sequential", seq), ("lanes", lanes)):
            t0 = time.perf_counter()
            result = replay_file(path)
            took = time.perf_counter() - t0
            if not result.ok:
                return {"replay_error": f"{name}: {result.summary()}"}
            speeds[f"replay_{name}_it_per_s"] = round(result.actual_iterations / took, 1)
    return speeds


def _wave_run(n: int, record: Path | None = None) -> tuple[float, Any]:
    from loop.runner import RunOptions, run_loop

    rounds = n // 5 + 2
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-par-") as tmp:
        folder = Path(tmp)
        cfg = _config(folder, n=n)
        options = RunOptions(
            workdir=folder,
            progress=False,
            handle_signals=False,
            backends={
                "fan": _scripted("work.item", rounds, per=3),
                "worker": _scripted("work.done", rounds * 3),
                "gather": _scripted("round.next", rounds),
            },
        )
        extra: list[Any] = []
        if record is not None:
            from loop.session.recorder import Recorder

            extra.append(Recorder(record, force=True, append=False))
        t0 = time.perf_counter()
        summary = anyio.run(run_loop, cfg, options, extra)
        return time.perf_counter() - t0, summary


def parallel_wave(params: dict[str, Any]) -> dict[str, Any]:
    """The wall time of one 3-wide wave of ``seconds``-long subprocess agents."""
    from loop.engine.journal import read_journal
    from loop.records import IterationEnd, IterationStart
    from loop.runner import RunOptions, run_loop

    seconds = float(params.get("seconds", 2.0))
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-wave-") as tmp:
        folder = Path(tmp)
        agent = folder / "sleeper.py"
        agent.write_text(SLEEPER, encoding="utf-8")
        backend = (
            '[hats.worker.backend]\ntype = "command"\n'
            f"command = {json.dumps([sys.executable, str(agent), str(seconds)])}\n"
        )
        cfg = _config(folder, n=5, worker_backend=backend)
        options = RunOptions(
            workdir=folder,
            session_id="wave",
            progress=False,
            handle_signals=False,
            backends={
                "fan": _scripted("work.item", 1, per=3),
                "gather": _scripted("LOOP_COMPLETE", 1),
            },
        )
        from loop.runner import build_backends

        options.backends = {**build_backends(cfg), **(options.backends or {})}
        t0 = time.perf_counter()
        summary = anyio.run(run_loop, cfg, options)
        total = time.perf_counter() - t0
        records = read_journal(folder / ".loop/sessions/wave/journal.jsonl").records
    starts = [r.ts for r in records if isinstance(r, IterationStart) and r.hat == "worker"]
    ends = [r for r in records if isinstance(r, IterationEnd) and r.hat == "worker"]
    if len(starts) != 3 or len(ends) != 3:
        return {"error": f"expected a wave of 3, got {len(starts)} starts ({summary.reason})"}
    wave = max(e.ts for e in ends) - min(starts)
    busy = sum(e.duration for e in ends)
    return {
        "reason": summary.reason,
        "agent_seconds": seconds,
        "wave_s": round(wave, 4),
        "session_s": round(total, 4),
        "sum_of_activations_s": round(busy, 4),
        "speedup": round(busy / wave, 3) if wave else None,
        "above_floor_ms": round((wave - seconds) * 1e3, 1),
    }


def run_parallel(
    run_worker: Worker, python: str, *, n: int, runs: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Both cases, ``runs`` times each (fresh processes); medians."""
    out: dict[str, Any] = {"n": n, "runs": runs, "overhead": [], "wave": []}
    for r in range(runs):
        log(f"parallel hats: overhead of {n} activations, run {r + 1}/{runs}")
        out["overhead"].append(run_worker(python, "parallel_overhead", {"n": n}))
        log(f"parallel hats: a 3-wide wave of 2 s agents, run {r + 1}/{runs}")
        out["wave"].append(run_worker(python, "parallel_wave", {"seconds": 2.0}))
    for key, field in (("overhead", "overhead_us"), ("wave", "wave_s")):
        values = [x[field] for x in out[key] if field in x]
        out[f"median_{field}"] = statistics.median(values) if values else None
    for key in ("replay_parallel_it_per_s", "replay_sequential_it_per_s", "replay_lanes_it_per_s"):
        values = [x[key] for x in out["overhead"] if key in x]
        out[f"median_{key}"] = statistics.median(values) if values else None
    per = [x["per_activation_us"] for x in out["overhead"] if "per_activation_us" in x]
    seq = [x["sequential_per_iteration_us"] for x in out["overhead"] if "per_activation_us" in x]
    out["median_per_activation_us"] = statistics.median(per) if per else None
    out["median_sequential_us"] = statistics.median(seq) if seq else None
    speed = [x["speedup"] for x in out["wave"] if x.get("speedup")]
    out["median_speedup"] = statistics.median(speed) if speed else None
    out["errors"] = [x["error"] for x in out["overhead"] + out["wave"] if "error" in x]
    return out


def render_parallel(data: dict[str, Any]) -> list[str]:
    """The report's section on parallel hats."""
    lines = ["## Parallel hats", ""]
    if not data or not data.get("overhead"):
        return [*lines, "Not measured.", ""]
    lines += [
        f"Scheduling overhead: the engine on a wave topology (a fan-out of three, a hat of "
        f"`concurrency = 3`, an aggregator) with instant backends, {data['n']} activations, "
        f"against the sequential ping-pong, {data['runs']} run(s) (medians): "
        f"**{_f(data.get('median_per_activation_us'))} µs per activation** against "
        f"{_f(data.get('median_sequential_us'))} µs per sequential iteration, so "
        f"**{_f(data.get('median_overhead_us'))} µs** of scheduling per activation.",
        "",
        "A 3-wide wave of 2-second agents (real subprocesses): wall time from the first "
        f"activation's start to the last one's commit **{_f(data.get('median_wave_s'), 3)} s** "
        f"(floor 2 s; one after another: 6 s), a speed-up of "
        f"**{_f(data.get('median_speedup'), 2)}x**.",
        "",
        "Replay of those recorded sessions (the same number of activations): the parallel "
        f"one at **{_f(data.get('median_replay_parallel_it_per_s'), 0)} iterations/s**, the "
        f"sequential ping-pong at {_f(data.get('median_replay_sequential_it_per_s'), 0)} "
        "iterations/s. The same ping-pong recorded through the parallel hats' lanes (`ping` "
        "of `concurrency = 2`: the same iterations, one event pending at a time) replays "
        f"at {_f(data.get('median_replay_lanes_it_per_s'), 0)} iterations/s: its "
        "difference with the sequential rate is what the lanes cost (a task, cancel "
        "scopes, the turns and a `start` line per activation); the rest of the wave's is "
        "its topology (three events per fan-out, an aggregator of three).",
        "",
    ]
    if data.get("errors"):
        lines += [f"Errors: {data['errors'][0]}", ""]
    return lines


def _f(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"
