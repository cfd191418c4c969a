"""How a hatloop process ends: every exit code, and what each termination reason exits with.

::

    0    completed
    1    failed (repeated failed iterations, unrouted event, backend unavailable)
    2    bad usage or input (arguments, config, files, tool errors)
    3    limit reached (max iterations, max runtime, stale loop, nothing left to do)
    4    replay diverged from its recording
    130  interrupted (SIGINT, SIGTERM or SIGHUP)

An error's exit code is its class's (:mod:`loop.errors` draws them in its tree); a
session's is its termination reason's (:data:`REASON_EXIT`). A new termination reason
maps into these codes; a reason this table does not name exits with :data:`EXIT_FAILED`.
This module imports nothing, so ``emit`` (the light command) uses it too.

>>> exit_code_for("max_runtime")
3
>>> exit_code_for("completed"), exit_code_for("interrupted")
(0, 130)
"""

from __future__ import annotations

__all__ = [
    "EXIT_DIVERGED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_LIMIT",
    "EXIT_OK",
    "EXIT_USAGE",
    "HELP",
    "REASONS_FINAL",
    "REASON_COMPLETED",
    "REASON_EXIT",
    "exit_code_for",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_DIVERGED = 4
EXIT_INTERRUPTED = 130

# The termination reason of a loop that saw its completion event.
REASON_COMPLETED = "completed"

# The termination reasons of a session that has ended for good: it is never resumed.
REASONS_FINAL = (REASON_COMPLETED, "cancelled")

# Termination reasons (the journal's session.end) and the exit code each ends with.
REASON_EXIT: dict[str, int] = {
    REASON_COMPLETED: EXIT_OK,
    "cancelled": EXIT_OK,
    "max_iterations": EXIT_LIMIT,
    "max_runtime": EXIT_LIMIT,
    "budget_exhausted": EXIT_LIMIT,
    "rate_limited": EXIT_LIMIT,
    "stale_loop": EXIT_LIMIT,
    "no_pending_events": EXIT_LIMIT,
    "max_consecutive_failures": EXIT_FAILED,
    "unrouted_event": EXIT_FAILED,
    "backend_unavailable": EXIT_FAILED,
    "error": EXIT_FAILED,
    "interrupted": EXIT_INTERRUPTED,
}

# The CLI's ``--help`` epilog: the table above, for a person.
HELP = """exit codes:
  0    completed
  1    failed (repeated failed iterations, unrouted event, backend unavailable)
  2    bad usage or input (arguments, config, files, tool errors)
  3    limit reached (max iterations, max runtime, stale loop, nothing left to do)
  4    replay diverged from its recording
  130  interrupted (SIGINT, SIGTERM or SIGHUP)
"""


def exit_code_for(reason: str) -> int:
    """The process exit code for a termination reason (:data:`EXIT_FAILED` if unknown)."""
    return REASON_EXIT.get(reason, EXIT_FAILED)
