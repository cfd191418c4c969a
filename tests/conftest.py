"""Shared fixtures: anyio's pytest plugin on asyncio (the MCP notes in reference/)."""

from __future__ import annotations

import pytest

from loop._log import configure_logging

# Logs go to stderr, as in the CLI (structlog's own default would print to stdout).
configure_logging("console")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Run async tests on asyncio (aiofiles ties us to it)."""
    return "asyncio"
