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
    _route_stdlib_logging()


def _route_stdlib_logging() -> None:
    """Libraries' standard-library logs (the MCP SDK, uvicorn, httpx) go through structlog,
    warnings and worse only, so stderr keeps one format and no chatter.

    The MCP SDK calls ``logging.basicConfig(level=INFO)`` when a server is built, which
    does nothing once the root logger has a handler: this one.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ToStructlog)]:
        root.removeHandler(handler)
    root.addHandler(_ToStructlog())
    root.setLevel(logging.WARNING)


class _ToStructlog(logging.Handler):
    """Hands a standard-library record to structlog (its logger name, level and message)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            logger = structlog.get_logger(record.name)
            if record.exc_info:
                logger.log(record.levelno, record.getMessage(), exc_info=record.exc_info)
            else:
                logger.log(record.levelno, record.getMessage())
        except Exception:  # a logging failure must never break the caller
            self.handleError(record)


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it per test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
