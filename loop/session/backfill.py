"""What a resumed run adds to its recording before its own records: the journal's
records before this run's resume that the file lacks (pure); and what a session that
ended for good lacks of its whole journal, its last footer included.

A ``kill -9`` between the journal commit and the recording write, or in the middle of
that write, loses the record; the journal still has it. A run resumed without
``--record-session`` recorded nothing: its ``resumed`` marker, the ``override`` of the
limits it changed, its iterations, the events published between them, its activations'
starts (parallel hats) and its footer are all taken from the journal, so a replay
applies its limits at the same point. :class:`Held` is what the file holds, by what each
line shares with its journal record; :func:`missing_lines` is the lines to add, in the
journal's order. The recorder (:mod:`loop.session.recorder`) reads both and writes them.

A session that completed or was cancelled is never resumed, so the same lines complete
its recording when a crash came between the journal's ``session.end`` and the footer, or
when the run that ended it was not recorded (``ended``: every record is taken).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from loop.exits import exit_code_for
from loop.records import (
    EventsPublished,
    IterationEnd,
    IterationStart,
    JournalRecord,
    Override,
    Resume,
    SessionEnd,
)
from loop.session.recording import (
    RecordingRecord,
    footer_record,
    published_record,
    resumed_marker,
    start_record,
)

__all__ = ["Held", "missing_lines"]


class Held:
    """What a recording file holds, by what each line shares with its journal record:
    an iteration's number; the time of a ``published``, ``start``, ``override`` line or a
    footer (the record's own); a ``resumed`` marker's iteration and time (a moment after
    its ``resume`` record's)."""

    def __init__(self) -> None:
        self.iterations: set[int] = set()
        self.published: set[float] = set()
        self.starts: set[tuple[int, float]] = set()
        self.overrides: set[float] = set()
        self.footers: set[float] = set()
        self.markers: list[tuple[int, float]] = []

    def add(self, data: dict[str, Any]) -> None:
        """Note one line's data."""
        kind, ts, number = data.get("kind"), data.get("ts"), data.get("iteration")
        if kind == "iteration" and type(number) is int:
            self.iterations.add(number)
            return
        if not isinstance(ts, float):
            return
        if kind == "published":
            self.published.add(ts)
        elif kind == "start" and type(number) is int:
            self.starts.add((number, ts))
        elif kind == "override":
            self.overrides.add(ts)
        elif kind == "footer":
            self.footers.add(ts)
        elif kind == "marker" and data.get("marker") == "resumed":
            at = data.get("resumed_at_iteration")
            if type(at) is int:
                self.markers.append((at, ts))

    def resumed(self, record: Resume, until: float) -> bool:
        """Whether the file holds ``record``'s marker: written by the run it began, after
        it and before the next resume (at ``until``)."""
        return any(at == record.iteration and record.ts <= ts < until for at, ts in self.markers)


def missing_lines(
    records: Sequence[JournalRecord],
    held: Held,
    session_id: str,
    parallel: bool,
    *,
    ended: bool = False,
) -> list[RecordingRecord | IterationEnd]:
    """The lines the file lacks of the journal's ``records`` before this run's resume (its
    own resume and override are the journal's last: this run records them as it runs),
    in the journal's order; ``parallel``: the session's hats may run at once (only then
    are starts lines); ``ended``: the session has ended for good and no run of it is to
    be recorded, so every record counts, to the last ``session.end`` (a file that holds
    its footer lacks nothing: what it left out before, its size cap did)."""
    ends = [r.ts for r in records if isinstance(r, SessionEnd)]
    if ended and ends and ends[-1] in held.footers:
        return []
    resumes = [i for i, r in enumerate(records) if isinstance(r, Resume)]
    earlier = records[: resumes[-1]] if resumes and not ended else records
    # each resume's end: the next one's, and the last one's never (a session that ended)
    bounds = [*(r.ts for r in records if isinstance(r, Resume)), math.inf][1:]
    out: list[RecordingRecord | IterationEnd] = []
    run = 0  # the lines backfilled for the run of the record at hand (its footer's count)
    for record in earlier:
        if isinstance(record, Resume):
            run = 0
            if held.resumed(record, bounds.pop(0)):
                continue
            line: RecordingRecord | IterationEnd | None = resumed_marker(
                session_id, record.iteration, record.ts, backfilled=True
            )
        else:
            line = _missing(record, held, parallel, run)
        if line is not None:
            run += 1
            out.append(line)
    return out


def _missing(
    record: JournalRecord, held: Held, parallel: bool, run: int
) -> RecordingRecord | IterationEnd | None:
    """``record``'s line when the file lacks it (``None``: held, or never a line)."""
    if isinstance(record, IterationEnd):
        return None if record.iteration in held.iterations else record
    if isinstance(record, EventsPublished):
        return None if record.ts in held.published else published_record(record)
    if isinstance(record, IterationStart):  # a line only when hats run at once
        held_start = (record.iteration, record.ts) in held.starts
        return start_record(record) if parallel and not held_start else None
    if isinstance(record, Override):
        return None if record.ts in held.overrides else record
    if isinstance(record, SessionEnd):
        if record.ts in held.footers:
            return None
        return footer_record(record, exit_code_for(record.reason), run, 0, cap_reached=False)
    return None
