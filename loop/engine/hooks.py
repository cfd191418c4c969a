"""The extensions' per-iteration hooks, as the engine calls them.

Each hook is called only on the extensions that override it (told apart by comparing
class attributes, never by looking names up): a loop whose extensions take no part in
an iteration pays nothing per iteration for them. An extension's failure in
:meth:`Hooks.committed` or :meth:`Hooks.flush` is its own (logged), never the loop's.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from loop.extensions import Extension
from loop.records import IterationEnd

__all__ = ["Hooks"]

log = structlog.get_logger("loop.engine")


class Hooks:
    """The extensions that implement each hook, and the calls the engine makes."""

    def __init__(self, extensions: Sequence[Extension]) -> None:
        exts = list(extensions)
        self.starters = [
            e for e in exts if type(e).on_iteration_start is not Extension.on_iteration_start
        ]
        self.prompters = [e for e in exts if type(e).prompt_section is not Extension.prompt_section]
        self.blockers = [
            e for e in exts if type(e).completion_blocker is not Extension.completion_blocker
        ]
        self.flushers = [e for e in exts if type(e).flush is not Extension.flush]
        self.committers = [e for e in exts if type(e).committed is not Extension.committed]

    def sections(self, hat: str) -> list[str]:
        """The extensions' blocks of context for ``hat``'s prompt."""
        if not self.prompters:
            return []
        return [s for ext in self.prompters if (s := ext.prompt_section(hat))]

    def blocker(self) -> str | None:
        """The first extension's reason to refuse the completion, or None."""
        return next((b for ext in self.blockers if (b := ext.completion_blocker())), None)

    def committed(self, record: IterationEnd) -> None:
        """Hand a committed iteration to the extensions that take it (the recorder)."""
        for ext in self.committers:
            try:
                ext.committed(record)
            except Exception:  # like a bus subscriber: an extension's failure is its own
                log.exception("extension failed on a committed iteration", extension=ext.name)

    def flush(self) -> None:
        """Write out what the extensions buffer (the loop is about to wait or end)."""
        for ext in self.flushers:
            try:
                ext.flush()
            except Exception:  # an extension's buffer is its own problem, never the loop's
                log.exception("extension flush failed", extension=ext.name)
