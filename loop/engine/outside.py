"""Events published while no iteration collects: journaled and routed, never lost.

An extension or a bus subscriber may publish between iterations, for example from a
``loop.iteration.done`` handler. The engine's collector hands such an event to
:class:`OutsideEvents`, which keeps it until the engine's own publication returns; the
engine then journals the kept events in one ``events.published`` record (the journal's
reducer routes them like an iteration's events: they become pending and wake their
hats) and tells the extensions that take it (the recorder, replay's comparer). After the
session's end nothing can be routed: an event published then is refused loudly (logged
as an error), never dropped in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from loop.events import Event
from loop.extensions import Extension
from loop.records import EventsPublished

__all__ = ["OutsideEvents"]

log = structlog.get_logger("loop.engine")


class OutsideEvents:
    """What was published outside any iteration, until it is journaled.

    Args:
        record: journals a record (and folds it into the loop's state).
        extensions: the extensions; those that implement
            :meth:`~loop.extensions.Extension.published` are told of each record.
    """

    def __init__(
        self, record: Callable[[EventsPublished], None], extensions: Sequence[Extension]
    ) -> None:
        self._record = record
        self._journalers = [e for e in extensions if type(e).published is not Extension.published]
        self._kept: list[Event] = []
        self.ended = False  # the session's end is journaled: nothing is routed any more

    def __bool__(self) -> bool:
        return bool(self._kept)

    def seen(self, event: Event) -> None:
        """``event`` was published while no iteration collected. The loop's own (source
        ``loop``: its lifecycle, a wait, a hat's exhaustion) are not kept: they are
        journaled by their own records, or are for the displays only."""
        if event.source == "loop":
            return
        if self.ended:
            log.error(
                "event published after the session ended: refused, not routed",
                topic=event.topic,
                source=event.source,
            )
            return
        self._kept.append(event)

    def journal(self, after: int, ts: float) -> None:
        """Journal the kept events (``after`` iterations committed), which routes them.

        Raises:
            SessionError: the journal cannot take the record.
        """
        if not self._kept or self.ended:
            return
        events, self._kept = tuple(self._kept), []
        record = EventsPublished(after=after, events=events, ts=ts)
        self._record(record)
        log.info("events published between iterations", topics=[e.topic for e in events])
        for ext in self._journalers:
            try:
                ext.published(record)
            except Exception:  # like a bus subscriber: an extension's failure is its own
                log.exception("extension failed on published events", extension=ext.name)
