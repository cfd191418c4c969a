"""Logging, and what hatloop may do to a terminal: colours and the live status line.

Logs are structlog lines on stderr. Their format (``--log-format``): ``console`` lines for
people, always, unless JSON lines are asked for with ``--log-format json`` or the
environment variable ``HATLOOP_LOG_FORMAT=json`` (a CI job or a log shipper that wants
them sets it once). ``CI`` alone never switches to JSON: CI logs are read by people. It
turns the live line off, and colours follow the usual rules.

Colours (``--color auto|always|never``): ``auto`` colours a terminal, unless ``NO_COLOR``
is set or ``TERM=dumb``; ``always`` colours even a pipe or a file (and wins over
``NO_COLOR``, as a flag does); ``never`` never.

structlog (with the asyncio it imports) takes about 25 ms to import, so a command whose
modules may never log (the tool commands) calls :func:`defer_logging` instead of
:func:`configure_logging`, and modules that can do without it at import time take their
logger from :func:`get_logger`: structlog is imported, and configured as deferred, the
first time such a logger is used. Logs never go to stdout either way.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TextIO, get_args

if TYPE_CHECKING:
    import structlog

__all__ = [
    "ColorChoice",
    "configure_logging",
    "defer_logging",
    "get_logger",
    "live_line_allowed",
    "log_format",
    "use_colors",
]

LogFormat = Literal["auto", "console", "json"]
ColorChoice = Literal["auto", "always", "never"]
LOG_FORMAT_ENV = "HATLOOP_LOG_FORMAT"

_deferred: LogFormat | None = None  # set by defer_logging, until a logger is first used


def defer_logging(fmt: LogFormat = "auto") -> None:
    """Configure logging with ``fmt`` when a :func:`get_logger` logger is first used."""
    global _deferred  # noqa: PLW0603 - one process-wide logging setup
    _deferred = fmt


def get_logger(name: str) -> Any:
    """A structlog logger for ``name`` that imports structlog only when it first logs."""
    return _LazyLogger(name)


class _LazyLogger:
    """Forwards every call to ``structlog.get_logger(name)``, imported on first use."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        global _deferred
        if _deferred is not None:
            fmt, _deferred = _deferred, None
            configure_logging(fmt)
        import structlog  # noqa: PLC0415 - start-up speed, see the module docstring

        return getattr(structlog.get_logger(self._name), method)


def log_format(fmt: LogFormat = "auto", env: Mapping[str, str] | None = None) -> LogFormat:
    """The format ``auto`` stands for: ``HATLOOP_LOG_FORMAT`` if it names one, else console."""
    if fmt != "auto":
        return fmt
    asked = (os.environ if env is None else env).get(LOG_FORMAT_ENV, "").strip().lower()
    return "json" if asked == "json" else "console"


def use_colors(
    choice: ColorChoice = "auto",
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Whether to colour what goes to ``stream`` (default: stderr)."""
    if choice != "auto":
        return choice == "always"
    env = os.environ if env is None else env
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    return _isatty(sys.stderr if stream is None else stream)


def live_line_allowed(
    choice: ColorChoice = "auto",
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Whether the live status line may be drawn on ``stream`` (default: stderr): a
    terminal that can redraw a line (not ``TERM=dumb``), not in CI (``CI`` set), and
    colour not turned off (``--color never``, or ``NO_COLOR`` unless ``--color always``)."""
    env = os.environ if env is None else env
    if choice == "never" or env.get("TERM") == "dumb" or env.get("CI"):
        return False
    if choice == "auto" and env.get("NO_COLOR"):
        return False
    return _isatty(sys.stderr if stream is None else stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False


def configure_logging(
    fmt: LogFormat = "auto", *, level: int = logging.INFO, color: ColorChoice = "auto"
) -> None:
    """Send structlog output to stderr, as :func:`log_format` and :func:`use_colors` say.

    Raises:
        ValueError: ``fmt`` is not ``auto``, ``console`` or ``json``.
    """
    import structlog  # noqa: PLC0415 - start-up speed, see the module docstring

    if fmt not in get_args(LogFormat):
        raise ValueError(f"log format {fmt!r}: expected 'auto', 'console' or 'json'")
    asked = os.environ.get(LOG_FORMAT_ENV, "").strip() if fmt == "auto" else ""
    fmt = log_format(fmt)
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso" if fmt == "json" else "%H:%M:%S"),
    ]
    if fmt == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        # keys in the order they are given (iteration, hat, status...), not sorted; plain
        # tracebacks (structlog would pick rich's boxed ones, rich being installed)
        processors.append(
            structlog.dev.ConsoleRenderer(
                colors=use_colors(color),
                sort_keys=False,
                exception_formatter=structlog.dev.plain_traceback,
            )
        )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # PrintLogger needs only write() and flush(); TextIO is stricter than it uses.
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    _route_stdlib_logging()
    if asked and asked.lower() not in get_args(LogFormat):  # "auto" too: its own default
        structlog.get_logger("loop").warning(
            f"{LOG_FORMAT_ENV} is not a log format (console or json): console is used",
            value=asked,
        )


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
            import structlog  # noqa: PLC0415 - imported already: configure_logging did

            logger = structlog.get_logger(record.name)
            if record.exc_info:
                logger.log(record.levelno, record.getMessage(), exc_info=record.exc_info)
            else:
                logger.log(record.levelno, record.getMessage())
        except Exception:  # a logging failure must never break the caller
            self.handleError(record)


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (test runners swap it per test, and the
    live line routes it above itself while it is drawn)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
