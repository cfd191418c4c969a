"""The python backend: a hat written in Python (``target = "module:function"``).

For deterministic work such as running the project's tests and publishing
``tests.passed`` or ``tests.failed``: real backpressure instead of trusting what an
agent claims. The function takes a :class:`HatContext` and returns the output text
(which may carry ``<event>`` tags) or ``None``; it may be sync or async, and it
publishes with ``ctx.emit(topic, payload)``. A raised exception is a failed
iteration with the exception as the reason.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config.backends import PythonConfig
from loop.emit import append_event
from loop.errors import BackendUnavailable
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

    def emit(self, topic: str, payload: Any = "", *, target: str | None = None) -> None:
        """Publish an event, exactly as ``python -m loop emit`` would."""
        append_event(self.events_file, topic, payload, target, root=self.root, create_folders=True)


def resolve_target(target: str, workdir: Path) -> Callable[[HatContext], Any]:
    module_name, _, func_name = target.partition(":")
    if str(workdir) not in sys.path:
        sys.path.insert(0, str(workdir))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"cannot import {module_name!r} for python hat: {exc}") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise BackendUnavailable(f"{target!r}: {func_name!r} is not a function of {module_name}")
    return func  # type: ignore[no-any-return]


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
        """Call the function; sync functions run in a worker thread."""
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
                result = await func(ctx)
            else:
                result = await anyio.to_thread.run_sync(func, ctx, abandon_on_cancel=True)
        except Exception as exc:
            return BackendResult.failed(f"{type(exc).__name__}: {exc}")
        return BackendResult(output="" if result is None else str(result))
