"""How the engine calls a backend: the child's environment, the emit file, the timeout.

Everything here is about one iteration's call; the driver decides when to call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import structlog

from loop.backends._process import STOP_SECONDS
from loop.backends.base import Backend, BackendRequest, BackendResult, effective_timeout
from loop.config import LoadedConfig
from loop.errors import BackendUnavailable, InputError
from loop.extensions import Extension, RunningIteration, overrides

__all__ = [
    "BACKSTOP_SECONDS",
    "ChildEnvironments",
    "base_env",
    "call_backend",
    "call_with_timeout",
    "child_env",
    "engine_deadline",
    "hat_limits",
    "hat_timeout",
    "prepare_events_file",
]

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


class ChildEnvironments:
    """Each iteration's child environment, and the extensions that add to it.

    :meth:`build` is the session's base plus the iteration's ``LOOP_*`` variables,
    over what the extensions that override
    :meth:`~loop.extensions.Extension.child_env` add (a per-iteration secret...).
    :meth:`release` tells those extensions the iteration's call is over; it costs
    nothing for an iteration whose environment was never built.
    """

    __slots__ = ("_given", "_session_dir", "_session_id", "base", "contributors")

    def __init__(
        self,
        extensions: Sequence[Extension],
        *,
        session_id: str,
        session_dir: Path,
        base: Mapping[str, str] | None = None,
    ) -> None:
        self.base = dict(base or {})
        self.contributors = [e for e in extensions if overrides(e, "child_env")]
        self._session_id = session_id
        self._session_dir = session_dir.resolve()
        self._given: dict[int, RunningIteration] = {}

    def build(self, hat: str, iteration: int, activation: int, events_file: str) -> dict[str, str]:
        """The environment of ``iteration``'s child processes (see :func:`child_env`)."""
        env = child_env(self.base, hat, iteration, events_file)
        if not self.contributors:
            return env
        running = RunningIteration(
            session_id=self._session_id,
            session_dir=self._session_dir,
            hat=hat,
            iteration=iteration,
            activation=activation,
            events_file=Path(events_file),
        )
        self._given[iteration] = running
        added: dict[str, str] = {}
        for ext in self.contributors:
            added.update(ext.child_env(running))
        return {**added, **env}

    def release(self, iteration: int) -> None:
        """``iteration``'s call returned or was cancelled: what it was given is void."""
        if not self._given:
            return
        running = self._given.pop(iteration, None)
        if running is None:
            return
        for ext in self.contributors:
            try:
                ext.release_child_env(running)
            except Exception:  # one extension's failure never keeps the others' grants alive
                log.exception("extension failed to release a child environment", extension=ext.name)


def prepare_events_file(it_dir: str, events_file: str, *, uses_files: bool, rerun: bool) -> None:
    """Give the iteration a clean events file; only backends with a child need one made.

    A re-run of an in-flight iteration must not see the lines its killed run wrote, so
    an old file is always removed; the folder and an empty file are created only for
    backends whose child process writes there (``uses_files``, default true).
    """
    if uses_files:
        Path(it_dir).mkdir(parents=True, exist_ok=True)
        Path(events_file).write_bytes(b"")
    elif rerun:  # only a re-run can find old lines
        with contextlib.suppress(FileNotFoundError):
            Path(events_file).unlink()


# How much later than a self-stopping backend's timeout the engine's scope fires: the
# backend's own stop (SIGTERM, grace, SIGKILL, reap) plus a margin.
BACKSTOP_SECONDS = STOP_SECONDS + 3.0


def hat_timeout(hat_limit: float, backend: Backend) -> float:
    """A hat's iteration limit: its own (or the loop's), or its backend's if tighter."""
    return effective_timeout(hat_limit, getattr(backend, "timeout_seconds", None)) or hat_limit


def engine_deadline(backend: Backend, timeout: float) -> float:
    """When the engine's scope cancels the call: at the timeout, or after the backend's
    own stop for a backend that times itself out and returns its partial output."""
    return timeout + BACKSTOP_SECONDS if getattr(backend, "own_timeout", False) else timeout


def hat_limits(
    config: LoadedConfig, backends: Mapping[str, Backend]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per hat: its time limit (:func:`hat_timeout`) and when the engine's scope fires
    (:func:`engine_deadline`)."""
    timeouts = {
        name: hat_timeout(hat.timeout_seconds or config.loop.iteration_timeout_seconds, backend)
        for name, backend in backends.items()
        if (hat := config.hats.get(name)) is not None
    }
    deadlines = {name: engine_deadline(backends[name], t) for name, t in timeouts.items()}
    return timeouts, deadlines


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
