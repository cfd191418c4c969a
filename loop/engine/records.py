"""The records the engine writes (journal) and publishes (lifecycle), built in pure code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from loop import __version__
from loop.backends.base import BackendResult
from loop.config import LoadedConfig
from loop.engine.decide import Outcome
from loop.engine.state import PendingEvent
from loop.events import Event

__all__ = [
    "hats_record",
    "iteration_record",
    "iteration_start_record",
    "loop_header",
    "session_end_record",
    "session_start_record",
]


def hats_record(config: LoadedConfig) -> dict[str, dict[str, Any]]:
    """The hat topology a configuration implies (journal ``session.start``, headers)."""
    return {
        name: {
            "description": hat.description,
            "triggers": list(hat.triggers),
            "publishes": list(hat.publishes),
            "default_publishes": hat.default_publishes,
            "max_activations": hat.max_activations,
            "backend": str(config.hat_backend(name).type),
        }
        for name, hat in config.hats.items()
    }


def session_start_record(config: LoadedConfig, session_id: str) -> dict[str, Any]:
    """The journal's first record: the configuration and the loop's starting event."""
    start = Event(topic=config.loop.starting_event, payload=config.prompt, source="loop")
    return {
        "kind": "session.start",
        "session_id": session_id,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "version": __version__,
        "config_source": config.source,
        "config_digest": config.digest(),
        "completion_event": config.loop.completion_event,
        "fallback_hat": config.loop.fallback_hat,
        "starting_event": config.loop.starting_event,
        "hats": hats_record(config),
        "config": config.snapshot(),
        "start_event": start.to_dict(),
    }


def loop_header(
    config: LoadedConfig, session_id: str, session_dir: Path, resumed_at: int | None
) -> dict[str, Any]:
    """The payload of ``loop.started`` / ``loop.resumed`` (what the recording's header holds)."""
    return {
        "session_id": session_id,
        "session_dir": str(session_dir.resolve()),
        "config_digest": config.digest(),
        "hats": hats_record(config),
        "completion_event": config.loop.completion_event,
        "starting_event": config.loop.starting_event,
        "resumed_at_iteration": resumed_at,
        "config": config.snapshot(),
    }


def iteration_start_record(
    iteration: int, hat: str, triggers: tuple[PendingEvent, ...]
) -> dict[str, Any]:
    """The in-flight marker of ``iteration``: the hat and the pending events it runs on."""
    return {
        "kind": "iteration.start",
        "iteration": iteration,
        "hat": hat,
        "triggers": [p.seq for p in triggers],
    }


def session_end_record(reason: str, iterations: int, elapsed: float) -> dict[str, Any]:
    """The journal's last record: why and when the session ended."""
    return {
        "kind": "session.end",
        "reason": reason,
        "iterations": iterations,
        "elapsed": round(elapsed, 6),
    }


def iteration_record(
    *,
    iteration: int,
    hat: str,
    activation: int,
    backend: str,
    prompt: str,
    result: BackendResult,
    outcome: Outcome,
    triggers: tuple[PendingEvent, ...],
    events: list[Event],
    emitted: list[Event],
    published: list[Event],
    duration: float,
    elapsed: float,
) -> dict[str, Any]:
    """The journal's ``iteration.end`` record (the commit point; the recording's source)."""
    return {
        "kind": "iteration.end",
        "iteration": iteration,
        "hat": hat,
        "activation": activation,
        "backend": backend,
        "backend_ok": result.ok,  # the backend's own verdict: replay serves it again
        "status": outcome.status,
        "reason": outcome.reason,
        "exit_code": result.exit_code,
        "prompt": prompt,
        "output": result.output,
        "triggers": [p.event.to_dict() for p in triggers],
        "events": [e.to_dict() for e in events],
        "emitted": [e.to_dict() for e in emitted] if emitted else [],
        "published": [e.to_dict() for e in published],
        "consumed": [p.seq for p in triggers] if outcome.consume else [],
        "completed": outcome.completed,
        "notes": outcome.notes,
        # to the microsecond: round(x * 1e6) / 1e6 is round(x, 6) without its decimal
        # conversion (a tenth of the cost; the two differ only on exact half-micros)
        "duration": round(duration * 1e6) / 1e6,
        "elapsed": round(elapsed * 1e6) / 1e6,
        "cost_usd": result.cost_usd,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "turns": result.turns,
        "meta": result.meta,
    }
