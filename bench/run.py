"""Run the hatloop benchmarks and write the report.

Usage: ``python bench/run.py [--quick] [--no-peers] [--out DIR]``.

Every measured run is a fresh worker process (``python -m bench.worker``); the runs of
all cases are interleaved (run 1 of every case, then run 2...) so that a load spike on
a shared machine hits every case alike. The peers live in ``bench/.venv`` (created on
first use), never in the project's dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the ``bench`` package importable
    sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402 - after the path set-up above
from bench.env import PEER_REQUIREMENTS, ensure_venv, installed_versions  # noqa: E402
from bench.mcp_bench import run_mcp  # noqa: E402
from bench.parallel import run_parallel  # noqa: E402
from bench.plan import Case, Sizes, build_plan, sizes_for  # noqa: E402
from bench.replay_jobs import run_replay_jobs  # noqa: E402
from bench.startup import measure_startup  # noqa: E402
from bench.stats import summarize  # noqa: E402

WORKER_TIMEOUT = 900


def log(message: str) -> None:
    """Progress goes to stderr; the report goes to files."""
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def run_worker(python: str, case: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one case in a fresh process; a failure is returned as ``{"error": ...}``."""
    try:
        proc = subprocess.run(
            [python, "-m", "bench.worker", case, json.dumps(params)],
            cwd=ROOT,
            capture_output=True,
            timeout=WORKER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {WORKER_TIMEOUT}s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.decode(errors="replace").strip()[-1500:]}
    try:
        result: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no JSON result: " + proc.stdout.decode(errors="replace")[-500:]}
    return result


def run_cases(python: str, cases: list[Case], runs: int) -> dict[str, dict[str, Any]]:
    """Every case ``runs`` times, interleaved; summarised by its main metric."""
    raw: dict[tuple[str, str], list[dict[str, Any]]] = {(c.section, c.key): [] for c in cases}
    for r in range(runs):
        for c in cases:
            log(f"run {r + 1}/{runs}: {c.label}")
            raw[(c.section, c.key)].append(run_worker(python, c.case, c.params))
    out: dict[str, dict[str, Any]] = {}
    for c in cases:
        results = raw[(c.section, c.key)]
        values = [float(x[c.metric]) for x in results if c.metric in x]
        errors = [x["error"] for x in results if "error" in x]
        out.setdefault(c.section, {})[c.key] = {
            "label": c.label,
            "params": c.params,
            "metric": c.metric,
            "summary": summarize(values),
            "results": results,
            "errors": errors,
        }
    return out


def run_tasks(python: str, sizes: Sizes) -> dict[str, Any]:
    """Task tool latencies at each store size (medians over the repetitions)."""
    out: dict[str, Any] = {}
    for count in sizes.task_counts:
        log(f"tasks: {count} tasks in the file store")
        out[str(count)] = run_worker(python, "tasks", {"count": count, "reps": sizes.task_reps})
    return out


def _generate(python: str, path: Path, megabytes: float) -> dict[str, Any]:
    """Record about ``megabytes`` of ping-pong with 1 KB outputs into ``path``."""
    probe_n = 200
    probe = run_worker(
        python,
        "engine",
        {
            "n": probe_n,
            "recording": True,
            "durable": False,
            "output_bytes": 1000,
            "keep": str(path),
        },
    )
    if "error" in probe:
        return probe
    target = int(megabytes * 1e6)
    n = max(probe_n, int(target / (probe["recording_bytes"] / probe_n)))
    log(f"replay: generating a {megabytes:g} MB recording ({n} iterations)")
    gen = run_worker(
        python,
        "engine",
        {
            "n": n,
            "recording": True,
            "durable": False,
            "output_bytes": 1000,
            "keep": str(path),
            "max_bytes": target * 2,
        },
    )
    gen["n"] = n
    return gen


def _replays(python: str, path: Path, runs: int, what: str) -> list[dict[str, Any]]:
    out = []
    for r in range(runs):
        log(f"replay: {what}, run {r + 1}/{runs}")
        out.append(run_worker(python, "replay", {"path": str(path)}))
    return out


def run_replay(python: str, sizes: Sizes, scratch: Path) -> dict[str, Any]:
    """Replay throughput (median of ``runs`` on a smaller file) and the large file's RSS.

    Both files are replayed ``runs`` times, each in a fresh process; the full-size
    figures are those of the median run by iterations/s, and its peak RSS.
    """
    big, small = scratch / "replay-big.jsonl", scratch / "replay-small.jsonl"
    try:
        gen_small = _generate(python, small, sizes.replay_small_mb)
        if "error" in gen_small:
            return {"error": gen_small["error"]}
        small_runs = _replays(python, small, sizes.runs, f"{sizes.replay_small_mb:g} MB")
        gen_big = _generate(python, big, sizes.replay_mb)
        if "error" in gen_big:
            return {"error": gen_big["error"]}
        big_runs = _replays(python, big, sizes.runs, f"{sizes.replay_mb:g} MB")
        good = [x for x in small_runs if "error" not in x]
        big_good = sorted(
            (x for x in big_runs if "error" not in x), key=lambda x: x["iterations_per_s"]
        )
        return {
            "file_mb": big.stat().st_size / 1e6,
            "iterations": gen_big["n"],
            "small_file_mb": small.stat().st_size / 1e6,
            "small_iterations": gen_small["n"],
            "generation_per_iter_us": gen_big.get("per_iter_us"),
            "iterations_per_s": summarize([x["iterations_per_s"] for x in good]),
            "mb_per_s": summarize([x["mb_per_s"] for x in good]),
            "big": big_good[len(big_good) // 2] if big_good else None,
            "rss_peak_mb": summarize([x["rss_peak_mb"] for x in big_good]),
            "rss_before_mb": summarize([x["rss_before_mb"] for x in big_good]),
            "small_rss_peak_mb": summarize([x["rss_peak_mb"] for x in good]),
            "ok": bool(good) and bool(big_good) and all(x.get("ok") for x in [*good, *big_good]),
            "results": small_runs,
            "big_results": big_runs,
            "errors": [x["error"] for x in [*small_runs, *big_runs] if "error" in x],
        }
    finally:
        big.unlink(missing_ok=True)
        small.unlink(missing_ok=True)


def _replay_jobs(python: str, sizes: Sizes) -> dict[str, Any]:
    """``replay DIR --jobs 1 / 2 / auto`` on a folder of small recordings."""
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-replay-jobs-") as scratch:
        return run_replay_jobs(
            run_worker,
            python,
            count=sizes.replay_folder_n,
            runs=sizes.replay_folder_runs,
            scratch=Path(scratch),
            root=ROOT,
            log=log,
        )


def _parallel(python: str, sizes: Sizes) -> dict[str, Any]:
    return run_parallel(run_worker, python, n=sizes.parallel_n, runs=sizes.parallel_runs, log=log)


def _only_replay_jobs(python: str, sizes: Sizes, out_dir: Path, part: str = "replay-jobs") -> int:
    """Measure one part alone (the folder replay, or parallel hats); merge it into
    ``out_dir``'s results and report."""
    saved_path = out_dir / "results.json"
    if not saved_path.exists():
        log(f"--only needs the results of a full run in {saved_path}")
        return 2
    saved = json.loads(saved_path.read_text(encoding="utf-8"))
    key = part.replace("-", "_")
    section = _replay_jobs(python, sizes) if part == "replay-jobs" else _parallel(python, sizes)
    meta = report.machine_meta(
        python, quick=False, peers=False, started=time.time(), sizes=sizes, versions={}
    )
    section.update(commit=meta["commit"], date=meta["date"], load_avg=meta["machine"]["load_avg"])
    saved["results"][key] = section
    saved_path.write_text(json.dumps(saved, indent=1, default=str) + "\n", encoding="utf-8")
    (out_dir / "REPORT.md").write_text(report.render(saved), encoding="utf-8")
    log(f"merged {key} into {saved_path} and re-rendered {out_dir / 'REPORT.md'}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python bench/run.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and 3 runs (CI keeps the bench working; figures are rough)",
    )
    p.add_argument(
        "--no-peers",
        action="store_true",
        help="skip the peers (and the bench virtualenv unless --python is given)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where REPORT.md and results.json go (default: bench/, or bench/out/ with --quick)",
    )
    p.add_argument(
        "--python",
        default=None,
        help="interpreter for the measured processes (default: bench/.venv with "
        "peers, this interpreter without)",
    )
    p.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="RESULTS_JSON",
        help="only re-render REPORT.md (into --out) from an existing results.json",
    )
    p.add_argument(
        "--only",
        choices=["replay-jobs", "parallel"],
        default=None,
        help="measure only this part and merge it into the results.json of --out "
        "(then re-render REPORT.md)",
    )
    p.add_argument(
        "--no-profile",
        action="store_true",
        help="do not profile missed targets (profiling is off in --quick)",
    )
    return p.parse_args(argv)


def _bytecode(python: str) -> None:
    """Let the measured processes use compiled bytecode, as an installed hatloop does.

    An environment with ``PYTHONDONTWRITEBYTECODE`` set (some sandboxes and CI images
    set it) would make every process compile hatloop's modules from source: the
    start-up and first-use figures would measure the compiler. The variable is dropped
    for the measured processes, and ``loop/`` is compiled once before they run.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [python, "-m", "compileall", "-q", str(ROOT / "loop")], check=False, capture_output=True
    )


def main(argv: list[str] | None = None) -> int:
    """Measure everything, write ``REPORT.md`` and ``results.json``; exit 0 when written."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    peers = not args.no_peers
    out_dir: Path = args.out or (ROOT / "bench" / ("out" if args.quick else ""))
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.render is not None:
        saved = json.loads(args.render.read_text(encoding="utf-8"))
        # the verdicts are re-derived from the raw results, by this report's rules
        saved["targets"] = report.evaluate_targets(saved["results"], peers=saved["meta"]["peers"])
        (out_dir / "REPORT.md").write_text(report.render(saved), encoding="utf-8")
        return 0
    if args.python:
        python = args.python
    elif peers:
        python = str(ensure_venv(ROOT, log=log))
    else:
        python = sys.executable
    _bytecode(python)
    sizes = sizes_for(args.quick)
    if args.only is not None:
        return _only_replay_jobs(python, sizes, out_dir, args.only)
    started = time.time()
    t0 = time.perf_counter()
    results: dict[str, Any] = run_cases(python, build_plan(sizes, peers=peers), sizes.runs)
    results["tasks"] = run_tasks(python, sizes)
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-replay-") as scratch:
        results["replay"] = run_replay(python, sizes, Path(scratch))
    results["replay_jobs"] = _replay_jobs(python, sizes)
    results["parallel"] = _parallel(python, sizes)
    log("start-up: --help, emit and the tool commands")
    results["startup"] = measure_startup(python, sizes.startup_runs)
    results["mcp"] = run_mcp(
        run_worker, python, runs=sizes.runs, calls=sizes.mcp_calls, root=ROOT, log=log, node=peers
    )
    dists = ["hatloop", "orjson", "pyinstrument", "anyio", "pydantic"]
    if peers:
        dists += list(PEER_REQUIREMENTS)
    data: dict[str, Any] = {
        "meta": report.machine_meta(
            python,
            quick=args.quick,
            peers=peers,
            started=started,
            sizes=sizes,
            versions=installed_versions(python, dists),
        ),
        "results": results,
    }
    data["targets"] = report.evaluate_targets(data["results"], peers=peers)
    profile = not (args.quick or args.no_profile)
    data["profiles"] = (
        report.profile_misses(python, ROOT, data["targets"], sizes) if profile else {}
    )
    data["meta"]["elapsed_s"] = round(time.perf_counter() - t0, 1)
    (out_dir / "results.json").write_text(
        json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8"
    )
    (out_dir / "REPORT.md").write_text(report.render(data), encoding="utf-8")
    log(
        f"wrote {out_dir / 'REPORT.md'} and {out_dir / 'results.json'} "
        f"in {data['meta']['elapsed_s']}s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
