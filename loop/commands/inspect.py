"""``loop show`` and ``loop events``: a session from its journal or its recording.

Both take a session id, a session folder, a journal or a recording (default: the most
recent session) and read it through :func:`loop.session.load.load_session`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any

from loop.commands.common import add_path_argument, add_sessions_options, sessions_root
from loop.errors import UsageError
from loop.events import is_valid_pattern
from loop.exits import EXIT_OK
from loop.session.view import (
    EventRow,
    EventView,
    IterationView,
    MarkerView,
    SessionView,
    ToolCallView,
    WaitView,
    event_rows,
    outcome,
)

__all__ = [
    "event_json",
    "iteration_detail",
    "iteration_summary",
    "load_target",
    "register",
    "render_events",
    "render_iteration",
    "render_show",
    "session_summary",
]

CALL_INPUT_CHARS = 120  # of a tool call's input shown on its line
# of a payload kept on a terminal whatever its width: narrower, the row wraps instead
PAYLOAD_MIN_CHARS = 20

TARGET_HELP = "a session id, a session folder, a journal or a recording (default: the most recent)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` and ``events``."""
    s = sub.add_parser(
        "show",
        help="a session at a glance, from its journal or its recording",
        description="Print a session's timeline (one row per iteration) and how it ended, "
        "or with --iteration N that iteration's prompt, output, events, tool calls and "
        "timings. Reads a session id, a journal or a recording.",
    )
    add_path_argument(s, "target", nargs="?", metavar="ID|FILE", help=TARGET_HELP)
    s.add_argument("--iteration", "-i", type=int, metavar="N", help="one iteration in full")
    s.add_argument("--json", action="store_true", help="the same as JSON")
    add_sessions_options(s)
    s.set_defaults(handler=_show)

    e = sub.add_parser(
        "events",
        help="a session's events, from its journal or its recording",
        description="List the events published in a session, in order: the iteration "
        "that published each (0: the loop, before the first), its hat, topic, source, "
        "the iteration that ran on it, and the payload.",
    )
    add_path_argument(e, "target", nargs="?", metavar="ID|FILE", help=TARGET_HELP)
    e.add_argument(
        "--topic", metavar="PATTERN", help="only topics matching PATTERN ('*' = one segment)"
    )
    e.add_argument("--hat", metavar="HAT", help="only events published in HAT's iterations")
    e.add_argument("--iteration", "-i", type=int, metavar="N", help="only iteration N's events")
    e.add_argument("--json", action="store_true", help="JSON lines, one event per line")
    add_sessions_options(e)
    e.set_defaults(handler=_events)


def load_target(args: argparse.Namespace) -> SessionView:
    """The session ``args.target`` names (see :func:`loop.session.load.resolve_session`),
    under the sessions folder of ``args`` (:func:`sessions_root`)."""
    from loop.session.load import load_session, resolve_session  # noqa: PLC0415 - on use

    root, trusted = sessions_root(args)
    return load_session(resolve_session(args.target, root, trusted))


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _check_iteration(view: SessionView, number: int) -> IterationView:
    found = view.iteration(number)
    if found is None:
        have = (
            f"it has iterations 1-{view.iterations[-1].iteration}"
            if view.iterations
            else "it has no iteration"
        )
        raise UsageError(f"iteration {number} is not in session {view.session_id} ({have})")
    return found


# -- show ---------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    view = load_target(args)
    if args.iteration is not None:
        it = _check_iteration(view, args.iteration)
        if args.json:
            _print_json(iteration_detail(it))
        else:
            print(render_iteration(view, it))
        return EXIT_OK
    if args.json:
        _print_json(session_summary(view))
    else:
        print(render_show(view))
    return EXIT_OK


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _tokens(it: IterationView) -> str:
    if it.input_tokens is None and it.output_tokens is None:
        return "-"
    return f"{it.input_tokens or 0}/{it.output_tokens or 0}"


def _end_line(view: SessionView) -> str:
    end = view.end
    if end is None:
        if view.source == "recording":
            head = "(no footer: the recording was cut off)"
        else:
            head = (
                f"(no end record: the session is running, {view.elapsed:.2f}s so far)"
                if view.running
                else "(no end record: its run stopped without one, a kill or a crash; "
                f"{view.elapsed:.2f}s at the last commit)"
            )
    else:
        head = (
            f"{end.reason} after {end.iterations} iteration(s) in {end.elapsed:.2f}s "
            f"(exit {end.exit_code})"
        )
    parts = [head, f"{view.records} records"]
    if view.last_run_records is not None and view.last_run_records != view.records:
        parts[-1] += f" (its last run wrote {view.last_run_records})"
    if view.source == "recording":
        parts.append(f"{view.write_failures} write failure(s)")
        if view.cap_reached:
            parts.append("size cap reached")
    return "  end   " + " · ".join(parts)


def render_show(view: SessionView) -> str:
    """The timeline: where it comes from, one row per iteration, markers, how it ended."""
    if view.source == "recording":
        first = (
            f"  schema {view.schema_version} · hatloop {view.hatloop_version} · Python "
            f"{view.python_version} · started {view.started_at}"
        )
    else:
        first = (
            f"  schema {view.schema_version} · hatloop {view.hatloop_version} · started "
            f"{view.started_at}"
        )
    lines = [
        f"{view.source:<9}  {view.path}",
        first,
        f"  session {view.session_id} · config {view.config_digest[:19]}… · hats "
        f"{', '.join(view.hats)}" + (" · redacted" if view.redacted else ""),
        "",
        f"  {'iter':>4}  {'hat':<14} {'duration':>9}  {'status':<24} {'cost':>9}  "
        f"{'tokens':>11}  events",
    ]
    markers = list(view.markers)

    def flush(upto: int) -> None:
        while markers and markers[0].after <= upto:
            lines.append(_marker_line(markers.pop(0)))

    for it in view.iterations:
        flush(it.iteration - 1)
        status = it.status + (f": {it.reason}" if it.reason else "")
        cost = f"${it.cost_usd:.4f}" if it.cost_usd is not None else "-"
        events = ", ".join(e.topic for e in it.events) or "-"
        if it.ran_with:  # parallel hats: its lane
            events += "  (ran with " + ", ".join(f"#{n}" for n in it.ran_with) + ")"
        lines.append(
            f"  {it.iteration:>4}  {_cell(it.hat, 14):<14} {it.duration:>8.2f}s  "
            f"{_cell(status, 24):<24} {cost:>9}  {_tokens(it):>11}  {events}"
        )
    flush(sys.maxsize)
    lines += ["", _end_line(view)]
    lines += [f"  warning: {w}" for w in view.warnings]
    return "\n".join(lines)


def _marker_line(marker: MarkerView) -> str:
    return f"    --  {marker.kind}: {marker.message}"


def _event_text(event: EventView, *, with_source: bool = True) -> str:
    source = f" from {event.source}" if with_source else ""
    target = f" → {event.target}" if event.target else ""
    return f"{event.topic}{source}{target}: {event.payload_text()}"


def render_iteration(view: SessionView, it: IterationView) -> str:
    """One iteration in full: what ran, why, how it went, then its prompt and output."""
    status = it.status + (f": {it.reason}" if it.reason else "")
    backend = "backend ok" if it.backend_ok else "backend failed"
    if it.exit_code is not None:
        backend += f", exit {it.exit_code}"
    usage = []
    if it.cost_usd is not None:
        usage.append(f"${it.cost_usd:.4f}")
    if it.input_tokens is not None or it.output_tokens is not None:
        usage.append(f"tokens {it.input_tokens or 0} in / {it.output_tokens or 0} out")
    if it.turns is not None:
        usage.append(f"{it.turns} turn(s)")
    lines = [
        f"iteration {it.iteration} of session {view.session_id} · hat {it.hat} (its run "
        f"#{it.activation + 1}) · backend {it.backend or '-'}",
        f"  status      {status} ({backend})" + (" · completed the loop" if it.completed else ""),
        f"  timings     took {it.duration:.3f}s · from {it.started:.3f}s to "
        f"{it.elapsed:.3f}s of the session" + _waited_text(it),
        f"  usage       {' · '.join(usage) or '-'}",
    ]

    def block(title: str, items: list[str]) -> None:
        lines.append(f"  {title:<11} {items[0] if items else '-'}")
        lines.extend(f"  {'':<11} {item}" for item in items[1:])

    if it.waits:  # its hat was called again after each
        block("waits", [_wait_text(w) for w in it.waits])
    block("triggers", [_event_text(e) for e in it.triggers])
    block("events", [_event_text(e, with_source=False) for e in it.events])
    others = [e for e in it.published if e.source != it.hat]
    if others:
        block("also", [_event_text(e) for e in others])
    for lost in it.lost_calls:  # made by an attempt that did not end; they stayed made
        block(f"attempt {lost.attempt}", [_call_text(c) for c in lost.tool_calls])
    block("tool calls", [_call_text(c) for c in it.tool_calls])
    if it.agent_tools:
        block("agent used", [", ".join(it.agent_tools)])
    if it.notes:
        block("notes", list(it.notes))
    for title, text in (("prompt", it.prompt), ("output", it.output)):
        lines += ["", f"── {title} " + "─" * (60 - len(title)), text.rstrip("\n")]
    return "\n".join(lines)


def _waited_text(it: IterationView) -> str:
    """`` · started at 0.004s, waited 34.886s``: an iteration that waited out a limit
    began before its last call did."""
    if not it.waits:
        return ""
    began = f"started at {it.began:.3f}s, " if it.began is not None else ""
    return f" · {began}waited {it.waited:.3f}s"


def _wait_text(wait: WaitView) -> str:
    """A wait in one line: the limit, how long, from when, what the CLI said."""
    at = f" from {wait.at:.3f}s" if wait.at is not None else ""
    said = " ".join(wait.message.split())
    return f"{wait.limit} for {wait.seconds:.3f}s{at}" + (f": {said}" if said else "")


def _call_text(call: ToolCallView) -> str:
    """A tool call in one line: the tool, how it came, its input, how it ended."""
    args = json.dumps(call.input, ensure_ascii=False, sort_keys=True)
    if len(args) > CALL_INPUT_CHARS:
        args = args[: CALL_INPUT_CHARS - 3] + "..."
    return f"{call.tool} via {call.channel} {args} → {call.outcome_text()}"


def iteration_summary(it: IterationView) -> dict[str, Any]:
    """An iteration's row of the timeline, as JSON-ready data."""
    return (
        {
            "iteration": it.iteration,
            "hat": it.hat,
            "status": it.status,
            "reason": it.reason,
            "duration": it.duration,
            "elapsed": it.elapsed,
            "cost_usd": it.cost_usd,
            "input_tokens": it.input_tokens,
            "output_tokens": it.output_tokens,
            "events": [e.topic for e in it.events],
            "tool_calls": len(it.tool_calls),
            "completed": it.completed,
        }
        | ({"ran_with": list(it.ran_with)} if it.ran_with else {})
        | ({"waited": it.waited} if it.waits else {})
    )


def iteration_detail(it: IterationView) -> dict[str, Any]:
    """An iteration in full, as JSON-ready data (with the tools its agent reported using,
    and its start time)."""
    data = it.model_dump(mode="json")
    data["agent_tools"] = list(it.agent_tools)
    data["started"] = round(it.started, 6)
    return data


def session_summary(view: SessionView) -> dict[str, Any]:
    """What ``show`` prints, as JSON-ready data."""
    data = view.model_dump(mode="json", exclude={"iterations", "loop_events"})
    data["outcome"] = outcome(view)
    data["iterations"] = [iteration_summary(it) for it in view.iterations]
    return data


# -- events -------------------------------------------------------------------------------


def _events(args: argparse.Namespace) -> int:
    if args.topic is not None and not is_valid_pattern(args.topic):
        raise UsageError(
            f"--topic {args.topic!r}: not a topic pattern (dot-separated segments of "
            "letters, digits, '_' or '-', or '*' for one segment)"
        )
    view = load_target(args)
    if args.hat is not None and args.hat not in view.hats:
        raise UsageError(
            f"--hat {args.hat!r}: session {view.session_id} has no such hat "
            f"(its hats: {', '.join(view.hats)})"
        )
    if args.iteration is not None and args.iteration != 0:
        _check_iteration(view, args.iteration)
    rows = event_rows(view, topic=args.topic, hat=args.hat, iteration=args.iteration)
    if args.json:
        for row in rows:
            print(json.dumps(event_json(row), ensure_ascii=False))
        return EXIT_OK
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    text = render_events(list(rows), width=width)
    print(text or f"no event in session {view.session_id} matches", flush=True)
    return EXIT_OK


def event_json(row: EventRow) -> dict[str, Any]:
    """One event row as a JSON line's data."""
    return {
        "iteration": row.iteration,
        "hat": row.hat,
        "topic": row.event.topic,
        "source": row.event.source,
        "target": row.event.target,
        "payload": row.event.payload,
        "ts": row.event.ts,
        "to": row.to,
        "taken_by": row.taken_by,
    }


def render_events(rows: list[EventRow], *, width: int | None = None) -> str:
    """A table of events; payloads on one line, cut to ``width`` columns when given, but
    never below :data:`PAYLOAD_MIN_CHARS` (where the other columns leave less room, the
    row is wider than ``width``: cutting the payload to nothing would not keep it on
    one line)."""
    if not rows:
        return ""
    hat_w = max(3, *(len(r.hat or "-") for r in rows))
    topic_w = max(5, *(len(r.event.topic) for r in rows))
    source_w = max(6, *(len(r.event.source) for r in rows))
    head = (
        f"{'iter':>5}  {'hat':<{hat_w}}  {'topic':<{topic_w}}  {'source':<{source_w}}  {'to':>5}  "
    )
    lines = [head + "payload"]
    for r in rows:
        target = f" → {r.event.target}" if r.event.target else ""
        payload = r.event.payload_text().replace("\r", "\\r").replace("\n", "\\n") + target
        if width is not None:
            room = max(width - len(head), PAYLOAD_MIN_CHARS)
            if len(payload) > room:
                payload = payload[: room - 1] + "…"
        lines.append(
            f"{r.iteration:>5}  {r.hat or '-':<{hat_w}}  {r.event.topic:<{topic_w}}  "
            f"{r.event.source:<{source_w}}  {_to_text(r):>5}  {payload}"
        )
    return "\n".join(lines)


def _to_text(row: EventRow) -> str:
    """``3``: iteration 3 ran on it; ``3*``: iteration 3 runs on it and has not ended
    (running, or in flight when its run stopped); ``-``: no hat ran on it."""
    if row.to is not None:
        return str(row.to)
    return f"{row.taken_by}*" if row.taken_by is not None else "-"
