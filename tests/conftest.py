"""Shared fixtures: anyio's pytest plugin on asyncio (the MCP notes in reference/)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Run async tests on asyncio (aiofiles ties us to it)."""
    return "asyncio"
