"""Fixtures for the session tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main()` configures structlog for the process; put the previous set-up back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
