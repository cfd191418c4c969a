"""How the engine calls a backend: the child's environment, the emit file, the timeout.

Everything here is about one iteration's call; the driver decides when to call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio
import structlog

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.errors import BackendUnavailable, InputError

__all__ = ["base_env", "call_backend", "call_with_timeout", "child_env", "prepare_events_file"]

log = structlog.get_logger("loop.engine")


def base_env(extra: Mapping[str, str], *, session_id: str, session_dir: Path) -> dict[str, str]:
    """The part of a child's environment that is the same for every iteration."""
    env = dict(extra)
    path = os.environ.get("PATH", "")
    env.update(
        {
            "LOOP_SESSION_ID": session_id,
            "LOOP_SESSION_DIR": str(session_dir.resolve()),
            "LOOP_PYTHON": sys.executable,
            "PATH": str(Path(sys.executable).parent) + (os.pathsep + path if path else ""),
        }
    )
    return env


def child_env(
    base: Mapping[str, str], hat: str, iteration: int, events_file: str
) -> dict[str, str]:
    """``base`` plus the iteration's own ``LOOP_*`` variables."""
    env = dict(base)
    env["LOOP_EVENTS_FILE"] = events_file
    env["LOOP_ITERATION"] = str(iteration)
    env["LOOP_HAT"] = hat
    return env


def prepare_events_file(backend: Backend, it_dir: str, events_file: str, *, rerun: bool) -> None:
    """Give the iteration a clean events file; only backends with a child need one made.

    A re-run of an in-flight iteration must not see the lines its killed run wrote, so
    an old file is always removed; the folder and an empty file are created only for
    backends whose child process writes there (``uses_files``, default true).
    """
    if getattr(backend, "uses_files", True):
        Path(it_dir).mkdir(parents=True, exist_ok=True)
        Path(events_file).write_bytes(b"")
    elif rerun:  # only a re-run can find old lines
        with contextlib.suppress(FileNotFoundError):
            Path(events_file).unlink()


async def call_backend(backend: Backend, request: BackendRequest) -> BackendResult:
    """Run the backend; an exception is a failed iteration, except "cannot run at all"."""
    try:
        return await backend.run(request)
    except (BackendUnavailable, InputError):  # cannot run at all / bad input: stop
        raise
    except Exception as exc:
        log.exception("backend raised", hat=request.hat)
        return BackendResult.failed(f"backend error: {type(exc).__name__}: {exc}")


async def call_with_timeout(
    backend: Backend, request: BackendRequest, timeout: float
) -> BackendResult:
    """:func:`call_backend` under the iteration's timeout (a failed iteration when it fires)."""
    with anyio.move_on_after(timeout) as scope:
        return await call_backend(backend, request)
    assert scope.cancelled_caught
    return BackendResult.failed(f"timeout after {timeout:g}s", exit_code=None)
