"""Every example in a docstring of ``loop/`` runs, and shows what it says."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "loop"


def _with_examples() -> list[str]:
    """The modules of ``loop/`` whose source has a ``>>>`` example."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


WITH_EXAMPLES = _with_examples()


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name: str) -> None:
    """The module's examples run as doctests, and every one passes."""
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_examples_are_found() -> None:
    """The scan finds the modules with examples (a scan that finds none checks nothing)."""
    assert {"loop.errors", "loop.exits", "loop.topics"} <= set(WITH_EXAMPLES)
