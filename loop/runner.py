"""Assemble a run: config → backends, bus, extensions, engine; signals; the summary."""

from __future__ import annotations

import contextlib
import importlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import structlog

from loop._signals import hung_up, stop_signals
from loop.backends import Backend, build_backend
from loop.backends.base import OutputObserver
from loop.bus import EventBus
from loop.config import LoadedConfig
from loop.engine.decide import unheld_by_budgets
from loop.engine.driver import Engine
from loop.engine.lanes import RecordedOrder
from loop.engine.progress import ProgressReporter, RunSummary
from loop.engine.resume import LimitOverrides
from loop.engine.session_dir import LATEST, SessionPaths
from loop.errors import SessionError
from loop.extensions import Extension
from loop.records import Override
from loop.session.store import (
    latest_session,
    new_session_id,
    require_session,
    validate_session_id,
)
from loop.tools.base import BusService, ToolContext
from loop.tools.bus import ToolsOnBus, TurnedOff
from loop.tools.registry import domain_module

__all__ = [
    "RunOptions",
    "build_backends",
    "domain_extensions",
    "resolve_session",
    "run_loop",
    "serves_tools",
]

log = structlog.get_logger("loop.runner")


@dataclass
class RunOptions:
    """How to run: which session, where, and what else listens on the bus.

    ``clock``, ``wall_clock``, ``sleep`` and ``call_clock`` are the engine's (see
    :class:`~loop.engine.driver.Engine`): a test passes a :class:`~loop.testing.FakeClock`
    (and its :meth:`~loop.testing.FakeClock.sleep`) to control runtime, timings and waits,
    a replay the recorded times of tool calls.
    ``observer`` sees the hats' output as it arrives (``-v``).
    ``limit_overrides`` are a resume's command-line limits; ``scheduled_overrides`` the
    recorded changes of limits a replay applies at their point; ``streak_restarts`` the
    iterations after which a replay starts the stale streak afresh (where the recorded
    session went on from a stale_loop stop); ``commit_order`` the order a replay of
    parallel hats commits their activations in (the recording's).
    """

    workdir: Path
    session_id: str | None = None
    resume: bool = False
    progress: bool = True
    extensions: list[Extension] = field(default_factory=list)
    backends: dict[str, Backend] | None = None
    handle_signals: bool = True
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    observer: OutputObserver | None = None
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    limit_overrides: LimitOverrides = field(default_factory=LimitOverrides)
    scheduled_overrides: Sequence[Override] = ()
    streak_restarts: Sequence[int] = ()
    call_clock: Callable[[int, int], tuple[float, int]] | None = None
    commit_order: RecordedOrder | None = None


def build_backends(config: LoadedConfig) -> dict[str, Backend]:
    """One backend per hat, from the hat's own config or the default ``[backend]``."""
    return {name: build_backend(config.hat_backend(name)) for name in config.hats}


def tool_context(config: LoadedConfig, workdir: Path) -> ToolContext:
    """The tool context the loop's extensions and child processes share."""
    return ToolContext(
        root=workdir,
        tasks_file=config.resolve(config.tasks.file),
        workspace=config.resolve(config.themes.workspace),
        experiences_base=config.resolve(config.experience.base_directory),
        sessions_dir=config.resolve(config.loop.sessions_dir),
    )


def domain_extensions(config: LoadedConfig, ctx: ToolContext) -> list[Extension]:
    """The task, theme and experience extensions of every domain not turned off, and for
    one turned off, what answers its requests with an error (:class:`TurnedOff`).

    A domain's modules are imported only when the configuration does not turn it off:
    a loop without tasks starts without the task store. A domain that is neither
    configured nor used adds nothing to a prompt and writes nothing: the task and
    experience extensions never do before their tools are called, and the theme
    extension's heartbeat waits for its workspace to exist (``until_used``).
    """
    exts: list[Extension] = []
    if config.tasks.enabled is not False:
        from loop.tasks.extension import TasksExtension  # noqa: PLC0415 - start-up, see above
        from loop.tasks.tools import BUS as TASKS  # noqa: PLC0415 - start-up, see above

        exts.append(ToolsOnBus(ctx, TASKS))
        exts.append(TasksExtension(ctx, block_completion=config.tasks.block_completion))
    if config.themes.enabled is not False:
        from loop.themes.extension import ThemesExtension  # noqa: PLC0415 - start-up, see above
        from loop.themes.tools import BUS as THEMES  # noqa: PLC0415 - start-up, see above

        exts.append(ToolsOnBus(ctx, THEMES))
        exts.append(ThemesExtension(ctx, until_used=config.themes.enabled is None))
    if config.experience.enabled is not False:
        from loop.experience.tools import BUS as EXPERIENCE  # noqa: PLC0415 - start-up

        exts.append(ToolsOnBus(ctx, EXPERIENCE))
    prefixes = {"tasks": "task", "themes": "theme", "experience": "experience"}
    exts += [  # a domain turned off: its requests are answered all the same, with an error
        TurnedOff(prefixes[section], section, partial(_bus_service, section))
        for section in domains_off(config)
    ]
    return exts


def _bus_service(section: str) -> BusService:
    """The bus service of the domain of ``loop.toml``'s ``section``, imported when a hat
    asks a domain turned off for something."""
    service: BusService = importlib.import_module(domain_module(section)).BUS
    return service


def domains_off(config: LoadedConfig) -> list[str]:
    """The domains ``loop.toml`` turns off (``enabled = false``), by their section."""
    enabled = {
        "tasks": config.tasks.enabled,
        "themes": config.themes.enabled,
        "experience": config.experience.enabled,
    }
    return [name for name, on in enabled.items() if on is False]


def serves_tools(config: LoadedConfig, backends: Mapping[str, Backend]) -> bool:
    """Whether the run serves hatloop's tools on its MCP endpoint (``[mcp] serve``)."""
    if config.mcp.serve != "auto":
        return config.mcp.serve
    return any(b.uses_loop_tools for b in backends.values())


def resolve_session(config: LoadedConfig, options: RunOptions) -> SessionPaths:
    """The session to run: a new id, the given one, or (resume) the most recent one.

    Its files are reached without following links from the project folder when the
    sessions folder is inside it (as every tool's files are), else from the sessions
    folder as configured.
    """
    sessions_dir = config.resolve(config.loop.sessions_dir)
    root = tool_context(config, options.workdir).trusted_root(sessions_dir)
    if options.resume and options.session_id in (None, LATEST):
        latest = latest_session(sessions_dir, root=root)
        if latest is None:
            raise SessionError(f"no session to resume in {sessions_dir}")
        return SessionPaths(sessions_dir, latest, root=root)
    if options.resume and options.session_id is not None:  # an id or a unique prefix
        found = require_session(sessions_dir, options.session_id, root=root)
        return SessionPaths(sessions_dir, found, root=root)
    sid = validate_session_id(options.session_id) if options.session_id else new_session_id()
    return SessionPaths(sessions_dir, sid, root=root)


async def _watch_signals(
    signals: AsyncIterator[int], scope: anyio.CancelScope, received: list[int]
) -> None:
    async for signum in signals:
        hung_up(signum)
        received.append(signum)
        name = signal.Signals(signum).name
        log.warning("signal received: stopping after cleanup", signal=name)
        scope.cancel()
        return


async def run_loop(
    config: LoadedConfig, options: RunOptions, extra: Sequence[Extension] = ()
) -> RunSummary:
    """Run (or resume) a session to its end; SIGINT, SIGTERM and SIGHUP stop it
    gracefully (see :mod:`loop._signals`)."""
    # The signals are this function's from its first line: a Ctrl-C (or SIGTERM) while
    # the backends and the endpoint are set up stops the run as one during an iteration
    # does once the session exists (its summary names it), else before any of it runs
    # (KeyboardInterrupt: ``error: interrupted``, and no session made).
    # They stay received until the session's cleanup is over: a second Ctrl-C while the
    # first one's cleanup runs (children stopped, journal and recording flushed) is taken
    # and dropped, never a KeyboardInterrupt in the middle of a write.
    with (
        anyio.open_signal_receiver(*stop_signals())
        if options.handle_signals
        else contextlib.nullcontext()
    ) as signals:
        return await _run_session(config, options, extra, signals)


async def _run_session(
    config: LoadedConfig,
    options: RunOptions,
    extra: Sequence[Extension],
    signals: AsyncIterator[int] | None,
) -> RunSummary:
    ctx = tool_context(config, options.workdir)
    paths = resolve_session(config, options)
    exts: list[Extension] = []
    if options.progress:
        exts.append(ProgressReporter())
    exts += domain_extensions(config, ctx)
    exts += list(extra) + options.extensions
    backends = options.backends or build_backends(config)
    for line in unheld_by_budgets(config, backends):
        log.warning("a budget cannot hold this hat", note=line)
    endpoint = None
    if serves_tools(config, backends):
        from loop.tools.endpoint import SessionEndpoint  # noqa: PLC0415 - the MCP SDK: ~1 s

        endpoint = SessionEndpoint(ctx, off=domains_off(config))
        exts.append(endpoint)
    engine = Engine(
        config,
        paths=paths,
        backends=backends,
        bus=EventBus(),
        extensions=exts,
        workdir=options.workdir,
        resume=options.resume,
        env=ctx.variables(),
        clock=options.clock,
        wall_clock=options.wall_clock,
        observer=options.observer,
        sleep=options.sleep,
        limit_overrides=options.limit_overrides,
        scheduled_overrides=options.scheduled_overrides,
        streak_restarts=options.streak_restarts,
        call_clock=options.call_clock,
        commit_order=options.commit_order,
    )
    received: list[int] = []
    summary: RunSummary | None = None
    try:
        async with anyio.create_task_group() as tg:
            if signals is not None:
                tg.start_soon(_watch_signals, signals, tg.cancel_scope, received)
            if endpoint is not None:  # the tools are served before any agent starts
                await tg.start(endpoint.serve)
            summary = await engine.run()
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the engine's own error, not a group
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    if summary is None:
        if not engine.session_started:  # stopped while it was set up: nothing ran
            raise KeyboardInterrupt
        summary = engine.summary(
            "interrupted", [f"stopped by {signal.Signals(received[0]).name}"] if received else []
        )
    return summary


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as JSON-ready data."""
    return asdict(summary)
