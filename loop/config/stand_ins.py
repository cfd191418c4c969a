"""Scripted stand-ins, in pure code: canned outputs that carry a topology from its starting
event to its completion with no agent (``init --backend scripted``, ``run --backend
scripted``).

The stand-ins follow one *walk*: the shortest chain of activations from the starting event
to the completion event in which each activation publishes one event that a hat takes
(routed as the engine routes, by :func:`loop.routing.route`), with every required event
published on the way. The activation that completes publishes first the required events
still missing that its hat may publish and no hat takes (published before, an event no hat
takes would end the run as ``unrouted_event``). Among walks as short, a hat's
``publishes`` are tried in the order they are listed, so the walk is the same on every
run. The walk goes through a catch-all hat (the loop's ``fallback_hat``, such as the
coordinator a Ralph conversion adds, or a hat triggered by the bare ``*``) only when no
walk avoids them: such a hat takes what the others leave, and a walk through it would skip
the hats' own flow.

A hat's outputs are its activations on the walk, in order; a hat the walk never reaches
answers with the first step of a walk from itself (as if no required event had been
published), else with the first of its ``publishes`` that a hat takes. Every stand-in has
``repeat_last``: past its outputs it answers with its last one again, so it answers every
activation (a resumed session's too, whose activations were counted before).

A topic that a hat of ``concurrency`` N takes is published N times (a wave, its payloads
numbered), and a hat of ``concurrency`` N gets one output per activation of its wave, each
with its own payload (the same payloads would be a stale loop).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from loop.config.backends import ScriptedConfig
from loop.config.models import HatConfig
from loop.config.sections import LoopSection
from loop.events import Event, topic_matches
from loop.routing import HatSpec, route

__all__ = ["StandIns", "stand_ins"]

# One step of a walk: the hat that runs, and the events it publishes (the last one onwards).
_Step = tuple[str, tuple[str, ...]]
# Where a walk is: the hat about to run, and the required events published so far.
_State = tuple[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class StandIns:
    """Each hat's stand-in outputs; ``walk``, the topics the walk publishes, in order;
    ``stuck``, why no walk completes the loop (``None`` when one does): the stand-ins
    then go on until a limit stops the loop."""

    outputs: dict[str, list[str]]
    walk: tuple[str, ...]
    stuck: str | None = None

    def backend(self, hat: str) -> ScriptedConfig:
        """The stand-in backend of ``hat``."""
        return ScriptedConfig(outputs=self.outputs[hat], repeat_last=True)


class _Topology:
    """What a walk needs to know of the hats and the loop's events."""

    def __init__(self, loop: LoopSection, hats: Mapping[str, HatConfig]) -> None:
        self.loop = loop
        self.hats = hats
        self.required = frozenset(loop.required_events)
        self.specs = tuple(HatSpec(name=n, triggers=tuple(h.triggers)) for n, h in hats.items())
        concrete = [t for h in hats.values() for t in h.triggers if "*" not in t]
        concrete.append(loop.completion_event)
        self.candidates = {
            name: _topics(hat.publishes, concrete, loop.cancellation_event)
            for name, hat in hats.items()
        }
        # the hats that take what no other does: a walk through them skips the hats' flow
        self.catch_all = frozenset(
            [n for n, h in hats.items() if "*" in h.triggers]
            + ([loop.fallback_hat] if loop.fallback_hat else [])
        )

    def taker(self, topic: str, source: str) -> str | None:
        """The hat ``topic`` goes to, published by ``source``."""
        return route(
            Event(topic=topic, source=source, ts=0.0),
            self.specs,
            completion_event=self.loop.completion_event,
            fallback=self.loop.fallback_hat,
            starting_event=self.loop.starting_event,
        )

    def width(self, hat: str | None) -> int:
        """How many copies of an event ``hat`` takes: one per activation of its wave."""
        return 1 if hat is None else self.hats[hat].concurrency or 1

    def walk(self, start: _State) -> list[_Step] | None:
        """The shortest walk from ``start`` to an accepted completion that enters no
        catch-all hat, else the shortest that does."""
        return self._walk(start, self.catch_all) or self._walk(start, frozenset())

    def _walk(self, start: _State, avoid: frozenset[str]) -> list[_Step] | None:
        """The shortest walk from ``start`` to an accepted completion entering no hat of
        ``avoid``, breadth first."""
        came: dict[_State, tuple[_State, _Step] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            hat, seen = state
            for topic in self.candidates[hat]:
                if topic == self.loop.completion_event:
                    extra = tuple(  # published earlier, they would end the run
                        t
                        for t in self.loop.required_events
                        if t not in seen
                        and t in self.candidates[hat]
                        and self.taker(t, hat) is None
                    )
                    if self.required <= seen | set(extra):
                        return [*self._back(came, state), (hat, (*extra, topic))]
                    continue
                taker = self.taker(topic, hat)
                if taker is None or taker in avoid:  # no hat takes it: the run would end
                    continue
                nxt = (taker, seen | (self.required & {topic}))
                if nxt not in came:
                    came[nxt] = (state, (hat, (topic,)))
                    queue.append(nxt)
        return None

    @staticmethod
    def _back(came: Mapping[_State, tuple[_State, _Step] | None], state: _State) -> list[_Step]:
        steps: list[_Step] = []
        link = came[state]
        while link is not None:
            state, step = link
            steps.append(step)
            link = came[state]
        return steps[::-1]

    def answer(self, hat: str) -> tuple[str, ...]:
        """What ``hat`` publishes off the walk: the first step of a walk from itself, else
        the first of its topics a hat takes (nothing when none does)."""
        walk = self.walk((hat, frozenset()))
        if walk:
            return walk[0][1]
        taken = [t for t in self.candidates[hat] if self.taker(t, hat) is not None]
        return tuple(taken[:1])


def _topics(publishes: list[str], concrete: list[str], cancellation: str | None) -> list[str]:
    """The topics a hat may publish, in its order: a pattern stands for the triggers and
    the completion event it matches; never the cancellation event."""
    out: list[str] = []
    for pattern in publishes:
        for topic in [pattern] if "*" not in pattern else concrete:
            if topic_matches(pattern, topic) and topic != cancellation and topic not in out:
                out.append(topic)
    return out


def stand_ins(loop: LoopSection, hats: Mapping[str, HatConfig]) -> StandIns:
    """Every hat's stand-in outputs, following the walk (see the module's docstring)."""
    topo = _Topology(loop, hats)
    first = topo.taker(loop.starting_event, "loop")
    walk = topo.walk((first, frozenset())) if first is not None else None
    outputs: dict[str, list[str]] = {name: [] for name in hats}
    copies = 1  # of the event the next step's hat takes
    for index, (hat, topics) in enumerate(walk or ()):
        runs = copies if topo.width(hat) > 1 and hats[hat].group_by != "topic" else 1
        nxt = walk[index + 1][0] if walk and index + 1 < len(walk) else None
        width = topo.width(nxt)
        for k in range(1, runs + 1):
            outputs[hat].append(_output(hat, topics, width, k if runs > 1 else None))
        copies = runs * width
    for name, done in outputs.items():
        if not done:
            topics = topo.answer(name)
            taker = topo.taker(topics[-1], name) if topics else None
            done.append(_output(name, topics, topo.width(taker), None))
    if walk is not None:
        return StandIns(outputs, tuple(t for _, topics in walk for t in topics))
    required = ", ".join(loop.required_events)
    return StandIns(
        outputs,
        (),
        stuck=f"no chain of events that hats take leads from {loop.starting_event} to "
        f"{loop.completion_event}{f' with {required} published on the way' if required else ''}"
        ": the stand-ins go on until a limit stops the loop (hats validate says what is "
        "likely missing)",
    )


def _output(hat: str, topics: tuple[str, ...], width: int, k: int | None) -> str:
    """One activation's output: ``topics`` in order, the last one ``width`` times (its
    payloads numbered); ``k`` numbers the activation within its wave."""
    done = [] if k is None else [f"done {k}"]
    tags = [f'<event topic="{t}">{", ".join(done) or "done"}</event>' for t in topics[:-1]]
    if topics:
        parts = [[f"part {i} of {width}"] for i in range(1, width + 1)] if width > 1 else [[]]
        payloads = [", ".join(done + part) or "done" for part in parts]
        tags += [f'<event topic="{topics[-1]}">{p}</event>' for p in payloads]
    return " ".join([f"(a scripted stand-in for {hat})", *tags])
