"""Processes a hat leaves running: name them across pid reuse, find them, stop them.

Linux (``/proc`` and pidfds). Elsewhere nothing is found, and a child is stopped through
its process group only.

* **Identity.** A process is its pid plus its start time (field 22 of
  ``/proc/<pid>/stat``, clock ticks after boot) on one boot
  (``/proc/sys/kernel/random/boot_id``): a pid that was reused names a process with a
  later start time. A signal goes through a pidfd opened *before* the start time is
  checked, so the process checked is the process signalled, whatever becomes of its pid.
* **Membership.** Every child :func:`~loop.backends._process.run_process` starts gets
  a fresh random tag in its environment (:data:`TAG_VARIABLE`), and its descendants
  inherit it, also those that leave its process group or session (``setsid``, a double
  fork). A process that carries the tag was started for that child. A descendant that
  both leaves the group and clears its environment is not found (a cgroup would find
  it; hatloop makes none).

Finding what a child left reads ``/proc`` only for the pids handed out since just before
it started (a :class:`Mark`: the last pid and the fork count), while fewer forks than
there are pids happened since: a few files, not the whole process table (a full scan
costs a few milliseconds on a busy machine). Each of those is checked by its start time
and its environment.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import select
import signal
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import anyio

__all__ = [
    "TAG_VARIABLE",
    "Mark",
    "ProcStat",
    "SpawnedProcess",
    "boot_id",
    "carrying",
    "mark",
    "new_tag",
    "own_start_ticks",
    "pid_window",
    "processes",
    "read_stat",
    "spawned",
    "stop_processes",
    "tag_entry",
]

TAG_VARIABLE = "LOOP_PROCESS_TAG"
_PROC = "/proc"
_ROUNDS = 3  # scans per stop: a process forked while the others were being stopped


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str  # R, S, D, Z (a zombie: exited, not reaped yet)...
    start_ticks: int


def _read(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid: int) -> ProcStat | None:
    """The process ``pid`` as ``/proc`` shows it now; ``None`` when there is none."""
    raw = _read(f"{_PROC}/{pid}/stat", 4096)
    if raw is None:
        return None
    end = raw.rfind(b")")  # the command name may hold spaces and parentheses
    fields = raw[end + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            state=fields[0].decode("ascii", "replace"),
            start_ticks=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


@functools.cache
def boot_id() -> str:
    """This boot's id (``""`` where the system does not say): start times are per boot."""
    raw = _read(f"{_PROC}/sys/kernel/random/boot_id", 64)
    return raw.decode("ascii", "replace").strip() if raw else ""


def new_tag() -> str:
    """A fresh tag for one child and its descendants."""
    return secrets.token_hex(16)


def tag_entry(tag: str) -> bytes:
    """The environment entry that carries ``tag``."""
    return f"{TAG_VARIABLE}={tag}".encode()


@dataclass(frozen=True, slots=True)
class SpawnedProcess:
    """A child as it was started: what names it and its descendants across pid reuse.

    ``start_ticks`` is ``None`` when the child was gone before it could be read.
    """

    pid: int
    pgid: int
    start_ticks: int | None
    boot_id: str
    tag: str


def spawned(pid: int, tag: str) -> SpawnedProcess:
    """The identity of the child ``pid`` that was just started with ``tag``."""
    st = read_stat(pid)
    return SpawnedProcess(
        pid=pid,
        pgid=st.pgid if st else pid,
        start_ticks=st.start_ticks if st else None,
        boot_id=boot_id(),
        tag=tag,
    )


def _pids() -> list[int]:
    try:
        names = os.listdir(_PROC)  # noqa: PTH208 - a hot path: no Path per process
    except OSError:  # no /proc: nothing can be found
        return []
    return [int(n) for n in names if n.isdigit()]


def _number(path: str) -> int | None:
    raw = _read(path, 64)
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def _forks() -> int | None:
    """Processes created since boot (``/proc/stat``), in every namespace."""
    raw = _read(f"{_PROC}/stat", 1 << 16)
    start = raw.find(b"\nprocesses ") if raw else -1
    if raw is None or start < 0:
        return None
    try:
        return int(raw[start + 11 : raw.index(b"\n", start + 1)])
    except ValueError:
        return None


@functools.cache
def _pid_max() -> int:
    return _number(f"{_PROC}/sys/kernel/pid_max") or 32768


_RESERVED_PIDS = 300  # pids wrap around to this, not to 1


@dataclass(frozen=True, slots=True)
class Mark:
    """A point in the process table's history: what was started after it is findable
    from the pids handed out since (see :func:`mark`)."""

    last_pid: int | None
    forks: int | None


def mark() -> Mark:
    """Now, in the process table's history (take it before starting a child)."""
    return Mark(_number(f"{_PROC}/sys/kernel/ns_last_pid"), _forks())


def _since(after: Mark) -> Callable[[int], bool] | None:
    """Whether a pid may have been handed out after ``after``; ``None``: any may."""
    now = Mark(_number(f"{_PROC}/sys/kernel/ns_last_pid"), _forks())
    return pid_window(after, now, _pid_max())


def pid_window(before: Mark, now: Mark, pid_max: int) -> Callable[[int], bool] | None:
    """Whether a pid may have been handed out between ``before`` and ``now`` (pure).

    Pids are handed out in increasing order and wrap around below ``pid_max``: while
    fewer processes were created than there are pids, the new ones lie between the two
    last pids, around the wrap if the counter passed it. ``None``: any pid may be new
    (the counter may have gone all the way round, or the system did not say).
    """
    lo, hi, forks_before, forks_now = before.last_pid, now.last_pid, before.forks, now.forks
    if lo is None or hi is None or forks_before is None or forks_now is None:
        return None
    if forks_now - forks_before >= pid_max - _RESERVED_PIDS:
        return None
    if lo <= hi:
        return lambda pid: lo < pid <= hi
    return lambda pid: pid > lo or pid <= hi


@functools.cache
def _start_of(pid: int) -> int:
    st = read_stat(pid)
    return st.start_ticks if st else 0


def _ancestors() -> frozenset[int]:
    """This process and its ancestors: never stopped (a loop run by an agent of its own)."""
    return _lineage(os.getpid())


@functools.cache
def _lineage(pid: int) -> frozenset[int]:
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = read_stat(pid)
        pid = st.ppid if st else 0
    return frozenset(out)


def processes(since_ticks: int | None = None, after: Mark | None = None) -> Iterator[ProcStat]:
    """Every live process (no zombie) started at or after ``since_ticks`` (and after
    ``after``), but this process and its ancestors."""
    skip = _ancestors()
    floor = since_ticks or 0
    new = _since(after) if after is not None else None
    for pid in _pids():
        if pid in skip or (new is not None and not new(pid)):
            continue
        st = read_stat(pid)
        if st is not None and st.state != "Z" and st.start_ticks >= floor:
            yield st


def carrying(st: ProcStat, entries: Collection[bytes]) -> bool:
    """Whether the process's environment holds one of ``entries`` (``NAME=value``)."""
    raw = _read(f"{_PROC}/{st.pid}/environ", 1 << 22)
    if not raw:  # gone, not ours to read, or a kernel thread
        return False
    block = b"\0" + raw + (b"" if raw.endswith(b"\0") else b"\0")
    return any(b"\0" + entry + b"\0" in block for entry in entries)


def _open_verified(st: ProcStat) -> int | None:
    """A pidfd of the process ``st`` names, if it is still that process (and alive)."""
    try:
        fd = os.pidfd_open(st.pid)
    except (OSError, AttributeError):  # gone, or no pidfds here
        return None
    now = read_stat(st.pid)
    if now is None or now.start_ticks != st.start_ticks or now.state == "Z":
        os.close(fd)
        return None
    return fd


def _exited(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


async def _wait_exited(fds: Sequence[int], limit: float) -> None:
    with anyio.move_on_after(limit):
        for fd in fds:
            if not _exited(fd):
                await anyio.wait_readable(fd)


async def stop_processes(
    find: Callable[[], list[ProcStat]],
    *,
    grace: float,
    wait: float,
) -> list[int]:
    """Stop every process ``find`` returns; return their pids.

    Each gets SIGTERM and up to ``grace`` seconds to exit (``grace`` 0: no SIGTERM),
    then SIGKILL and up to ``wait`` seconds. A process is signalled only if it is still
    the one found (same pid, same start time, through a pidfd). ``find`` runs again
    after each round, for what was forked meanwhile (a few rounds at most). Nothing is
    reaped here: a child of this process is its waiter's to reap (its exit status is
    its waiter's), anything else its parent's or init's.
    """
    stopped: list[int] = []
    with anyio.CancelScope(shield=True):
        for _ in range(_ROUNDS):
            found = {st.pid: st for st in find() if st.pid not in stopped}
            fds = {pid: fd for pid, st in found.items() if (fd := _open_verified(st)) is not None}
            if not fds:
                break
            try:
                steps = [(signal.SIGKILL, wait)]
                if grace > 0:
                    steps.insert(0, (signal.SIGTERM, grace))
                for sig, limit in steps:
                    live = [fd for fd in fds.values() if not _exited(fd)]
                    for fd in live:
                        with contextlib.suppress(OSError):  # exited meanwhile
                            signal.pidfd_send_signal(fd, sig)
                    await _wait_exited(live, limit)
            finally:
                for fd in fds.values():
                    os.close(fd)
            stopped += fds
    return stopped


def own_start_ticks() -> int:
    """This process's start time: no child of it started earlier."""
    return _start_of(os.getpid())
