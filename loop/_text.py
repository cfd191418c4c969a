"""Plain words for what the run's summary, ``status`` and the session views say alike."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["iterations_text", "iterations_were", "them"]


def iterations_text(numbers: Sequence[int]) -> str:
    """``iteration 3``, ``iterations 3 and 4``, ``iterations 2, 3 and 4``."""
    if len(numbers) == 1:
        return f"iteration {numbers[0]}"
    *head, last = (str(n) for n in numbers)
    return f"iterations {', '.join(head)} and {last}"


def iterations_were(numbers: Sequence[int]) -> str:
    """``iteration 3 was``, ``iterations 3 and 4 were``."""
    return f"{iterations_text(numbers)} {'was' if len(numbers) == 1 else 'were'}"


def them(numbers: Sequence[int]) -> str:
    """``it`` for one iteration, ``them`` for more."""
    return "it" if len(numbers) == 1 else "them"
