"""What a stopped run left running, found through its journal and stopped on resume.

A run killed with ``kill -9`` cannot stop its hat's child: the child runs in a process
group of its own and goes on, an orphan that may still emit events and call tools. So
before a resumed session runs anything, the engine stops the processes of every attempt
that never committed, and only those:

* a child that a ``child.start`` record names, if that same process still runs (same
  pid, same start time, same boot), with its process group;
* every process that carries one of those children's tags in its environment (what
  they started, in their group or not), or the attempt's own folder in
  ``LOOP_ITERATION_DIR`` (a child whose record the crash kept from the journal).

Each gets SIGTERM, a short grace, then SIGKILL. Whatever such a process wrote went to
its own attempt's files, whose events the new attempt never reads (the tool calls it
made before the kill are kept with the iteration: ``lost_calls``); its calls since were
refused (``run_stopped``), and stopping it ends its other side effects before the new
attempt starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from loop.backends._process import KILL_GRACE_SECONDS, KILL_WAIT_SECONDS
from loop.backends._procs import (
    ProcStat,
    boot_id,
    carrying,
    processes,
    read_stat,
    stop_processes,
    tag_entry,
)
from loop.engine.session_dir import SessionPaths
from loop.engine.state import OpenAttempt

__all__ = ["stop_stale"]

log = structlog.get_logger("loop.engine")


def _finder(attempts: Sequence[OpenAttempt], paths: SessionPaths) -> list[ProcStat]:
    here = boot_id()
    children = [c for a in attempts for c in a.children]
    entries = [tag_entry(c.tag) for c in children]
    entries += [
        f"LOOP_ITERATION_DIR={paths.attempt_dir(a.iteration, a.attempt)}".encode() for a in attempts
    ]
    found: dict[int, ProcStat] = {}
    groups: set[int] = set()
    for child in children:
        if child.boot_id != here or child.start_ticks is None:
            continue  # another boot: that process is gone, whatever has its pid now
        st = read_stat(child.pid)
        if st is not None and st.start_ticks == child.start_ticks and st.state != "Z":
            found[st.pid] = st
            groups.add(child.pgid)  # the leader lives, so its group is still its own
    for st in processes():
        if st.pid not in found and (st.pgid in groups or carrying(st, entries)):
            found[st.pid] = st
    return list(found.values())


async def stop_stale(
    attempts: Sequence[OpenAttempt], paths: SessionPaths, grace: float = KILL_GRACE_SECONDS
) -> tuple[int, ...]:
    """Stop what the attempts that never committed left running; their pids, sorted.
    ``grace``: between SIGTERM and SIGKILL (0: SIGKILL at once)."""
    if not attempts:
        return ()
    stopped = await stop_processes(
        lambda: _finder(attempts, paths), grace=grace, wait=KILL_WAIT_SECONDS
    )
    if stopped:
        log.warning(
            "stopped processes a previous run left running",
            session=paths.session_id,
            pids=sorted(stopped),
        )
    return tuple(sorted(stopped))
