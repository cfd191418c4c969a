"""The python backend: a hat written in Python (``target = "module:function"``).

For deterministic work such as running the project's tests and publishing
``tests.passed`` or ``tests.failed``: real backpressure instead of trusting what an
agent claims. The function takes a :class:`HatContext` and returns the output text
(which may carry ``<event>`` tags) or ``None`` (anything else fails the iteration); it
may be sync or async, and it publishes with ``ctx.emit(topic, payload)``. A raised
exception (``sys.exit()`` included) is a failed iteration with the exception as the
reason; one raised as the module is imported stops the run (it cannot run at all).

A sync function runs in a daemon thread of its own. Python cannot stop a thread: one
still running when its iteration ends (its ``timeout_seconds`` passed, the loop stopped)
is left to finish on its own, and never keeps the process from exiting; its context is
closed, so a late ``ctx.emit`` raises instead of adding events to an iteration that is
over. An async function is cancelled at its next ``await``: one that blocks without
awaiting holds the whole loop until it returns (its late result is then a timeout: see
:func:`loop.engine.invoke.call_with_timeout`).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from loop._user_code import load_named
from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config.backends import PythonConfig
from loop.emit import append_event
from loop.errors import BackendUnavailable, SessionError
from loop.events import Event

__all__ = ["HatContext", "PythonBackend", "resolve_target"]


@dataclass(frozen=True)
class HatContext:
    """What a Python hat sees: the request, and a way to publish events."""

    hat: str
    prompt: str
    iteration: int
    activation: int
    triggers: tuple[Event, ...]
    workdir: Path
    events_file: Path
    root: Path | None = None  # the attempt's files are reached from here without links
    _ended: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def emit(self, topic: str, payload: Any = "", *, target: str | None = None) -> None:
        """Publish an event, exactly as ``python -m loop emit`` would.

        Raises:
            InputError: ``topic`` is not a valid topic, or ``payload`` is not JSON (NaN
                included) or makes too long a line.
            SessionError: the iteration has ended (the function outlived its timeout).
        """
        if self._ended.is_set():
            raise SessionError(
                f"iteration {self.iteration} of hat {self.hat} has ended (timed out or "
                f"stopped): its events are no longer taken ({topic!r} not published)"
            )
        append_event(self.events_file, topic, payload, target, root=self.root, create_folders=True)


def resolve_target(target: str, workdir: Path) -> Callable[[HatContext], Any]:
    """The function ``target`` (``module:function``) names, imported from ``workdir``.

    Raises:
        BackendUnavailable: it cannot be had (see :func:`loop._user_code.load_named`), or
            is not a function: the hat cannot run at all.
    """
    try:
        func = load_named(target, workdir)
    except ValueError as exc:
        raise BackendUnavailable(f"{target}: {exc}") from exc
    if not callable(func):
        raise BackendUnavailable(f"{target}: not a function")
    return func


class PythonBackend(Backend):
    """Calls a Python function once per iteration."""

    kind = "python"
    uses_files = False  # in-process: ctx.emit makes the events folder when first used

    def __init__(self, target: str, *, timeout_seconds: float | None = None) -> None:
        self.target = target
        self.timeout_seconds = timeout_seconds

    @classmethod
    def from_config(cls, config: PythonConfig) -> PythonBackend:
        """Build from TOML settings."""
        return cls(config.target, timeout_seconds=config.timeout_seconds)

    async def run(self, request: BackendRequest) -> BackendResult:
        """Call the function; a sync one runs in a daemon thread of its own."""
        func = resolve_target(self.target, request.workdir)
        assert request.events_file is not None  # it writes events: the engine names the file
        ctx = HatContext(
            hat=request.hat,
            prompt=request.prompt,
            iteration=request.iteration,
            activation=request.activation,
            triggers=request.triggers,
            workdir=request.workdir,
            events_file=request.events_file,
            root=request.root,
        )
        try:
            if inspect.iscoroutinefunction(func):
                try:
                    result = await func(ctx)
                except (Exception, SystemExit) as exc:
                    return _failed(exc)
            else:
                result, error = await _in_daemon_thread(func, ctx)
                if error is not None:  # a KeyboardInterrupt there is the function's own
                    return _failed(error)
        finally:
            ctx._ended.set()  # the context's owner closes it
        if result is not None and not isinstance(result, str):
            return BackendResult.failed(
                f"the function returned {type(result).__name__}: a python hat returns its "
                "output text (str) or None"
            )
        return BackendResult(output=result or "")


def _failed(exc: BaseException) -> BackendResult:
    return BackendResult.failed(f"{type(exc).__name__}: {exc}")


async def _in_daemon_thread(
    func: Callable[[HatContext], Any], ctx: HatContext
) -> tuple[Any, BaseException | None]:
    """``func(ctx)`` in a daemon thread (with this task's context variables), awaited:
    what it returned, or what it raised. A cancellation leaves the thread to finish on
    its own (see the module's notes)."""
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    outcome: list[tuple[Any, BaseException | None]] = []
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome.append((context.run(func, ctx), None))
        except BaseException as exc:  # handed over to the awaiting task
            outcome.append((None, exc))
        with contextlib.suppress(Exception):  # the loop has ended: nobody waits any more
            anyio.from_thread.run_sync(done.set, token=token)

    name = f"hatloop python hat {ctx.hat} #{ctx.iteration}"
    threading.Thread(target=work, name=name, daemon=True).start()
    await done.wait()
    return outcome[0]
