"""Routing, in pure code: which hat an event goes to.

A targeted event goes to its target. Otherwise the hat with the most specific
matching trigger wins (literal segments beat ``*`` segments; ties go to the hat
defined first), and the bare ``*`` is the fallback. Reserved topics (``task.*``,
``theme.*``, ``experience.*``, ``loop.*`` and the completion event) are for the
loop and its subscribers: they reach a hat only when a hat subscribes to them by a
pattern other than the bare ``*``. The starting event belongs to the loop: a hat that
publishes the same topic (``task.start`` is also the task domain's start request)
never re-triggers the starting hat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loop.events import Event, is_reserved, pattern_specificity, topic_matches
from loop.records import HatTopology

__all__ = ["HatSpec", "hat_specs", "route"]


@dataclass(frozen=True, slots=True)
class HatSpec:
    """What routing and limits need to know about a hat."""

    name: str
    triggers: tuple[str, ...]
    publishes: tuple[str, ...] = ()
    default_publishes: str | None = None
    max_activations: int | None = None


def route(
    event: Event,
    hats: Sequence[HatSpec],
    *,
    completion_event: str,
    fallback: str | None = None,
    starting_event: str | None = None,
) -> str | None:
    """The hat ``event`` goes to, or ``None`` when no hat takes it."""
    if event.target is not None:
        return event.target if any(h.name == event.target for h in hats) else None
    if event.topic == completion_event:
        return None
    if event.topic == starting_event and event.source != "loop":
        return None
    best: tuple[tuple[int, int], int, str] | None = None
    for index, hat in enumerate(hats):
        for pattern in hat.triggers:
            if pattern == "*" or not topic_matches(pattern, event.topic):
                continue
            key = (pattern_specificity(pattern), -index, hat.name)
            if best is None or key[:2] > best[:2]:
                best = key
    if best is not None:
        return best[2]
    if is_reserved(event.topic, completion_event):
        return None
    for hat in hats:
        if "*" in hat.triggers:
            return hat.name
    if fallback is not None and any(h.name == fallback for h in hats):
        return fallback
    return None


def hat_specs(hats: Mapping[str, HatTopology]) -> tuple[HatSpec, ...]:
    """The routing view of a hat topology, in the hats' order (ties go to the first)."""
    return tuple(
        HatSpec(
            name=name,
            triggers=hat.triggers,
            publishes=hat.publishes,
            default_publishes=hat.default_publishes,
            max_activations=hat.max_activations,
        )
        for name, hat in hats.items()
    )
