"""The benchmark's quick mode keeps working: it runs end to end and writes its report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "## Targets",
    "## Iteration overhead, side by side",
    "## Bus dispatch",
    "## Replay",
    "## Start-up",
    "## MCP server",
    "## Tasks",
    "## Floors",
    "## Profiles of the missed targets",
    "## Environment",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Run ``bench/run.py --quick --no-peers`` once, as CI does; return its folder and JSON."""
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--no-peers",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


@pytest.mark.timeout(300)
def test_report_has_every_section(quick_run: tuple[Path, dict[str, Any]]) -> None:
    """REPORT.md is written with every section, in order, and names the quick command."""
    out, _ = quick_run
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    missing = [s for s in SECTIONS if s not in report]
    assert not missing
    positions = [report.find(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert "python bench/run.py --quick --no-peers" in report


@pytest.mark.timeout(300)
def test_results_json_has_every_area(quick_run: tuple[Path, dict[str, Any]]) -> None:
    """results.json holds the engine, bus, floors, tasks, replay and start-up results."""
    _, data = quick_run
    assert data["meta"]["mode"] == "quick"
    results = data["results"]
    assert set(results["engine"]) == {"off", "recording", "durable", "durable_recording"}
    assert set(results["bus"]) == {"pingpong", "fanout"}
    assert set(results["floor"]) == {
        "queue",
        "journaled",
        "contract",
        "jsonl",
        "jsonl_small",
        "fsync",
        "fdatasync",
    }
    assert "peers" not in results
    startup = {"python -m loop --help", "python -m loop emit t.x p", "python -m loop task list"}
    assert startup | {"python -m loop experience list"} <= set(results["startup"]["ms"])
    mcp = results["mcp"]
    assert set(mcp["summary"]) == {"startup", "startup_cold", "stdio", "http"}  # no peers
    assert mcp["errors"] == []
    assert {"sdk_ms", "hatloop_ms"} <= set(mcp["summary"]["startup"])
    assert {"first_result_ms", "median_us"} <= set(mcp["summary"]["stdio"])
    assert {"first_result_ms", "median_us"} <= set(mcp["summary"]["http"])
    assert results["startup"]["emitted_lines"] > 0


@pytest.mark.timeout(300)
def test_every_case_produced_a_measurement(quick_run: tuple[Path, dict[str, Any]]) -> None:
    """Each engine, bus and floor case has a median; tasks and replay ran without error."""
    _, data = quick_run
    results = data["results"]
    for section in ("engine", "bus", "floor"):
        for key, entry in results[section].items():
            assert entry["summary"]["median"] is not None, (section, key, entry["errors"])
    assert results["tasks"]
    for count, tasks in results["tasks"].items():
        assert "error" not in tasks, (count, tasks)
        assert set(tasks["warm"]) == {"createTask", "startTask", "completeTask"}
    # the synced floors write lines as long as a durable iteration's journal write
    engine_bytes = [
        r["journal_bytes_per_iteration"] for r in results["engine"]["durable"]["results"]
    ]
    for key in ("fsync", "fdatasync"):
        for run in results["floor"][key]["results"]:
            assert 0.75 <= run["line_bytes"] / max(engine_bytes) <= 1.25, (key, run, engine_bytes)
    replay = results["replay"]
    assert "error" not in replay, replay
    assert replay["ok"] is True
    assert replay["rss_peak_mb"]["median"] > 0
    folder = results["replay_jobs"]
    assert folder["errors"] == [], folder["errors"]
    assert set(folder["jobs"]) == {"1", "2", "auto"}
    for jobs, entry in folder["jobs"].items():
        assert entry["median_s"] > 0, jobs
        # every recording of the folder replayed and passed, whatever the --jobs
        assert entry["results"][0]["summary"].startswith(
            f"{folder['count']} recording(s): {folder['count']} passed, 0 diverged"
        ), entry


@pytest.mark.timeout(300)
def test_every_target_has_a_verdict(quick_run: tuple[Path, dict[str, Any]]) -> None:
    """Each target without peers is stated as met or not, with its ratio."""
    _, data = quick_run
    names = {t["name"] for t in data["targets"]}
    required = {
        "durable iteration vs raw fsync floor",
        "replay throughput",
        "replay peak RSS",
        "start-up: python -m loop --help",
        "start-up: python -m loop emit t.x p",
    }
    assert required <= names
    for target in data["targets"]:
        if target["name"] in required:  # measured in every run: a verdict, never None
            assert isinstance(target["met"], bool), target
        if target["met"] is not None:
            assert isinstance(target["met"], bool)
            assert target["ratio"] is not None
    # an older goal is shown for information: how it went, never a target's verdict
    retired = next(t for t in data["targets"] if t["goal"] == "<= 25 us median")
    assert retired["met"] is None
    assert isinstance(retired["retired_met"], bool)
