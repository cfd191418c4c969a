"""The theme tools of seed 001, registered once for the CLI, MCP and the bus.

:data:`HEARTBEAT` is the loop's own: every iteration starts with it (see
:mod:`loop.themes.extension`), so the heartbeat, like any tool call, is part of the
iteration (journaled, replayed). It is not served to agents.
"""

from __future__ import annotations

from loop.errors import LoopError, ToolError
from loop.themes.feedback import interrupt_name
from loop.themes.models import (
    EndThemeInput,
    EndThemeOutput,
    FeedbackInput,
    FeedbackOutput,
    HeartbeatInput,
    HeartbeatOutput,
    Interrupt,
    NoInput,
    PreviewOutput,
    StartThemeInput,
    StartThemeOutput,
    StatusOutput,
)
from loop.themes.ops import Operations
from loop.themes.service import ThemeService
from loop.tools.base import BusRequest, BusService, Tool, ToolContext

__all__ = ["BUS", "DOMAIN", "HEARTBEAT", "OWN_TOOLS", "TOOLS", "service_for"]

DOMAIN = "themes"


def service_for(ctx: ToolContext) -> ThemeService:
    """The service over ``ctx.workspace``; ``ctx.state["themes"]`` may hold an Operations."""
    ops = ctx.state.get(DOMAIN)
    return ThemeService(
        ctx.workspace,
        ops if isinstance(ops, Operations) else None,
        trusted_root=ctx.trusted_root(ctx.workspace),
    )


def _preview(ctx: ToolContext, _: NoInput) -> PreviewOutput:
    return service_for(ctx).preview()


def _start(ctx: ToolContext, inp: StartThemeInput) -> StartThemeOutput:
    return service_for(ctx).start(inp)


def _end(ctx: ToolContext, inp: EndThemeInput) -> EndThemeOutput:
    return service_for(ctx).end(inp)


def _feedback(ctx: ToolContext, inp: FeedbackInput) -> FeedbackOutput:
    return service_for(ctx).process_feedback(inp.type)


def _status(ctx: ToolContext, _: NoInput) -> StatusOutput:
    return service_for(ctx).status()


def _heartbeat(ctx: ToolContext, inp: HeartbeatInput) -> HeartbeatOutput:
    """Write the next heartbeat ID (from the call's time), undo a start killed half-way,
    take every interrupt item (unless told not to); a failure while taking them ends the
    list (``error``)."""
    service = service_for(ctx)
    call = ctx.new_id("heartbeat") if ctx.call is not None else None
    heartbeat_id = service.heartbeat(ctx.local_now(), call)
    repaired = service.repair()
    out = HeartbeatOutput(
        message=f"heartbeat {heartbeat_id}", heartbeatId=heartbeat_id, repaired=repaired
    )
    try:
        while inp.interrupts:
            item = service.process_feedback("feedbackbox", interrupts_only=True)
            if not item.found or item.filename is None:
                break
            out.interrupts.append(
                Interrupt(
                    name=interrupt_name(item.filename),
                    file=item.filename,
                    content=item.content or "",
                )
            )
    except LoopError as exc:
        err = exc if isinstance(exc, ToolError) else ToolError("theme_error", exc.message)
        out.error = err.to_dict()["error"]
    return out


HEARTBEAT = Tool(
    name="theme_heartbeat",
    domain=DOMAIN,
    description=(
        "The loop's heartbeat at the start of every iteration: the next heartbeat ID, "
        "repairs, and the interrupt feedback items it takes. Not served to agents over "
        "MCP or the bus; `theme heartbeat` calls it without taking the interrupts."
    ),
    input_model=HeartbeatInput,
    output_model=HeartbeatOutput,
    func=_heartbeat,
)

# the tools the loop and the CLI call that no agent is served: a recorded call may name one
OWN_TOOLS: list[Tool] = [HEARTBEAT]


TOOLS: list[Tool] = [
    Tool(
        name="preview_next_theme",
        domain=DOMAIN,
        description=(
            "Show the next theme candidate in themebox without changing anything.\n"
            "Returns the first .md file by name without a draft./processed. prefix (the "
            "oldest when names start with a date or a number): its name, its content and "
            "how many more wait. Safe to call any number of times; start it with "
            "start_theme."
        ),
        input_model=NoInput,
        output_model=PreviewOutput,
        func=_preview,
        read_only=True,
    ),
    Tool(
        name="start_theme",
        domain=DOMAIN,
        description=(
            "Start a theme (or a subtheme), all or nothing.\n"
            "Checks the target file, the heartbeat cooldown (one theme start or end per "
            "heartbeat), writes the start history, creates the theme directory and marks "
            "the themebox file processed. On failure nothing is left changed and the error "
            "names the stage. Give parentThemeStartId and parentThemeDirectoryPart for a "
            "subtheme."
        ),
        input_model=StartThemeInput,
        output_model=StartThemeOutput,
        func=_start,
    ),
    Tool(
        name="end_theme",
        domain=DOMAIN,
        description=(
            "End the current theme (or subtheme) with its reason and achievements.\n"
            "Writes the end history; refused in the heartbeat that already started or "
            "ended a theme. A new theme may start only at a later heartbeat."
        ),
        input_model=EndThemeInput,
        output_model=EndThemeOutput,
        func=_end,
    ),
    Tool(
        name="check_and_process_item",
        domain=DOMAIN,
        description=(
            'Take the first unprocessed feedback item by name (type "feedbackbox").\n'
            "Returns its content and marks it processed. Themes are not handled here: use "
            "preview_next_theme and start_theme."
        ),
        input_model=FeedbackInput,
        output_model=FeedbackOutput,
        func=_feedback,
    ),
    Tool(
        name="get_theme_status",
        domain=DOMAIN,
        description=(
            "Show the active theme and subthemes, the heartbeat and the counts.\n"
            "Derived from the history files; read-only."
        ),
        input_model=NoInput,
        output_model=StatusOutput,
        func=_status,
        read_only=True,
    ),
]

# How hats request these tools with events (loop.tools.bus serves it); the answers go
# back to the requesting hat. theme.interrupt is the heartbeat's notice, not a request.
BUS = BusService(
    prefix="theme",
    source=DOMAIN,
    tools=TOOLS,
    requests=(
        BusRequest("preview", "preview_next_theme", "previewed"),
        BusRequest("start", "start_theme", "started"),
        BusRequest("end", "end_theme", "ended"),
    ),
    notices=("interrupt",),
)
