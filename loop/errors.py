"""One exception tree for hatloop.

::

    LoopError                       base; ``exit_code`` says how the CLI ends
    ├── InputError                  bad input from a user (exit 2)
    │   ├── UsageError              bad command-line arguments
    │   ├── ConfigError             a config or hat file: names the file and the key
    │   ├── PathError               a path built from input leaves its root
    │   ├── StoreError              a state file cannot be read or parsed: names it
    │   └── RecordingError          a recording cannot be read: names the file and line
    ├── ToolError                   a tool call failed: ``code``, ``message``, ``details``
    ├── SessionError                a session cannot run (locked, corrupt journal) (exit 2)
    ├── BackendError                a backend could not run an iteration: names the hat
    │   └── BackendUnavailable      the backend's program is missing (fatal for the run)
    └── ReplayDivergence            a replay differs from its recording (exit 4)

Foreign errors are translated at the edge with ``raise ... from``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Exit codes, documented in the README. Distinct per outcome.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_DIVERGED = 4
EXIT_INTERRUPTED = 130


class LoopError(Exception):
    """Base of every error hatloop raises on purpose."""

    exit_code: int = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(LoopError):
    """Bad input: arguments, files, config, recordings."""

    exit_code = EXIT_USAGE


class UsageError(InputError):
    """Bad command-line arguments."""


class ConfigError(InputError):
    """A config or hat file is invalid; the message names the file and the key."""

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


class StoreError(InputError):
    """A state file cannot be read or parsed. It is never treated as empty."""

    def __init__(self, message: str, *, file: Path | str):
        super().__init__(f"{file}: {message}")
        self.file = str(file)


class RecordingError(InputError):
    """A recording cannot be read; names the file and the line."""

    def __init__(self, message: str, *, file: Path | str, line: int | None = None):
        where = f"{file}:{line}" if line is not None else f"{file}"
        super().__init__(f"{where}: {message}")
        self.file = str(file)
        self.line = line


class ToolError(LoopError):
    """A tool call failed in a way the caller (often a model) can act on.

    Serialised as ``{"error": {"code": ..., "message": ..., "details": ...}}``.
    """

    exit_code = EXIT_USAGE

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The structured error shape shared by the CLI, MCP and the bus."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            err["details"] = self.details
        return {"error": err}


class SessionError(LoopError):
    """A session cannot be run or read: locked by a live process, corrupt journal."""

    exit_code = EXIT_USAGE


class BackendError(LoopError):
    """A backend failed to run an iteration; names the hat."""

    def __init__(self, message: str, *, hat: str | None = None) -> None:
        super().__init__(f"hat {hat!r}: {message}" if hat else message)
        self.hat = hat


class BackendUnavailable(BackendError):
    """The backend's program is not installed; the run cannot go on."""


class ReplayDivergence(LoopError):
    """A replay did something other than its recording."""

    exit_code = EXIT_DIVERGED
