"""The signals that stop a command gracefully, as Ctrl-C does.

SIGINT (Ctrl-C) and SIGTERM (``kill``, a CI job's timeout) always; SIGHUP (the terminal
closed, an SSH connection dropped) when it would otherwise kill the process: not when the
command was started with it ignored (``nohup``, how a person asks for a run to outlive
its terminal), nor when a program that runs the loop in-process handles it itself.
Without this, a hang-up would kill hatloop outright and leave its agents running, and
spending, with no one to stop them.

After a hang-up the terminal is gone: writing to it fails (EIO). :func:`hung_up` points
the standard streams that were a terminal at ``/dev/null``, so the graceful stop (the
agents stopped, the journal's end, the summary) is not cut short by a failed write; a
stream redirected to a file still gets its lines.
"""

from __future__ import annotations

import os
import signal

__all__ = ["early_signals", "early_stop", "hung_up", "stop_signals", "take_early"]

_terminals = [fd for fd in (1, 2) if os.isatty(fd)]  # at start-up, before any hang-up


def stop_signals() -> tuple[signal.Signals, ...]:
    """SIGINT, SIGTERM, and SIGHUP if its action is still the default (to die), or the
    command line's own while it starts (:func:`take_early`)."""
    stops = (signal.SIGINT, signal.SIGTERM)
    if signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, early_stop):
        return stops  # ignored (nohup), or handled by the program running the loop
    return (*stops, signal.SIGHUP)


def early_stop(signum: int, frame: object) -> None:
    """While a command starts, SIGTERM and SIGHUP stop it as Ctrl-C does (a
    :class:`KeyboardInterrupt`), not by the signal's death; after a hang-up the streams
    that were the terminal are pointed at ``/dev/null`` first."""
    hung_up(signum)
    raise KeyboardInterrupt


def early_signals() -> list[signal.Signals]:
    """The signals :func:`take_early` takes: SIGTERM, and SIGHUP unless it is ignored
    (``nohup``)."""
    taken = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        taken.append(signal.SIGHUP)
    return taken


def take_early(signals: list[signal.Signals]) -> None:
    """Make ``signals`` (:func:`early_signals`) :func:`early_stop`'s until the command
    takes the signals it handles. One may come while they are taken (the first is
    already caught as the second is set): the caller catches the KeyboardInterrupt
    around this call too."""
    for signum in signals:
        signal.signal(signum, early_stop)


def hung_up(signum: int) -> None:
    """On SIGHUP, point the standard streams that were a terminal at ``/dev/null``."""
    if signum != signal.SIGHUP or not _terminals:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in _terminals:
            os.dup2(null, fd)
    finally:
        os.close(null)
