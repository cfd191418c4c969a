"""One exception tree for hatloop, each leaf with its code and its exit code.

::

    class                     code                  exit  what went wrong
    LoopError                 loop_error            1     base of every error hatloop raises
    ├── InputError            invalid_input         2     bad input from a user or an agent
    │   ├── UsageError        usage_error           2     bad command-line arguments, or API misuse
    │   ├── ConfigError       config_error          2     a config or hat file: names file and key
    │   ├── PathError         invalid_path          2     a path built from input leaves its root
    │   ├── StoreError        store_error           2     a state file cannot be read: names it
    │   └── RecordingError    recording_error       2     a recording cannot be read: file, line
    ├── ToolError             <domain's>            2     a tool refused a call: ``details`` too
    ├── SessionError          session_error         2     a session cannot run (locked, corrupt)
    │   └── JournalWriteError  journal_write_failed  1     its journal cannot take a record
    ├── BackendError          backend_error         1     a backend could not run an iteration
    │   └── BackendUnavailable  backend_unavailable  1     its program is missing (fatal)
    ├── BusOverflow           bus_overflow          1     a publish cascade outgrew the bus
    ├── RecorderClosed        recorder_closed       1     a recorder used after its close
    ├── InternalError         internal_error        1     a bug, reported without its text
    └── ReplayDivergence      replay_divergence     4     a replay differs from its recording

The ``code`` is what an agent reads; each edge translates an error once, from these
attributes alone: the command line prints ``error: ...`` and exits with
:attr:`LoopError.exit_code` (the codes are :mod:`loop.exits`'), and the MCP server and
the bus reply with :meth:`LoopError.to_dict`. A :class:`ToolError` carries a code of its
domain's (``task_not_found``, ``cooldown``...); every code is listed in the docs' error
table. Foreign errors are translated where they are caught, with ``raise ... from``.

>>> StoreError("invalid JSON", file="tasks.json").to_dict()
{'error': {'code': 'store_error', 'message': 'tasks.json: invalid JSON'}}
>>> ToolError("task_not_found", "task 'x' not found", details={"id": "x"}).exit_code
2
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from loop.exits import EXIT_DIVERGED, EXIT_FAILED, EXIT_USAGE

__all__ = [
    "BackendError",
    "BackendUnavailable",
    "BusOverflow",
    "ConfigError",
    "InputError",
    "InternalError",
    "JournalWriteError",
    "LoopError",
    "PathError",
    "RecorderClosed",
    "RecordingError",
    "ReplayDivergence",
    "SessionError",
    "StoreError",
    "ToolError",
    "UsageError",
]


class LoopError(Exception):
    """Base of every error hatloop raises on purpose.

    Attributes:
        code: what went wrong, for a program or an agent (``store_error``).
        exit_code: how the command line ends on it (:mod:`loop.exits`).
        message: one line for a person; ``str(error)`` is the same.
        details: structured context for an agent, or ``None``.
    """

    code: str = "loop_error"
    exit_code: ClassVar[int] = EXIT_FAILED
    details: Any = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """The structured error shared by the CLI's ``--json``, MCP and the bus:
        ``{"error": {"code", "message", "details"}}`` (``details`` only when set)."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            err["details"] = self.details
        return {"error": err}


class InputError(LoopError):
    """Bad input: arguments, files, config, recordings, a tool's arguments."""

    code = "invalid_input"
    exit_code = EXIT_USAGE


class UsageError(InputError):
    """Bad command-line arguments, or a function of the API called where it cannot run."""

    code = "usage_error"


class ConfigError(InputError):
    """A config or hat file is invalid; the message names the file and the key."""

    code = "config_error"

    def __init__(self, message: str, *, file: Path | str | None = None, key: str | None = None):
        where = ""
        if file is not None:
            where = f"{file}"
            if key:
                where += f": {key}"
            where += ": "
        super().__init__(f"{where}{message}")
        self.file = str(file) if file is not None else None
        self.key = key


class PathError(InputError):
    """A path built from input would leave its root, or is not a plain name."""

    code = "invalid_path"


class StoreError(InputError):
    """A state file cannot be read or parsed. It is never treated as empty."""

    code = "store_error"

    def __init__(self, message: str, *, file: Path | str):
        super().__init__(f"{file}: {message}")
        self.file = str(file)


class RecordingError(InputError):
    """A recording cannot be read; names the file and the line."""

    code = "recording_error"

    def __init__(self, message: str, *, file: Path | str, line: int | None = None):
        where = f"{file}:{line}" if line is not None else f"{file}"
        super().__init__(f"{where}: {message}")
        self.file = str(file)
        self.line = line


class ToolError(LoopError):
    """A tool call failed in a way the caller (often a model) can act on.

    Its ``code`` is the domain's, chosen where it is raised (``task_not_found``).
    """

    exit_code = EXIT_USAGE

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class SessionError(LoopError):
    """A session cannot be run or read: locked by a live process, corrupt journal."""

    code = "session_error"
    exit_code = EXIT_USAGE


class JournalWriteError(SessionError):
    """A session's journal cannot take a record (a full disk, a file too large): the
    session ends with the reason ``error``, and the run fails with that reason's exit
    code, not as bad input."""

    code = "journal_write_failed"
    exit_code = EXIT_FAILED


class BackendError(LoopError):
    """A backend failed to run an iteration; names the hat."""

    code = "backend_error"

    def __init__(self, message: str, *, hat: str | None = None) -> None:
        super().__init__(f"hat {hat!r}: {message}" if hat else message)
        self.hat = hat


class BackendUnavailable(BackendError):
    """The backend's program is not installed; the run cannot go on."""

    code = "backend_unavailable"


class BusOverflow(LoopError):
    """More events were queued in one publish cascade than the bus buffers."""

    code = "bus_overflow"


class RecorderClosed(LoopError):
    """The recorder was used after it was closed, or attached twice (it is one-shot)."""

    code = "recorder_closed"


class InternalError(LoopError):
    """A bug: an edge reports it with this, and logs the original with its traceback."""

    code = "internal_error"


class ReplayDivergence(LoopError):
    """A replay did something other than its recording."""

    code = "replay_divergence"
    exit_code = EXIT_DIVERGED
