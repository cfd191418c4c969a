"""Crash points for fault-injection tests: ``HATLOOP_CRASH_AT=name:count``.

When the variable names a point, the process kills itself with SIGKILL the
``count``-th time it reaches that point, exactly as ``kill -9`` from outside would,
at a moment a test can choose deterministically. Unset (always, outside tests),
:func:`crash_point` is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ARMED", "crash_armed", "crash_point"]

ENV = "HATLOOP_CRASH_AT"


def _parse(raw: str | None) -> tuple[str, int] | None:
    if not raw or ":" not in raw:
        return None
    name, _, count = raw.partition(":")
    return (name, int(count)) if count.isdigit() and int(count) > 0 else None


_TARGET = _parse(os.environ.get(ENV))
_hits: dict[str, int] = {}
# Whether any crash point is armed in this process: hot paths test this constant before
# calling :func:`crash_point`, so an unarmed run pays no call per point.
ARMED = _TARGET is not None


def crash_armed(name: str) -> bool:
    """Count a pass through point ``name``; true when this pass is the one to crash at."""
    if _TARGET is None or _TARGET[0] != name:
        return False
    _hits[name] = _hits.get(name, 0) + 1
    return _hits[name] == _TARGET[1]


def crash_point(name: str) -> None:
    """SIGKILL this process if ``HATLOOP_CRASH_AT`` selects this pass through ``name``."""
    if _TARGET is not None and crash_armed(name):
        os.kill(os.getpid(), signal.SIGKILL)
