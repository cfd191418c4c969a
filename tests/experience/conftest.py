"""Fixtures for the experience tests: a tool context rooted in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.tools.base import ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """A context whose project root is tmp_path and experiences live in tmp_path/exp."""
    return ToolContext(root=tmp_path, experiences_base=Path("exp"))
