"""The session tools: ``emit_event`` and ``get_session_status``, for agents inside a loop.

``emit_event`` is the MCP form of ``python -m loop emit``: it appends one line to the
running iteration's events file (``LOOP_EVENTS_FILE``), which the engine reads when
the iteration ends, so the event is published then, with the hat as its source.
``get_session_status`` derives a session's state from its files, like ``loop status``.

Neither is journaled as a tool call of the iteration (``journaled=False``): they are the
session's own channel, not tool state. The event ``emit_event`` appends is journaled as
one of the iteration's events; ``get_session_status`` only reads the journal.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loop import topics
from loop._fs import require_folder
from loop.emit import append_event
from loop.errors import InputError, PathError, SessionError, ToolError
from loop.locations import ENV_SESSION_ID
from loop.session.store import SessionStatus, find_session, latest_session, session_status
from loop.tools.base import Tool, ToolContext
from loop.topics import is_valid_topic

__all__ = [
    "DOMAIN",
    "TOOLS",
    "EmitEventInput",
    "EmitEventOutput",
    "SessionStatusInput",
    "emit_event",
    "get_session_status",
]

DOMAIN = "session"

JsonPayload = str | int | float | bool | dict[str, Any] | list[Any] | None


class EmitEventInput(BaseModel):
    """Arguments of ``emit_event``."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(
        description="dot-separated topic, e.g. plan.ready (letters, digits, '_' or '-')",
        json_schema_extra={"pattern": topics.PATTERN},
    )
    payload: JsonPayload = Field(
        default="", description="the event's payload: text, or any JSON value"
    )
    target: str | None = Field(
        default=None, min_length=1, description="address the event to this hat only"
    )


class EmitEventOutput(BaseModel):
    """Result of ``emit_event``."""

    topic: str
    payload: JsonPayload = ""
    target: str | None = None
    events_file: str = Field(description="the iteration's events file the event went to")
    message: str


class SessionStatusInput(BaseModel):
    """Arguments of ``get_session_status``."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(
        default=None,
        description="the session; unset: the running session, else the most recent one",
    )


def emit_event(ctx: ToolContext, inp: EmitEventInput) -> EmitEventOutput:
    """``emit_event``: append an event to the running iteration's events file.

    Raises:
        ToolError: ``invalid_topic``; ``no_session`` when no iteration is running;
            ``emit_failed`` when the events file cannot be written.
    """
    if not is_valid_topic(inp.topic):
        raise ToolError(
            "invalid_topic",
            f"invalid topic {inp.topic!r}: {topics.RULE}",
            details={"topic": inp.topic, "pattern": topics.PATTERN},
        )
    if ctx.events_file is None:
        raise ToolError(
            "no_session",
            "no hatloop iteration is running here (LOOP_EVENTS_FILE is not set): "
            "emit_event works only for an agent inside a loop iteration",
        )
    try:
        folder = ctx.events_file.parent  # written by this process: never through a link
        append_event(
            ctx.events_file, inp.topic, inp.payload, inp.target, root=ctx.trusted_root(folder)
        )
    except OSError as exc:
        raise ToolError(
            "emit_failed",
            f"cannot append to {ctx.events_file}: {exc.strerror or exc}",
            details={"events_file": str(ctx.events_file)},
        ) from exc
    to = f" to hat {inp.target}" if inp.target else ""
    return EmitEventOutput(
        topic=inp.topic,
        payload=inp.payload,
        target=inp.target,
        events_file=str(ctx.events_file),
        message=f"event {inp.topic}{to} is published when this iteration ends",
    )


def _where(ctx: ToolContext, requested: str | None) -> tuple[Path, str | None]:
    """The sessions folder and the session to report (``None``: there is none)."""
    if ctx.session_dir is not None:
        sessions_dir = ctx.session_dir.parent
        return sessions_dir, requested or ctx.session_dir.name
    sessions_dir = ctx.sessions_dir
    latest = requested or os.environ.get(ENV_SESSION_ID)
    return sessions_dir, latest or latest_session(sessions_dir, root=ctx.trusted_root(sessions_dir))


def get_session_status(ctx: ToolContext, inp: SessionStatusInput) -> SessionStatus:
    """``get_session_status``: a session's state, derived from its files on every call.

    Raises:
        ToolError: ``session_error`` when the journal cannot be read; ``invalid_path``
            (from the registry) for a session id that is not a plain name.
    """
    sessions_dir, session_id = _where(ctx, inp.session_id)
    require_folder(sessions_dir, root=ctx.trusted_root(sessions_dir))  # a file there: an error
    if session_id is None:
        return SessionStatus.no_session()
    try:
        root = ctx.trusted_root(sessions_dir)
        if inp.session_id is not None:  # an id, or a unique prefix of one
            session_id = find_session(sessions_dir, session_id, root=root) or session_id
        status = session_status(sessions_dir, session_id, root=root)
    except SessionError as exc:
        raise ToolError("session_error", exc.message, details={"session_id": session_id}) from exc
    except PathError:
        raise
    except InputError as exc:  # a prefix several sessions share
        raise ToolError("ambiguous_id", exc.message, details={"session_id": session_id}) from exc
    return status


TOOLS: list[Tool] = [
    Tool(
        name="emit_event",
        domain=DOMAIN,
        description=(
            "Publish an event from inside the running loop iteration.\n"
            "The event is published when the iteration ends, with your hat as its source, "
            "in the order emitted (before any <event> tags in your final answer). topic is "
            "dot-separated (e.g. plan.ready); payload is text or any JSON value; target "
            "addresses one hat. Publish the completion event only when the whole objective "
            "is done."
        ),
        input_model=EmitEventInput,
        output_model=EmitEventOutput,
        func=emit_event,
        journaled=False,
    ),
    Tool(
        name="get_session_status",
        domain=DOMAIN,
        description=(
            "Show a loop session's state, derived from its files: status (running, "
            "interrupted, completed, failed or not_found), iterations, the last hat, "
            "pending events, why it ended and how to resume it.\n"
            "Without session_id: the running session, else the most recent one. Read-only."
        ),
        input_model=SessionStatusInput,
        output_model=SessionStatus,
        func=get_session_status,
        read_only=True,
        journaled=False,
    ),
]
