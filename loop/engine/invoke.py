"""How the engine calls a backend: the request, the child's environment, the emit file,
the timeout (:class:`HatCaller`).

Everything here is about one iteration's call; the driver decides when to call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import anyio
import structlog

from loop import locations
from loop._fs import remove_file
from loop.backends._process import STOP_SECONDS
from loop.backends._procs import SpawnedProcess
from loop.backends.base import (
    Backend,
    BackendRequest,
    BackendResult,
    OutputObserver,
    effective_timeout,
)
from loop.config import LoadedConfig
from loop.engine.collect import malformed_notice
from loop.engine.hooks import Hooks
from loop.engine.prompt import templates_for
from loop.engine.session_dir import SessionPaths
from loop.engine.state import PendingEvent
from loop.errors import BackendUnavailable, InputError
from loop.extensions import Extension, RunningIteration

__all__ = [
    "BACKSTOP_SECONDS",
    "ChildVariables",
    "HatCaller",
    "call_with_timeout",
    "clean_events_file",
    "engine_deadline",
    "hat_limits",
    "hat_timeout",
    "idle_limits",
    "session_env",
]

log = structlog.get_logger("loop.engine")


def session_env(
    extra: Mapping[str, str], *, session_dir: Path, run_id: str | None = None
) -> dict[str, str]:
    """The variables every child process of a session gets (:attr:`BackendRequest.env`):
    ``extra`` (the tools' settings), the session's folder, the run's id (its tool calls
    are made only while this run holds the session), this Python, first on PATH."""
    path = os.environ.get("PATH", "")
    return {
        **extra,
        locations.ENV_SESSION_DIR: str(session_dir.resolve()),
        **({locations.ENV_RUN_ID: run_id} if run_id else {}),
        locations.ENV_PYTHON: sys.executable,
        "PATH": str(Path(sys.executable).parent) + (os.pathsep + path if path else ""),
    }


class ChildVariables:
    """What the extensions add to an iteration's child processes, and its release.

    :meth:`give` asks every extension that overrides
    :meth:`~loop.extensions.Extension.child_env` (a per-iteration secret...);
    :meth:`release` tells them the iteration's call is over. Only iterations of a backend
    with a child process (``uses_files``) are given anything.
    """

    def __init__(
        self, extensions: Sequence[Extension], *, session_id: str, session_dir: Path
    ) -> None:
        self.contributors = [e for e in extensions if type(e).child_env is not Extension.child_env]
        self._session_id = session_id
        self._session_dir = session_dir.resolve()
        self._given: dict[int, RunningIteration] = {}

    def give(
        self, hat: str, iteration: int, activation: int, events_file: Path, attempt: int = 1
    ) -> dict[str, str]:
        """The variables the extensions add for ``iteration`` (none without contributors)."""
        if not self.contributors:
            return {}
        running = RunningIteration(
            session_id=self._session_id,
            session_dir=self._session_dir,
            hat=hat,
            iteration=iteration,
            activation=activation,
            events_file=events_file,
            attempt=attempt,
        )
        self._given[iteration] = running
        added: dict[str, str] = {}
        for ext in self.contributors:
            added.update(ext.child_env(running))
        return added

    def release(self, iteration: int) -> None:
        """``iteration``'s call returned or was cancelled: what it was given is void."""
        running = self._given.pop(iteration, None)
        if running is None:
            return
        for ext in self.contributors:
            try:
                ext.release_child_env(running)
            except Exception:  # one extension's failure never keeps the others' grants alive
                log.exception("extension failed to release a child environment", extension=ext.name)


def clean_events_file(events_file: Path, *, root: Path) -> None:
    """Remove an in-process hat's events file for another call of the same attempt
    (after a rate-limit wait): the earlier call's lines are void (it makes a new one).
    A hat with a child process gets a new file instead, the earlier one set aside
    (:meth:`~loop.engine.session_dir.SessionPaths.set_aside_events`). Reached without
    following links."""
    with contextlib.suppress(FileNotFoundError):
        remove_file(events_file, root=root, missing_ok=True, durable=False)


# How much later than a self-stopping backend's timeout the engine's scope fires: the
# backend's own stop (SIGTERM, grace, SIGKILL, reap) plus a margin.
BACKSTOP_SECONDS = STOP_SECONDS + 3.0


def hat_timeout(hat_limit: float, backend: Backend) -> float:
    """A hat's iteration limit: its own (or the loop's), or its backend's if tighter."""
    return effective_timeout(hat_limit, backend.timeout_seconds) or hat_limit


def engine_deadline(backend: Backend, timeout: float) -> float:
    """When the engine's scope cancels the call: at the timeout, or after the backend's
    own stop for a backend that times itself out and returns its partial output."""
    return timeout + BACKSTOP_SECONDS if backend.own_timeout else timeout


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


def idle_limits(config: LoadedConfig, backends: Mapping[str, Backend]) -> dict[str, float | None]:
    """Per hat: how long its agent may stay silent (``idle_timeout_seconds`` on the hat,
    else on ``[loop]``; None: no limit). A hat whose backend does not watch its output
    (``python``, ``scripted``) has none; one that sets it itself is warned about."""
    limits: dict[str, float | None] = {}
    for name, backend in backends.items():
        hat = config.hats.get(name)
        if hat is None:
            continue
        if not backend.watches_output:
            if hat.idle_timeout_seconds is not None:
                log.warning(
                    "idle_timeout_seconds does not apply to this hat: its backend does not "
                    "watch an agent's output",
                    hat=name,
                    backend=backend.kind,
                )
            limits[name] = None
            continue
        limits[name] = hat.idle_timeout_seconds or config.loop.idle_timeout_seconds
    return limits


async def call_with_timeout(
    backend: Backend, request: BackendRequest, timeout: float
) -> BackendResult:
    """Run the backend under the iteration's timeout. An exception is a failed iteration,
    except "cannot run at all" and bad input, which stop the loop; so is the timeout.

    One coroutine for the call, the timeout and the failure: every backend takes it. A
    result that comes back past the timeout (the call blocked the event loop, so the
    timeout could not cut it) is a timeout too.
    """
    with anyio.move_on_after(timeout) as scope:
        try:
            result = await backend.run(request)
        except (BackendUnavailable, InputError):  # cannot run at all / bad input: stop
            raise
        except Exception as exc:
            log.exception("backend raised", hat=request.hat)
            return BackendResult.failed(f"backend error: {type(exc).__name__}: {exc}")
        if anyio.current_time() < scope.deadline:
            return result
    return BackendResult.failed(f"timeout after {timeout:g}s", exit_code=None)


class HatCaller:
    """How the engine calls a hat's backend: the request (prompt, events file, the
    child's variables, the timeout), the call under the timeout, and the release.

    Args:
        config: the loaded configuration (the hats' templates and limits).
        backends: the backend of each hat.
        hooks: the extensions' hooks (prompt sections, flush).
        children: what the extensions add to a child's environment.
        paths: the session's files (each attempt's folder, reached without links).
        workdir: where the hats run.
        clock: the engine's monotonic clock.
        observer: sees the hats' output as it arrives (``-v``), where backends report it.
        on_start: called with each request just before its backend runs (the engine
            publishes ``loop.iteration.started``: after a wait, each call starts anew).
        on_child: told ``(iteration, attempt, child)`` for each child process a backend
            starts (the engine journals it: a resume stops it if it outlives the run).
    """

    def __init__(
        self,
        config: LoadedConfig,
        backends: Mapping[str, Backend],
        *,
        hooks: Hooks,
        children: ChildVariables,
        paths: SessionPaths,
        workdir: Path,
        clock: Callable[[], float],
        observer: OutputObserver | None = None,
        on_start: Callable[[BackendRequest, Backend], Awaitable[None]] | None = None,
        on_child: Callable[[int, int, SpawnedProcess], None] | None = None,
    ) -> None:
        self.backends = backends
        self.observer = observer
        self.on_start = on_start
        self.hooks = hooks
        self.children = children
        self.paths = paths
        self.on_child = on_child
        self.workdir = workdir
        self.clock = clock
        self.templates = templates_for(config)
        self.timeouts, self.deadlines = hat_limits(config, backends)
        self.idle = idle_limits(config, backends)
        self.env: dict[str, str] = {}  # the session's variables, set once it is open

    def request(
        self,
        hat: str,
        iteration: int,
        activation: int,
        triggers: tuple[PendingEvent, ...],
        *,
        attempt: int = 1,
        notices: tuple[str, ...] = (),
        rerun: bool = False,
    ) -> BackendRequest:
        """The backend call of an attempt: its prompt, events file, environment, timeout.

        The events file is the attempt's own (its folder was made with the attempt, see
        :meth:`~loop.engine.session_dir.SessionPaths.make_attempt`), named for a backend
        that has files or writes events (none for the others); ``rerun``: another
        call of the same attempt, whose file is emptied first. ``notices``: the hat's
        emitted lines that its last iteration dropped, told in the prompt.
        """
        context = self.hooks.sections(hat)
        if notices:
            context.append(malformed_notice(notices))
        trigger_events = tuple([p.event for p in triggers])
        prompt = self.templates[hat].render(iteration, trigger_events, context)
        backend = self.backends[hat]
        uses_files = backend.uses_files
        env = self.env
        events_file: Path | None = None  # a backend with no files and no events: none
        if uses_files or backend.writes_events:
            events_file = self.paths.events_file(iteration, attempt)
            if rerun and uses_files:  # the earlier call's tool calls stay (lost_calls)
                self.paths.set_aside_events(iteration, attempt)
            elif rerun:
                clean_events_file(events_file, root=self.paths.trusted)
            if uses_files and self.children.contributors:  # the child's variables, for it
                given = self.children.give(hat, iteration, activation, events_file, attempt)
                env = {**given, **env}
        on_child = self.on_child
        return BackendRequest(
            hat=hat,
            prompt=prompt,
            iteration=iteration,
            session_id=self.paths.session_id,
            activation=activation,
            events_file=events_file,
            workdir=self.workdir,
            env=env,
            timeout_seconds=self.timeouts[hat],
            triggers=trigger_events,
            observer=self.observer,
            idle_timeout_seconds=self.idle[hat],
            attempt=attempt,
            root=self.paths.trusted,
            on_child=partial(on_child, iteration, attempt) if on_child and uses_files else None,
        )

    async def call(
        self,
        hat: str,
        iteration: int,
        activation: int,
        triggers: tuple[PendingEvent, ...],
        rerun: bool,
        *,
        attempt: int = 1,
        notices: tuple[str, ...] = (),
    ) -> tuple[BackendRequest, BackendResult, float]:
        """One call of the hat's backend: the request, the result, when it started."""
        backend = self.backends[hat]
        started = self.clock()
        request = self.request(
            hat, iteration, activation, triggers, attempt=attempt, notices=notices, rerun=rerun
        )
        if self.on_start is not None:
            await self.on_start(request, backend)
        if not backend.instant:
            self.hooks.flush()  # the hat may take a while: nothing waits in a buffer meanwhile
        try:
            result = await call_with_timeout(backend, request, self.deadlines[hat])
        finally:  # a late tool call of its agent is refused from here on
            self.children.release(iteration)
        return request, result, started
