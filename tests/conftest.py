"""Shared fixtures: anyio's pytest plugin on asyncio (the MCP notes in reference/)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
import structlog

# Hermetic: the loop's own variables (a session, an events file, a tasks file, a crash
# point) set in the shell that runs pytest never reach this process or its subprocesses.
for _name in [k for k in os.environ if k.startswith(("LOOP_", "HATLOOP_")) or k == "FILE_PATH"]:
    del os.environ[_name]

# Hermetic: tests send SIGINT to the CLI as Ctrl-C at a terminal would. A test run started
# in the background of a non-interactive shell inherits SIGINT ignored, and so would every
# process it starts (Python keeps an ignored SIGINT ignored): give them the default back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from loop._log import configure_logging  # noqa: E402 - after the environment is clean

# Logs go to stderr, as in the CLI (structlog's own default would print to stdout).
configure_logging("console")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Run async tests on asyncio, as the CLI runs (the MCP endpoint's server needs it)."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _cache_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """hatloop's cache (the MCP tool catalog) goes to a scratch folder, also for the
    subprocesses the tests start."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main()` configures structlog for the process; put the previous set-up back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
