"""The records the engine writes (journal) and publishes (lifecycle), built in pure code."""

from __future__ import annotations

from typing import Any

from loop.backends.base import BackendResult
from loop.config import LoadedConfig
from loop.engine.decide import Outcome
from loop.engine.state import PendingEvent
from loop.events import Event

__all__ = ["hats_record", "iteration_record"]


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
        "status": outcome.status,
        "reason": outcome.reason,
        "exit_code": result.exit_code,
        "prompt": prompt,
        "output": result.output,
        "triggers": [p.event.to_dict() for p in triggers],
        "events": [e.to_dict() for e in events],
        "emitted": [e.to_dict() for e in emitted],
        "published": [e.to_dict() for e in published],
        "consumed": [p.seq for p in triggers] if outcome.consume else [],
        "completed": outcome.completed,
        "notes": outcome.notes,
        "duration": round(duration, 6),
        "elapsed": round(elapsed, 6),
        "cost_usd": result.cost_usd,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "turns": result.turns,
        "meta": result.meta,
    }
