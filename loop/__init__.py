"""hatloop: an asynchronous, event-driven agent loop runner.

The public Python API is the names below; everything else is reached through the
command line (``python -m loop``) or its own module. Run a loop::

    import anyio
    from pathlib import Path
    from loop import RunOptions, load_config, run_loop

    config = load_config(Path("loop.toml"))
    summary = anyio.run(run_loop, config, RunOptions(workdir=Path.cwd()))
    print(summary.reason, summary.exit_code)

Record a session (pass a :class:`Recorder` among the extensions), replay a recording
(:func:`replay_file`, or :func:`replay_recording` inside an event loop), read one
(:class:`RecordingReader`), write a ``python`` hat (:class:`HatContext`) or an
:class:`Extension` (it subscribes on the :class:`EventBus`; it is told of each
:class:`IterationEnd` and :class:`EventsPublished` record),
catch hatloop's errors (:class:`LoopError`: each has a ``code`` and an ``exit_code``),
send its logs to stderr as the command line does (:func:`configure_logging`; hatloop
leaves structlog's configuration to the program that imports it).
Test helpers (a scripted backend, an event capture, a fake clock) are in
:mod:`loop.testing`.

The import is deliberately light (``python -m loop emit`` starts through here): each
name is imported from its module when first used, so ``import loop`` imports only
:mod:`loop._version`.

>>> import loop
>>> loop.LoopError.__module__, loop.exit_code_for("completed")
('loop.errors', 0)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loop._log import configure_logging
    from loop.backends.base import Backend, BackendRequest, BackendResult
    from loop.backends.python_hat import HatContext
    from loop.bus import EventBus
    from loop.config import LoadedConfig, load_config
    from loop.engine.progress import RunSummary
    from loop.errors import LoopError
    from loop.events import Event
    from loop.exits import exit_code_for
    from loop.extensions import Extension
    from loop.records import EventsPublished, IterationEnd
    from loop.replay import ReplayResult, replay_file, replay_recording
    from loop.runner import RunOptions, run_loop
    from loop.session.reader import RecordingReader
    from loop.session.recorder import Recorder

__all__ = [
    "Backend",
    "BackendRequest",
    "BackendResult",
    "Event",
    "EventBus",
    "EventsPublished",
    "Extension",
    "HatContext",
    "IterationEnd",
    "LoadedConfig",
    "LoopError",
    "Recorder",
    "RecordingReader",
    "ReplayResult",
    "RunOptions",
    "RunSummary",
    "__version__",
    "configure_logging",
    "exit_code_for",
    "load_config",
    "replay_file",
    "replay_recording",
    "run_loop",
]

from loop._version import __version__  # a leaf: importing it costs nothing

# Where each public name lives (its one home; the facade only points at it).
_HOMES = {
    "Backend": "loop.backends.base",
    "BackendRequest": "loop.backends.base",
    "BackendResult": "loop.backends.base",
    "Event": "loop.events",
    "EventBus": "loop.bus",
    "EventsPublished": "loop.records",
    "Extension": "loop.extensions",
    "HatContext": "loop.backends.python_hat",
    "IterationEnd": "loop.records",
    "LoadedConfig": "loop.config",
    "LoopError": "loop.errors",
    "Recorder": "loop.session.recorder",
    "RecordingReader": "loop.session.reader",
    "ReplayResult": "loop.replay",
    "RunOptions": "loop.runner",
    "RunSummary": "loop.engine.progress",
    "configure_logging": "loop._log",
    "exit_code_for": "loop.exits",
    "load_config": "loop.config",
    "replay_file": "loop.replay",
    "replay_recording": "loop.replay",
    "run_loop": "loop.runner",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'loop' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
