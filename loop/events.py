"""Events, topic patterns and the ``<event>`` tag channel.

An event has a dot-separated ``topic``, a ``payload`` (a string or any JSON value),
a ``source`` (a hat name, ``loop`` or a subscriber's name), an optional ``target``
hat and a timestamp. Patterns match per segment with ``*``; a bare ``*`` matches
every topic and is the fallback.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

from loop import _json
from loop.errors import InputError

__all__ = [
    "RESERVED_PREFIXES",
    "Event",
    "EventPayload",
    "is_reserved",
    "is_valid_pattern",
    "is_valid_topic",
    "parse_event_tags",
    "pattern_specificity",
    "topic_matches",
    "validate_topic",
]

EventPayload = Any  # a string or any JSON value (dict, list, number, bool, null)

_SEGMENT = re.compile(r"[A-Za-z0-9_\-]+")  # with fullmatch: a final newline is refused


@dataclass(slots=True)
class Event:
    """One event on the bus. Treat it as immutable (:meth:`with_target` makes a copy).

    Not ``frozen``: a frozen dataclass costs a microsecond more per event to build, and
    the engine builds several per iteration.
    """

    topic: str
    payload: EventPayload = ""
    source: str = "loop"
    target: str | None = None
    ts: float = field(default_factory=time.time)
    # to_dict's result, built once: the engine writes an event into up to four lists of
    # an iteration record, and a published event again as the next iteration's trigger
    _dict: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def with_target(self, target: str | None) -> Event:
        """A copy addressed to ``target``."""
        return replace(self, target=target)

    def payload_text(self) -> str:
        """The payload as text: strings as they are, anything else as compact JSON."""
        if isinstance(self.payload, str):
            return self.payload
        return json.dumps(self.payload, ensure_ascii=False, sort_keys=True)

    def signature(self) -> tuple[str, str, str]:
        """Topic, source and payload: what the stale-loop rule compares."""
        return (self.topic, self.source, self.payload_text())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the journal and recording form); shared, so do not mutate it."""
        out = self._dict
        if out is None:
            out = {"topic": self.topic, "payload": self.payload, "source": self.source}
            if self.target is not None:
                out["target"] = self.target
            out["ts"] = self.ts
            self._dict = out
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Rebuild an event from :meth:`to_dict` output."""
        return cls(
            topic=str(data["topic"]),
            payload=data.get("payload", ""),
            source=str(data.get("source", "loop")),
            target=data.get("target"),
            ts=float(data.get("ts", 0.0)),
        )


_TOPIC = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")


def is_valid_topic(topic: str) -> bool:
    """A topic is one or more non-empty segments of ``[A-Za-z0-9_-]``, dot-separated."""
    return _TOPIC.fullmatch(topic) is not None


def validate_topic(topic: str) -> str:
    """Return ``topic`` or raise ``InputError`` with a one-line reason."""
    if not is_valid_topic(topic):
        raise InputError(
            f"invalid topic {topic!r}: use dot-separated segments of letters, digits, '_' or '-'"
        )
    return topic


# Topics for the loop and its subscribers (the tool domains), not for hats; so is the
# completion event.
RESERVED_PREFIXES = ("task.", "theme.", "experience.", "loop.")


def is_reserved(topic: str, completion_event: str) -> bool:
    """Whether ``topic`` belongs to the loop and its subscribers rather than to hats."""
    return topic == completion_event or topic.startswith(RESERVED_PREFIXES)


def is_valid_pattern(pattern: str) -> bool:
    """A pattern is a topic whose segments may also be ``*``."""
    return bool(pattern) and all(
        seg == "*" or _SEGMENT.fullmatch(seg) for seg in pattern.split(".")
    )


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether ``pattern`` matches ``topic``: ``*`` per segment, bare ``*`` matches all."""
    if pattern == "*":
        return True
    if pattern == topic:
        return True
    p_segs = pattern.split(".")
    t_segs = topic.split(".")
    if len(p_segs) != len(t_segs):
        return False
    return all(p in ("*", t) for p, t in zip(p_segs, t_segs, strict=True))


def pattern_specificity(pattern: str) -> tuple[int, int]:
    """Sort key: higher is more specific (literal segments first, then length).

    The bare ``*`` fallback ranks below every other pattern.
    """
    if pattern == "*":
        return (-1, 0)
    segs = pattern.split(".")
    return (sum(1 for s in segs if s != "*"), len(segs))


_TAG = re.compile(
    r"<event\s+(?P<attrs>[^>]*?)\s*(?:/>|>(?P<body>.*?)</event\s*>)",
    re.DOTALL | re.IGNORECASE,
)
# ``topic="a.b"`` alone with a valid topic and nothing to unescape: most tags agents write
_TOPIC_ONLY = re.compile(r'topic="([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)"')
_ATTR = re.compile(r"""(?P<key>[A-Za-z_][\w\-]*)\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')""")


def _attributes(raw: str) -> tuple[str | None, str | None]:
    """``(topic, target)`` from a tag's attribute text; ``None`` where absent or invalid."""
    attrs = {
        m.group("key").lower(): html.unescape(
            m.group("dq") if m.group("dq") is not None else m.group("sq") or ""
        )
        for m in _ATTR.finditer(raw)
    }
    topic = attrs.get("topic", "").strip()
    return (topic if is_valid_topic(topic) else None), (attrs.get("target") or None)


# ``<event topic="a.b">payload</event>`` with nothing else in it: what most agents write
_SIMPLE_TAG = re.compile(r'<event topic="([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)">([^<]*)</event>')


def _payload(body: str) -> EventPayload:
    body = body.strip()
    if body[:1] in ("{", "["):
        try:  # a payload nested too deep stays text, as invalid JSON does
            return _json.loads(body, max_depth=_json.INPUT_DEPTH)
        except ValueError:
            pass
    return body


def parse_event_tags(text: str, *, source: str) -> list[Event]:
    """Find ``<event topic="t" [target="hat"]>payload</event>`` tags in agent output.

    A tag without a valid topic is skipped. A payload that parses as a JSON object or
    array is kept as JSON; anything else stays text (stripped).
    """
    if "<" not in text:
        return []
    simple = _SIMPLE_TAG.findall(text)
    if simple and text.count("<") == 2 * len(simple):  # every "<" is in a simple tag
        return [Event(topic=t, payload=_payload(body), source=source) for t, body in simple]
    return _parse_tags(text, source)


def _parse_tags(text: str, source: str) -> list[Event]:
    """The general parser: any attribute order, quotes, entities, case, self-closing."""
    events: list[Event] = []
    for match in _TAG.finditer(text):
        raw, body = match.group("attrs", "body")
        target: str | None = None
        topic: str | None
        if (simple := _TOPIC_ONLY.fullmatch(raw)) is not None:  # the common tag (hot path)
            topic = simple.group(1)
        else:
            topic, target = _attributes(raw)
        if topic is None:
            continue
        events.append(
            Event(topic=topic, payload=_payload(body or ""), source=source, target=target)
        )
    return events
