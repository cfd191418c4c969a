"""The topic grammar, in one place: dot-separated segments of ``[A-Za-z0-9_-]``.

A topic names an event (``plan.ready``); a pattern is a topic whose segments may also
be ``*`` (``task.*``), and a bare ``*`` matches every topic. This module imports only
``re``, so the light ``emit`` command checks topics with the same rule as the engine,
the config and the MCP tools.

>>> is_valid_topic("plan.ready"), is_valid_topic("plan..ready"), is_valid_topic("a b")
(True, False, False)
>>> is_valid_pattern("task.*"), is_valid_pattern("*"), is_valid_pattern("task.**")
(True, True, False)
"""

from __future__ import annotations

import re

__all__ = [
    "COMPLETION_REJECTED",
    "DEFAULT_COMPLETION_EVENT",
    "DEFAULT_STARTING_EVENT",
    "PATTERN",
    "RULE",
    "is_valid_pattern",
    "is_valid_topic",
]

# The loop's own events when ``[loop]`` names none.
DEFAULT_STARTING_EVENT = "task.start"
DEFAULT_COMPLETION_EVENT = "LOOP_COMPLETE"
# The loop's answer to a completion it refused (its payload says why), for the hat.
COMPLETION_REJECTED = "loop.completion_rejected"

_SEGMENT = r"[A-Za-z0-9_\-]+"

# The grammar as a JSON Schema ``pattern`` (what the MCP tools publish).
PATTERN = rf"^{_SEGMENT}(\.{_SEGMENT})*$"
# The rule in words, for the messages that refuse a topic.
RULE = "use dot-separated segments of letters, digits, '_' or '-'"

# with fullmatch: a final newline is refused (``$`` would let one through)
_ONE_SEGMENT = re.compile(_SEGMENT)
_TOPIC = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")


def is_valid_topic(topic: str) -> bool:
    """A topic is one or more non-empty segments of ``[A-Za-z0-9_-]``, dot-separated."""
    return _TOPIC.fullmatch(topic) is not None


def is_valid_pattern(pattern: str) -> bool:
    """A pattern is a topic whose segments may also be ``*``."""
    return bool(pattern) and all(
        seg == "*" or _ONE_SEGMENT.fullmatch(seg) for seg in pattern.split(".")
    )
