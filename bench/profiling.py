"""Where the time goes when a target is missed.

pyinstrument for code paths, ``-X importtime`` for start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["import_profile", "pyinstrument_profile"]


def _walk(frame: dict[str, Any], visit: Any, stack: tuple[str, ...] = ()) -> None:
    name = f"{frame['function']} ({frame.get('file_path_short', '?')}:{frame.get('line_no', 0)})"
    visit(frame, name, stack)
    for child in frame.get("children", []):
        _walk(child, visit, (*stack, frame["function"]))


def _summarize(tree: dict[str, Any], focus: str) -> dict[str, Any]:
    """Self time per function (top 15) and the inclusive time of ``focus``'s callees."""
    root = tree["root_frame"]
    total = float(root["time"]) or 1e-9
    own: dict[str, float] = defaultdict(float)
    focus_time = 0.0
    callees: dict[str, float] = defaultdict(float)

    def visit(frame: dict[str, Any], name: str, stack: tuple[str, ...]) -> None:
        nonlocal focus_time
        children = frame.get("children", [])
        own[name] += float(frame["time"]) - sum(float(c["time"]) for c in children)
        if frame["function"] == focus and focus not in stack:
            focus_time += float(frame["time"])
            for c in children:
                cname = f"{c['function']} ({c.get('file_path_short', '?')}:{c.get('line_no', 0)})"
                callees[cname] += float(c["time"])

    _walk(root, visit)
    top_self = sorted(own.items(), key=lambda kv: -kv[1])[:15]
    top_callees = sorted(callees.items(), key=lambda kv: -kv[1])[:15]
    return {
        "total_s": total,
        "focus": focus,
        "focus_s": focus_time,
        "self_time": [
            {"function": k, "s": round(v, 4), "share": round(v / total, 4)} for k, v in top_self
        ],
        "focus_callees": [
            {"function": k, "s": round(v, 4), "share_of_focus": round(v / (focus_time or 1e-9), 4)}
            for k, v in top_callees
        ],
    }


def pyinstrument_profile(
    python: str, root: Path, case: str, params: dict[str, Any], focus: str
) -> dict[str, Any] | None:
    """Profile one worker case under pyinstrument; ``None`` if pyinstrument is missing."""
    check = subprocess.run(
        [python, "-c", "import pyinstrument"],
        capture_output=True,
        check=False,
    )
    if check.returncode != 0:
        return None
    with tempfile.TemporaryDirectory(prefix="hatloop-profile-") as tmp:
        out = Path(tmp) / "profile.json"
        cmd = [
            python,
            "-m",
            "pyinstrument",
            "-r",
            "json",
            "-o",
            str(out),
            "-m",
            "bench.worker",
            case,
            json.dumps(params),
        ]
        proc = subprocess.run(cmd, cwd=root, capture_output=True, check=False)
        if proc.returncode != 0 or not out.exists():
            return {"error": proc.stderr.decode(errors="replace")[-800:]}
        tree = json.loads(out.read_text(encoding="utf-8"))
    summary = _summarize(tree, focus)
    summary["case"] = case
    summary["params"] = params
    return summary


def import_profile(python: str, args: list[str], top: int = 12) -> dict[str, Any]:
    """Cumulative import time per ``loop`` module (and the heaviest others) for one command."""
    with tempfile.TemporaryDirectory(prefix="hatloop-imports-") as tmp:
        env = dict(os.environ)
        env["LOOP_EVENTS_FILE"] = str(Path(tmp) / "events.jsonl")
        proc = subprocess.run(
            [python, "-X", "importtime", *args],
            cwd=tmp,
            env=env,
            capture_output=True,
            check=False,
        )
    rows: list[tuple[str, int, int]] = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line.removeprefix("import time:").split("|")
        try:
            self_us, cum_us = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        rows.append((parts[2].rstrip(), self_us, cum_us))
    top_level = [
        (name.strip(), cum) for name, _, cum in rows if not name.startswith("  ")
    ]  # first-level imports: they add up to the total
    total = sum(cum for _, cum in top_level)
    heaviest = sorted(top_level, key=lambda r: -r[1])[:top]
    return {
        "command": " ".join(args),
        "total_import_ms": total / 1e3,
        "top_level": [{"module": m, "ms": c / 1e3} for m, c in heaviest],
        "loop_modules": [
            {"module": n.strip(), "self_ms": s / 1e3, "cum_ms": c / 1e3}
            for n, s, c in sorted(rows, key=lambda r: -r[2])
            if n.strip().startswith("loop")
        ][:top],
    }
