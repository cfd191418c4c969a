"""Ids by a unique prefix, as git takes a commit's: sessions and tasks both.

An exact id always wins. A prefix names an id only when it has at least
:data:`MIN_PREFIX` characters and no other id starts with it.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MIN_PREFIX", "matches", "shown"]

# The shortest prefix looked up: shorter ones would name a session or task by accident.
MIN_PREFIX = 4
_SHOWN = 10  # candidates named in an ambiguity error


def matches(given: str, ids: Iterable[str]) -> list[str]:
    """The ids ``given`` is a prefix of (none for a prefix shorter than MIN_PREFIX)."""
    if len(given) < MIN_PREFIX:
        return []
    return [i for i in ids if i.startswith(given)]


def shown(candidates: list[str]) -> str:
    """The candidates of an ambiguous prefix, for a one-line error."""
    more = len(candidates) - _SHOWN
    return ", ".join(candidates[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
