"""Small statistics and timing helpers shared by the benchmark cases."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["Stamps", "flatness", "per_iteration_us", "summarize"]


class Stamps:
    """Collects ``perf_counter`` stamps, one per iteration or transition."""

    def __init__(self) -> None:
        self.t: list[float] = []

    def hit(self) -> None:
        """Stamp now."""
        self.t.append(time.perf_counter())

    def result(self) -> dict[str, Any]:
        """Per-iteration wall time (first stamp to last) and flatness."""
        out: dict[str, Any] = {"per_iter_us": per_iteration_us(self.t), "stamps": len(self.t)}
        wall = self.t[-1] - self.t[0] if len(self.t) > 1 else 0.0
        out["wall_s"] = round(wall, 6)
        out.update(flatness(self.t))
        return out


def per_iteration_us(stamps: Sequence[float]) -> float:
    """Mean interval between consecutive stamps, in microseconds."""
    if len(stamps) < 2:
        return float("nan")
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1e6


def flatness(stamps: Sequence[float]) -> dict[str, float]:
    """Median interval of the first and last tenth of a run, and their ratio.

    A ratio near 1 means the per-iteration cost does not grow with the run.
    """
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    if len(gaps) < 20:
        return {}
    k = max(1, len(gaps) // 10)
    first = statistics.median(gaps[:k]) * 1e6
    last = statistics.median(gaps[-k:]) * 1e6
    return {
        "first_tenth_us": round(first, 3),
        "last_tenth_us": round(last, 3),
        "growth": round(last / first, 3) if first > 0 else float("nan"),
    }


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of the runs (and the runs themselves)."""
    vals = [v for v in values if v == v]  # drop NaN (a failed run)  # noqa: PLR0124
    if not vals:
        return {"median": None, "min": None, "max": None, "runs": list(values)}
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "runs": [round(v, 3) for v in vals],
    }
