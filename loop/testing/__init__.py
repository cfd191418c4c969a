"""Test helpers users can import in their own tests (product code, like structlog.testing).

* :func:`tag` writes an ``<event>`` tag; :func:`scripted` builds a scripted backend;
* :class:`EventCapture` is a bus subscriber that keeps every event it sees;
* :class:`FakeClock` is a monotonic clock that moves only when told to;
* :func:`make_config` builds a validated configuration from plain dicts, no files;
* :func:`run_hats` runs a whole loop in-process on a scratch folder.

Local mocks of the model APIs, for driving the real agent CLIs offline, live beside it:
:mod:`~loop.testing.anthropic_mock` (Claude Code), :mod:`~loop.testing.gemini_mock`
(Gemini CLI) and :mod:`~loop.testing.openai_mock` (Codex), sharing
:mod:`~loop.testing.mock_api`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.lowlevel

from loop.backends.base import Backend
from loop.backends.scripted import ScriptedBackend
from loop.bus import EventBus
from loop.config import LoadedConfig, load_config
from loop.engine.progress import RunSummary
from loop.engine.resume import LimitOverrides
from loop.events import Event
from loop.extensions import Extension
from loop.runner import RunOptions, run_loop

__all__ = ["EventCapture", "FakeClock", "make_config", "run_hats", "scripted", "tag"]


def tag(topic: str, payload: Any = "", *, target: str | None = None) -> str:
    """An ``<event>`` tag as an agent would write it (JSON payloads are serialised)."""
    body = payload if isinstance(payload, str) else json.dumps(payload)
    attrs = f' topic="{topic}"' + (f' target="{target}"' if target else "")
    return f"<event{attrs}>{body}</event>"


def scripted(*outputs: str) -> ScriptedBackend:
    """A scripted backend serving ``outputs`` in order, one per activation."""
    return ScriptedBackend(list(outputs))


@dataclass
class EventCapture(Extension):
    """Keeps every event matching ``pattern`` that crosses the bus."""

    pattern: str = "*"
    events: list[Event] = field(default_factory=list)
    name: str = "capture"

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``pattern``."""
        bus.subscribe(self.pattern, self.events.append, name=self.name)

    def topics(self, *, include_loop: bool = False) -> list[str]:
        """The topics seen, in order (``loop.*`` lifecycle events left out by default)."""
        return [e.topic for e in self.events if include_loop or not e.topic.startswith("loop.")]


@dataclass
class FakeClock:
    """A monotonic clock for tests: ``clock()`` reads it, ``advance(s)`` moves it."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        """A sleep that only moves the clock (the engine's ``sleep``): waits take no time."""
        await anyio.lowlevel.checkpoint()
        self.now += max(seconds, 0.0)


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def make_config(
    hats: Mapping[str, Mapping[str, Any]],
    *,
    folder: Path,
    prompt: str = "test objective",
    extensions: bool = False,
    **loop: Any,
) -> LoadedConfig:
    """Write a ``loop.toml`` into ``folder`` from plain dicts and load it (validated).

    Args:
        hats: hat name → hat keys (``triggers``, ``publishes``, ``backend``...).
        folder: where the config and the session files go.
        prompt: the objective.
        extensions: keep the task/theme/experience extensions on (off by default).
        **loop: more ``[loop]`` keys (``max_iterations=5``...).
    """
    lines = ["[loop]", f"prompt = {_toml_value(prompt)}"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in loop.items()]
    if not extensions:
        lines += [
            "[tasks]",
            "enabled = false",
            "[themes]",
            "enabled = false",
            "[experience]",
            "enabled = false",
        ]
    for name, keys in hats.items():
        lines.append(f"[hats.{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in keys.items()]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # fail here, with the TOML error, rather than deep in load_config
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "loop.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, root=folder)


async def run_hats(
    config: LoadedConfig,
    backends: Mapping[str, Backend],
    *,
    workdir: Path,
    session_id: str | None = None,
    extra: list[Extension] | None = None,
    resume: bool = False,
    clock: Callable[[], float] | None = None,
    wall_clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    limit_overrides: LimitOverrides | None = None,
) -> tuple[RunSummary, EventCapture]:
    """Run a loop in-process with the given backends; return its summary and a capture.

    ``clock`` and ``wall_clock`` (a :class:`FakeClock`, say) replace the engine's
    monotonic clock (runtime limit, durations) and its time of day (record timestamps,
    the deadlines of rate-limit waits); ``sleep`` (:meth:`FakeClock.sleep`) its waits.
    ``limit_overrides`` are a resume's command-line limits (``--max-iterations`` ...).
    """
    capture = EventCapture()
    options = RunOptions(
        workdir=workdir,
        session_id=session_id,
        resume=resume,
        progress=False,
        backends=dict(backends),
        handle_signals=False,
    )
    if clock is not None:
        options.clock = clock
    if wall_clock is not None:
        options.wall_clock = wall_clock
    if sleep is not None:
        options.sleep = sleep
    if limit_overrides is not None:
        options.limit_overrides = limit_overrides
    summary = await run_loop(config, options, [capture, *(extra or [])])
    return summary, capture
