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

from loop import _json, topics
from loop.errors import InputError
from loop.topics import is_valid_pattern, is_valid_topic

__all__ = [
    "PLACEHOLDER_TOPICS",
    "RESERVED_PREFIXES",
    "Event",
    "EventPayload",
    "is_reserved",
    "is_valid_pattern",
    "is_valid_topic",
    "parse_event_tags",
    "pattern_specificity",
    "patterns_overlap",
    "topic_matches",
    "validate_topic",
]

EventPayload = Any  # a string or any JSON value (dict, list, number, bool, null)


@dataclass
class Event:
    """An event: its topic, payload, source (a hat or ``loop``), target hat and time."""

    # Journal and recording records hold events as they are: an event's JSON form is
    # its fields. Treat it as immutable (with_target makes a copy); not ``frozen``, which
    # would cost every event built a microsecond.

    topic: str
    payload: EventPayload = ""
    source: str = "loop"
    target: str | None = None
    ts: float = field(default_factory=time.time)

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


def validate_topic(topic: str) -> str:
    """Return ``topic`` or raise ``InputError`` with a one-line reason."""
    if not is_valid_topic(topic):
        raise InputError(f"invalid topic {topic!r}: {topics.RULE}")
    return topic


# Topics for the loop and its subscribers (the tool domains), not for hats; so is the
# completion event.
RESERVED_PREFIXES = ("task.", "theme.", "experience.", "loop.")


def is_reserved(topic: str, completion_event: str) -> bool:
    """Whether ``topic`` belongs to the loop and its subscribers rather than to hats."""
    return topic == completion_event or topic.startswith(RESERVED_PREFIXES)


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


def patterns_overlap(a: str, b: str) -> bool:
    """Whether patterns ``a`` and ``b`` can both match one topic."""
    if a == "*" or b == "*":
        return True
    sa, sb = a.split("."), b.split(".")
    return len(sa) == len(sb) and all(x == y or "*" in (x, y) for x, y in zip(sa, sb, strict=True))


def pattern_specificity(pattern: str) -> tuple[int, int]:
    """Sort key: higher is more specific (literal segments first, then length).

    The bare ``*`` fallback ranks below every other pattern.
    """
    if pattern == "*":
        return (-1, 0)
    segs = pattern.split(".")
    return (sum(1 for s in segs if s != "*"), len(segs))


# The placeholder topics of the prompt's own instructions (``<event topic="TOPIC">``,
# ``loop emit TOPIC``): an agent that echoes the prompt publishes nothing by it. Exactly
# as written there (upper case), so a hat may still publish ``topic``.
PLACEHOLDER_TOPICS = frozenset({"TOPIC"})

# A tag, in any letter case, self-closing or with a body: (attribute text, body).
_TAG = re.compile(r"<(?i:event)\s+([^>]*?)\s*(?:/>|>(.*?)</(?i:event)\s*>)", re.DOTALL)
_ATTR = re.compile(r"""([A-Za-z_][\w\-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")  # key, "v", 'v'


def _attributes(raw: str) -> tuple[str | None, str | None]:
    """``(topic, target)`` from a tag's attribute text; ``None`` where absent or invalid."""
    topic = target = None
    for key, double_quoted, single_quoted in _ATTR.findall(raw):
        value = html.unescape(double_quoted or single_quoted)
        match key.lower():
            case "topic":
                topic = value.strip()
            case "target":
                target = value or None
    return (topic if topic and is_valid_topic(topic) else None), target


def _payload(body: str) -> EventPayload:
    body = body.strip()
    if body[:1] in ("{", "["):
        try:  # a payload nested too deep stays text, as invalid JSON does
            return _json.loads(body, max_depth=_json.INPUT_DEPTH)
        except ValueError:
            pass
    return body


def parse_event_tags(text: str, *, source: str, ts: float | None = None) -> list[Event]:
    """Find ``<event topic="t" [target="hat"]>payload</event>`` tags in agent output.

    Attributes may come in any order, with either quote and HTML entities; the tag may
    be self-closing, in any letter case. A tag without a valid topic is skipped, and so
    is the prompt's own example (a topic in :data:`PLACEHOLDER_TOPICS`). A
    payload that parses as a JSON object or array is kept as JSON; anything else stays
    text (stripped). ``ts``: the events' time (default: now).
    """
    when = time.time() if ts is None else ts
    events: list[Event] = []
    for attributes, body in _TAG.findall(text):
        topic, target = _attributes(attributes)
        if topic is not None and topic not in PLACEHOLDER_TOPICS:
            events.append(Event(topic, _payload(body), source, target, when))
    return events
