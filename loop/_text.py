"""Plain words for what the run's summary, ``status`` and the session views say alike."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["iterations_text"]


def iterations_text(numbers: Sequence[int]) -> str:
    """``iteration 3``, ``iterations 3 and 4``, ``iterations 2, 3 and 4``."""
    if len(numbers) == 1:
        return f"iteration {numbers[0]}"
    *head, last = (str(n) for n in numbers)
    return f"iterations {', '.join(head)} and {last}"
