"""One recording's outcome, and the worker process of ``replay --jobs N``.

:func:`replay_outcome` replays one recording with :func:`loop.replay.replay_recording`
and turns what happened into a :class:`ReplayOutcome`: a bad recording (a
:class:`LoopError`) is an ``error`` row, anything unexpected a ``crashed`` row; nothing
escapes for one recording to end the run of the others.

``python -m loop.commands.replay_worker`` reads :class:`ReplayJob` lines on stdin and
writes one :class:`ReplayOutcome` line per job on its result channel: the stdout it was
started with, moved to a private descriptor first (fd 1 then points at stderr, so
nothing else the process prints can break a result line). It replays one recording at
a time, so a parent that sees it die knows which recording it was on. It ends at the
end of its stdin.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path

import anyio

from loop._faults import crash_point
from loop._log import configure_logging
from loop.commands.replay_suite import ReplayJob, ReplayOutcome
from loop.errors import LoopError
from loop.extensions import extensions_from
from loop.replay import ReplayResult, replay_recording

__all__ = ["crash_point_name", "main", "outcome_of", "replay_outcome"]


def outcome_of(index: int, result: ReplayResult) -> ReplayOutcome:
    """The outcome of a replay that ran (it passed or it diverged)."""
    return ReplayOutcome(
        index=index,
        path=str(result.path),
        status="passed" if result.ok else "diverged",
        line=result.summary(),
        detail=result.divergence.render() if result.divergence is not None else "",
        warnings=list(result.warnings),
        partial=result.partial,
        duration=result.duration,
    )


async def replay_outcome(job: ReplayJob) -> ReplayOutcome:
    """Replay ``job``'s recording; every way it can end is an outcome."""
    path = Path(job.path)
    try:
        extensions = extensions_from(job.extensions, where=Path(job.where), option="--extension")
        result = await replay_recording(path, extensions)
    except LoopError as exc:
        message = str(exc)
        return ReplayOutcome(
            index=job.index,
            path=job.path,
            status="error",
            line=f"ERROR    {message}",
            detail=message,
        )
    except Exception as exc:  # a bug: reported for this recording; the others still run
        message = f"{path}: the replay crashed: {type(exc).__name__}: {exc}"
        return ReplayOutcome(
            index=job.index,
            path=job.path,
            status="crashed",
            line=f"ERROR    {message}",
            detail=message + "\n" + "".join(traceback.format_exception(exc)),
        )
    return outcome_of(job.index, result)


def crash_point_name(path: Path) -> str:
    """The fault-injection point a worker passes before replaying ``path`` (tests)."""
    return f"replay-worker.{path.stem}"


def main() -> int:
    """Serve jobs from stdin until it ends."""
    results = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    configure_logging("json", level=logging.WARNING)
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        job = ReplayJob.model_validate_json(raw)
        crash_point(crash_point_name(Path(job.path)))
        outcome = anyio.run(replay_outcome, job, backend="asyncio")
        results.write(outcome.model_dump_json().encode() + b"\n")
        results.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
