"""``loop report``: a session as one self-contained HTML page.

The page needs nothing but itself: its CSS and script are inline, its pictures are SVG
drawn here, and a Content-Security-Policy that allows only those (by their hashes) and
no network. The session's data is embedded once: a summary of every iteration as JSON,
and each page of iterations' details (prompt, output, events) as gzip in base64, which
the page unpacks when an iteration on that page is opened. So a 10,000-iteration session
stays a file of a few megabytes that opens at once, 100 rows a page.

Nothing from the session becomes markup: the server-side parts go through
:func:`html.escape`, the embedded JSON has ``<``, ``>`` and ``&`` escaped (so no
``</script>`` can close its element), and the script builds elements with
``textContent``.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from loop._fs import atomic_write
from loop._text import iterations_text, iterations_were
from loop._version import __version__
from loop.commands.common import add_path_argument, add_sessions_options, check_output_file
from loop.commands.inspect import TARGET_HELP, load_target
from loop.commands.report_svg import fmt_seconds, graph_svg, timeline_svg
from loop.errors import InputError
from loop.exits import EXIT_OK
from loop.session.view import (
    EventView,
    HatStats,
    IterationView,
    SessionView,
    ToolCallView,
    flows,
    hat_stats,
    outcome,
)

__all__ = ["CHUNK", "PAGE", "register", "render_report", "script_json"]

PAGE = 100  # iterations per page of the list
CHUNK = PAGE  # iterations per packed block of details: opening one row unpacks its page
FAILURES_LISTED = 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report``."""
    p = sub.add_parser(
        "report",
        help="write a session as one self-contained HTML page",
        description="Write one HTML file that needs no network: the timeline of iterations "
        "per hat, the hat graph with the events that flowed, cost and tokens per hat, "
        "failures and limits, and every iteration's prompt, output and events.",
    )
    add_path_argument(p, "target", nargs="?", metavar="ID|FILE", help=TARGET_HELP)
    add_path_argument(
        p,
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it (default: <session id>.html in the current folder)",
    )
    add_sessions_options(p)
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    if args.output:  # before the session is read
        check_output_file(Path(args.output), "-o")
    view = load_target(args)
    target = Path(args.output) if args.output else Path(f"{view.session_id}.html")
    if not args.output:  # the default name, once the session's id is known
        check_output_file(target, "-o")
    page = render_report(view).encode("utf-8", "backslashreplace")  # lone surrogates
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, page, durable=False)
    except OSError as exc:
        raise InputError(f"{target}: cannot write the report: {exc.strerror or exc}") from None
    print(f"report written to {target} ({len(view.iterations)} iteration(s), {_size(len(page))})")
    return EXIT_OK


def _size(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB" if n >= 1_048_576 else f"{max(1, round(n / 1024))} KB"


# -- data ---------------------------------------------------------------------------------


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and the JavaScript line
    separators escaped, so no text in it can end the element or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, esc)
    return text


def _summary(it: IterationView, hat_index: dict[str, int]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "n": it.iteration,
        "h": hat_index[it.hat],
        "t0": round(it.started, 6),
        "d": it.duration,
    }
    optional = {
        "f": 1 if it.status == "failed" else None,
        "r": it.reason,
        "c": it.cost_usd,
        "ti": it.input_tokens,
        "to": it.output_tokens,
        "ev": [e.topic for e in it.events] or None,
        "done": 1 if it.completed else None,
    }
    row.update((k, v) for k, v in optional.items() if v is not None)
    return row


def _events(events: tuple[EventView, ...]) -> list[list[Any]]:
    return [[e.topic, e.source, e.target, e.payload_text()] for e in events]


def _call(call: ToolCallView) -> list[str]:
    """A tool call for the page: ``[tool, channel, input, outcome]`` (texts)."""
    args = json.dumps(call.input, ensure_ascii=False, sort_keys=True)
    return [call.tool, call.channel, args, call.outcome_text()]


def _details(it: IterationView) -> dict[str, Any]:
    row: dict[str, Any] = {
        "prompt": it.prompt,
        "output": it.output,
        "triggers": _events(it.triggers),
        "events": _events(it.events),
        "also": _events(tuple(e for e in it.published if e.source != it.hat)),
        "tools": list(it.agent_tools),
        "calls": [_call(c) for c in it.tool_calls],
        "notes": list(it.notes),
        "backend": it.backend,
        "ok": it.backend_ok,
        "activation": it.activation,
    }
    if it.exit_code is not None:
        row["exit"] = it.exit_code
    if it.turns is not None:
        row["turns"] = it.turns
    meta = {k: v for k, v in it.meta.items() if k != "tool_uses"}
    if meta:
        row["meta"] = json.dumps(meta, ensure_ascii=False, indent=2, default=str)
    return row


def _packed(its: tuple[IterationView, ...]) -> list[str]:
    """The details in blocks of :data:`CHUNK` iterations, each gzip-compressed JSON in
    base64 (deterministic: no timestamp in the gzip header)."""
    out = []
    for start in range(0, len(its), CHUNK):
        raw = json.dumps(
            [_details(it) for it in its[start : start + CHUNK]],
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8", "backslashreplace")  # a lone surrogate: a JSON escape again
        out.append(base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode())
    return out


# -- the page -----------------------------------------------------------------------------


def _asset(name: str) -> str:
    return (resources.files("loop.commands") / "report_assets" / name).read_text("utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


# the elapsed figure's label, by what it is as of (as status says it)
_ELAPSED = {"end": "elapsed", "now": "elapsed so far", "last_commit": "elapsed at the last commit"}


def _figures(view: SessionView, rows: list[HatStats]) -> str:
    its = view.iterations
    failed = sum(1 for i in its if i.status == "failed")
    costs = [i.cost_usd for i in its if i.cost_usd is not None]
    tin = [i.input_tokens for i in its if i.input_tokens is not None]
    tout = [i.output_tokens for i in its if i.output_tokens is not None]
    cells = [
        ("iterations", f'<span id="iteration-count">{len(its)}</span>'),
        ("failed", str(failed)),
        (_ELAPSED[view.elapsed_as_of], fmt_seconds(view.elapsed)),
        ("cost", _money(sum(costs)) if costs else "-"),
        ("tokens in", _int(sum(tin)) if tin else "-"),
        ("tokens out", _int(sum(tout)) if tout else "-"),
        # as the run's summary counts them, and the per-hat table: what the hats published
        ("events by hats", str(sum(r.events for r in rows))),
        ("records", str(view.records)),
    ]
    return "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in cells)


def _outcome_line(view: SessionView) -> str:
    end = view.end
    if end is None:
        if view.running:
            flying = ""
            if view.in_flight_all:
                flying = f", {iterations_text(view.in_flight_all)} in flight"
            return f"running: {fmt_seconds(view.elapsed)} so far{flying}, no end record yet"
        if view.in_flight_all:
            return f"unfinished: {iterations_were(view.in_flight_all)} running when the file ended"
        return "unfinished: no end record (its run stopped without one, a kill or a crash)"
    cut = ""
    if view.in_flight_all:  # the end cut them short
        cut = f"; {iterations_were(view.in_flight_all)} in flight, not committed"
    return (
        f"{end.reason} after {end.iterations} iteration(s) in {fmt_seconds(end.elapsed)} "
        f"(exit {end.exit_code}){cut}"
    )


def _problems(view: SessionView) -> str:
    items: list[str] = []
    kind = outcome(view)
    if kind in ("limit", "failed") and view.end is not None:
        what = "a limit" if kind == "limit" else "a failure"
        items.append(f'<li class="bad">ended by {what}: {escape(view.end.reason)}</li>')
    failed = [i for i in view.iterations if i.status == "failed"]
    for it in failed[:FAILURES_LISTED]:
        items.append(
            f'<li class="bad"><a href="#it-{it.iteration}">iteration {it.iteration}</a> '
            f"({escape(it.hat)}) failed: {escape((it.reason or '').splitlines()[0][:200])}</li>"
        )
    if len(failed) > FAILURES_LISTED:
        items.append(
            f'<li class="bad">and {len(failed) - FAILURES_LISTED} more failed iterations: '
            '<a href="#failed">list them</a></li>'
        )
    for marker in view.markers:
        cls = "warn" if marker.kind not in ("resumed", "override", "ended") else ""
        where = (
            f'after <a href="#it-{marker.after}">iteration {marker.after}</a>'
            if marker.after
            else "before the first iteration"
        )
        items.append(
            f'<li class="{cls}">{escape(marker.kind)} {where}: {escape(marker.message)}</li>'
        )
    items += [f'<li class="warn">{escape(w)}</li>' for w in view.warnings]
    if not items:
        return '<p class="empty">No failure, limit or marker.</p>'
    return '<ul class="problems">' + "".join(items) + "</ul>"


def _share(part: float, whole: float) -> str:
    width = 0.0 if whole <= 0 else 100 * part / whole
    return (
        '<svg class="share" viewBox="0 0 100 8" aria-hidden="true">'
        f'<rect class="bg" width="100" height="8"/><rect class="fill" width="{width:.1f}" '
        'height="8"/></svg>'
    )


def _hat_table(view: SessionView, rows: list[HatStats]) -> str:
    time_all = sum(r.duration for r in rows)
    cost_all = sum(r.cost_usd or 0.0 for r in rows)
    head = (
        "<tr><th>hat</th><th>backend</th><th class=num>iterations</th>"
        "<th class=num>failed</th><th class=num>time</th><th>share</th>"
        "<th class=num>cost</th><th>share</th><th class=num>tokens in</th>"
        "<th class=num>tokens out</th><th class=num>events</th></tr>"
    )
    body = []
    for r in rows:
        hat = view.hats.get(r.hat)
        body.append(
            f"<tr><td><strong>{escape(r.hat)}</strong></td>"
            f"<td>{escape(hat.backend if hat else '-')}</td>"
            f"<td class=num>{r.iterations}</td><td class=num>{r.failed}</td>"
            f"<td class=num>{fmt_seconds(r.duration)}</td><td>{_share(r.duration, time_all)}</td>"
            f"<td class=num>{_money(r.cost_usd)}</td><td>{_share(r.cost_usd or 0, cost_all)}</td>"
            f"<td class=num>{_int(r.input_tokens)}</td><td class=num>{_int(r.output_tokens)}</td>"
            f"<td class=num>{r.events}</td></tr>"
        )
    return f'<table id="hat-table"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _flow_table(view: SessionView) -> str:
    rows = sorted(flows(view), key=lambda f: (-f.count, f.source, f.target, f.topic))
    if not rows:
        return '<p class="empty">No event flowed.</p>'
    body = "".join(
        f"<tr><td>{escape(f.source)}</td><td>{escape(f.target)}</td>"
        f"<td><code>{escape(f.topic)}</code></td><td class=num>{f.count}</td></tr>"
        for f in rows
    )
    return (
        "<details><summary>the flows as a table</summary><table><thead><tr><th>from</th>"
        "<th>to</th><th>topic</th><th class=num>count</th></tr></thead>"
        f"<tbody>{body}</tbody></table></details>"
    )


def render_report(view: SessionView) -> str:
    """The whole page (deterministic for a given view)."""
    hat_names = list(view.hats) + sorted({i.hat for i in view.iterations} - set(view.hats))
    hat_index = {name: n for n, name in enumerate(hat_names)}
    data = {
        "hats": hat_names,
        "page": PAGE,
        "chunk": CHUNK,
        "its": [_summary(it, hat_index) for it in view.iterations],
    }
    css, js = _asset("report.css"), _asset("report.js")
    policy = (
        f"default-src 'none'; script-src {_hash(js)}; style-src {_hash(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    kind = outcome(view)
    rows = hat_stats(view)
    title = f"hatloop session {view.session_id}"
    origin = "journal" if view.source == "journal" else "recording"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="hatloop {escape(__version__)}">
<title>{escape(title)}</title>
<style>{css}</style>
</head>
<body>
<main>
<header>
<h1>hatloop session <code>{escape(view.session_id)}</code></h1>
<p class="source">from the {origin} <code>{escape(view.path)}</code> · started
{escape(view.started_at)} · hatloop {escape(view.hatloop_version)} · hats
{escape(", ".join(view.hats))}</p>
<div class="outcome {kind}" id="outcome">{escape(_outcome_line(view))}</div>
<dl class="figures">{_figures(view, rows)}</dl>
<nav><a href="#problems">failures and markers</a><a href="#timeline">timeline</a>
<a href="#graph">hat graph</a><a href="#hats">cost and tokens</a>
<a href="#iterations">iterations</a></nav>
</header>
<section id="problems"><h2>Failures, limits and markers</h2>{_problems(view)}</section>
<section id="timeline"><h2>Timeline</h2>{timeline_svg(view)}
<p class="legend">one lane per hat, along the session's time; a bar per iteration (bars
closer than the drawing's resolution are merged); click one to open it.
<span class="sw-ok"></span>ok<span class="sw-bad"></span>failed<span class="sw-open"></span>running
or in flight (not ended)<span class="sw-wait"></span>waiting out a rate or usage limit · dashed
lines: markers</p>
</section>
<section id="graph"><h2>Hats and the events that flowed</h2>{graph_svg(view, flows(view))}
{_flow_table(view)}</section>
<section id="hats"><h2>Cost and tokens per hat</h2>{_hat_table(view, rows)}
<p class="legend">"-": the hat's backend did not report it.</p></section>
<section id="iterations"><h2>Iterations (<span id="shown-count">{len(view.iterations)}</span>)</h2>
<div class="controls">
<label>hat <select id="filter-hat"><option value="">all</option></select></label>
<label>status <select id="filter-status"><option value="">all</option>
<option value="ok">ok</option><option value="failed">failed</option></select></label>
<label>event topic contains <input id="filter-topic" type="search" size="18"></label>
</div>
<div class="pager" id="pager"></div>
<table id="iteration-table"><thead><tr><th>#</th><th>hat</th><th>status</th>
<th class=num>start</th><th class=num>took</th><th class=num>cost</th>
<th class=num>tokens in / out</th><th>events</th></tr></thead>
<tbody id="iteration-rows"></tbody></table>
<noscript><p>The iteration list needs JavaScript; <code>hatloop show</code> prints it
too.</p></noscript>
</section>
</main>
<script type="application/json" id="report-data">{script_json(data)}</script>
<script type="application/json" id="report-details">{script_json(_packed(view.iterations))}</script>
<script>{js}</script>
</body>
</html>
"""
