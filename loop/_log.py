"""Logging: structlog to stderr; a console renderer on a terminal, JSON lines otherwise."""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

import structlog

__all__ = ["configure_logging"]

LogFormat = Literal["auto", "console", "json"]


def configure_logging(fmt: LogFormat = "auto", *, level: int = logging.INFO) -> None:
    """Send structlog output to stderr; ``auto`` picks console on a TTY (not in CI)."""
    if fmt == "auto":
        interactive = sys.stderr.isatty() and not os.environ.get("CI")
        fmt = "console" if interactive else "json"
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso" if fmt == "json" else "%H:%M:%S"),
    ]
    if fmt == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        # keys in the order they are given (iteration, hat, status...), not sorted
        processors.append(
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(), sort_keys=False)
        )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # PrintLogger needs only write() and flush(); TextIO is stricter than it uses.
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it per test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
