"""The machine and the environment a benchmark run measured on (the report's header)."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

from bench.plan import Sizes

__all__ = ["machine_meta"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages / 2**30, 1)


def machine_meta(
    python: str,
    *,
    quick: bool,
    peers: bool,
    started: float,
    sizes: Sizes,
    versions: dict[str, str | None],
) -> dict[str, Any]:
    """Date, machine and environment of the run."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "mode": "quick" if quick else "full",
        "peers": peers,
        "runs": sizes.runs,
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "memory_gib": _memory_gib(),
            "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
            "load_avg": os.getloadavg(),
        },
        "python": python,
        "commit": _commit(),
        "versions": versions,
        "sizes": sizes.__dict__,
    }


def _commit() -> str | None:
    """The measured code's git commit (with ``+changes`` when the tree differs from it)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "loop"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
