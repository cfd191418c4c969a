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

__all__ = ["hung_up", "stop_signals"]

_terminals = [fd for fd in (1, 2) if os.isatty(fd)]  # at start-up, before any hang-up


def stop_signals() -> tuple[signal.Signals, ...]:
    """SIGINT, SIGTERM, and SIGHUP if its action is still the default (to die)."""
    stops = (signal.SIGINT, signal.SIGTERM)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL:
        return stops  # ignored (nohup), or handled by the program running the loop
    return (*stops, signal.SIGHUP)


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
