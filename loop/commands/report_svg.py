"""The report's two pictures, drawn as inline SVG from a session view (pure functions).

- :func:`timeline_svg`: one lane per hat, a bar per iteration from its start to its end in
  session time; failed iterations red; an iteration in flight (running, or not ended when
  its run stopped) an open bar to the session's time so far; a limit waited out as a pale
  bar before the call that followed it, in its iteration's lane; markers (an end before a
  resume, a resume, a hat exhausted, a recording's cap) as vertical lines. Iterations
  closer together than the drawing's resolution share one bar, so a 10,000-iteration
  session stays a few thousand elements. Each bar links to its (first) iteration, ``#it-N``.
- :func:`graph_svg`: the hats on a line, in the order they first ran, with an arc for every
  source and target that events actually flowed between (above: forward, below: back),
  labelled with the topics and their counts.

Every text goes through :func:`html.escape`; nothing from the session becomes markup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from loop.session.view import END, Flow, InFlightView, IterationView, SessionView, WaitView

__all__ = ["fmt_seconds", "graph_svg", "timeline_svg"]

WIDTH = 1000.0  # drawing units across the time axis
LABEL = 120.0  # the hat names' column
LANE = 22.0
MIN_BAR = 1.5  # an instant iteration is still visible


def fmt_seconds(seconds: float) -> str:
    """``0s``, ``0.004s``, ``2.50s``, ``42.0s``, ``3m 05s``, ``1h 02m``."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds:.3f}s"
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 600:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _nice_step(span: float, ticks: int = 8) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


@dataclass
class _Bar:
    x0: float
    x1: float
    first: int
    last: int
    count: int = 1
    failed: int = 0
    seconds: float = 0.0


def _bars(its: list[IterationView], scale: float) -> list[_Bar]:
    """Bars of one lane: iterations that touch at this resolution are merged."""
    out: list[_Bar] = []
    for it in sorted(its, key=lambda i: i.started):
        x0 = LABEL + it.started * scale
        x1 = max(x0 + MIN_BAR, LABEL + it.elapsed * scale)
        bad = it.status == "failed"
        last = out[-1] if out else None
        if last is not None and x0 <= last.x1 + 0.5 and bool(last.failed) == bad:
            last.x1 = max(last.x1, x1)
            last.last = it.iteration
            last.count += 1
            last.failed += bad
            last.seconds += it.duration
        else:
            out.append(_Bar(x0, x1, it.iteration, it.iteration, 1, int(bad), it.duration))
    return out


def _bar_title(hat: str, bar: _Bar, its: dict[int, IterationView]) -> str:
    if bar.count == 1:
        it = its[bar.first]
        status = it.status + (f": {it.reason}" if it.reason else "")
        return f"#{it.iteration} {hat} · {status} · took {fmt_seconds(it.duration)}"
    failed = f", {bar.failed} failed" if bar.failed else ""
    return (
        f"#{bar.first}–#{bar.last} {hat}: {bar.count} iterations{failed} · "
        f"{fmt_seconds(bar.seconds)} in all"
    )


Run = IterationView | InFlightView  # what takes a place in a hat's lane


def _span(run: Run, now: float) -> tuple[float, float]:
    """Where a run sits in a lane: an iteration from its first wait (it waited in the
    lane before its call) or its last call's start, to its end; an iteration in flight
    from its start to ``now`` (the session's time so far, or when it stopped)."""
    if isinstance(run, InFlightView):
        began = now if run.began is None else run.began
        return began, max(began, now)
    return min([run.started, *(w.at for w in run.waits if w.at is not None)]), run.elapsed


def _lanes(hat: str, runs: list[Run], now: float) -> list[tuple[str, list[Run]]]:
    """A hat's lanes: one, unless its activations ran at once (parallel hats): then as
    many as ran together, each activation in the first lane free when it started."""
    lanes: list[tuple[str, list[Run]]] = []
    ends: list[float] = []
    for run in sorted(runs, key=lambda r: _span(r, now)[0]):
        first, last = _span(run, now)
        free = next((k for k, end in enumerate(ends) if end <= first + 1e-9), None)
        if free is None:
            lanes.append((hat if not lanes else f"{hat} ∥{len(lanes) + 1}", []))
            ends.append(0.0)
            free = len(lanes) - 1
        lanes[free][1].append(run)
        ends[free] = last
    return lanes or [(hat, [])]


def _open_title(view: SessionView, flight: InFlightView) -> str:
    """What an iteration in flight is: running, cut short by the end, or left by a run
    that stopped without one."""
    head = f"#{flight.iteration} {flight.hat}"
    since = f" since {fmt_seconds(flight.began)}" if flight.began is not None else ""
    if view.running:
        return f"{head} · running{since} ({fmt_seconds(view.elapsed)} into the session so far)"
    if view.end is not None:
        return f"{head} · started{since}, cut short by the session's end ({view.end.reason})"
    return (
        f"{head} · started{since}, in flight when its run stopped without an end (a kill "
        "or a crash): a resume runs it again"
    )


def timeline_svg(view: SessionView) -> str:
    """Iterations per hat along the session's time (a lane per activation running at once),
    and those in flight, open-ended."""
    runs: list[Run] = [*view.iterations, *view.in_flight_runs]
    names = list(view.hats) + sorted({r.hat for r in runs} - set(view.hats))
    now = view.elapsed  # where the open bars end
    hats = [lane for hat in names for lane in _lanes(hat, [r for r in runs if r.hat == hat], now)]
    total = max(
        [i.elapsed for i in view.iterations]
        + [w.at + w.seconds for w in view.waits if w.at is not None]
        + [view.end.elapsed if view.end else 0.0, now]
    )
    total = total or 1.0
    scale = WIDTH / total
    height = LANE * len(hats) + 34
    by_number = {i.iteration: i for i in view.iterations}
    parts = [
        f'<svg class="timeline" viewBox="0 0 {LABEL + WIDTH + 30:.0f} {height:.0f}" '
        f'role="img" aria-label="iterations per hat over time">'
    ]
    step = _nice_step(total)
    tick = 0.0
    axis_y = LANE * len(hats) + 4
    while tick <= total + 1e-9:
        x = LABEL + tick * scale
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{axis_y:.0f}"/>'
            f'<text class="tick" x="{x:.1f}" y="{axis_y + 14:.0f}">{fmt_seconds(tick)}</text>'
        )
        tick += step
    lane_of = {run.iteration: n for n, (_, lane_runs) in enumerate(hats) for run in lane_runs}
    first_lane: dict[str, int] = {}
    for n, (label, lane_runs) in enumerate(hats):
        first_lane.setdefault(lane_runs[0].hat if lane_runs else label, n)
    for wait in view.waits:  # before the bars: a call that followed a wait is drawn over it
        lane = lane_of.get(wait.iteration, first_lane.get(wait.hat))
        if wait.at is not None and lane is not None:
            parts.append(_wait_svg(wait, lane * LANE, scale, linked=wait.iteration in by_number))
    for lane, (label, lane_runs) in enumerate(hats):
        y = lane * LANE
        hat = lane_runs[0].hat if lane_runs else label
        parts.append(
            f'<text class="lane" x="{LABEL - 6:.0f}" y="{y + 15:.0f}">{escape(label)}</text>'
        )
        its = [r for r in lane_runs if isinstance(r, IterationView)]
        for bar in _bars(its, scale):
            cls = "bar failed" if bar.failed else "bar"
            # a merged bar is as opaque as its hat was busy over it (faint: mostly idle)
            busy = bar.seconds * scale / (bar.x1 - bar.x0)
            opacity = f' fill-opacity="{max(0.3, busy):.2f}"' if busy < 0.95 else ""
            parts.append(
                f'<a href="#it-{bar.first}"><rect class="{cls}" x="{bar.x0:.1f}" '
                f'y="{y + 4:.0f}" width="{bar.x1 - bar.x0:.1f}" height="{LANE - 8:.0f}"'
                f"{opacity}><title>{escape(_bar_title(hat, bar, by_number))}</title></rect></a>"
            )
        for flight in lane_runs:  # not ended: open-ended, to the session's time so far
            if isinstance(flight, InFlightView):
                first, last = _span(flight, now)
                x0 = LABEL + first * scale
                parts.append(
                    f'<rect class="bar open" x="{x0:.1f}" y="{y + 4:.0f}" '
                    f'width="{max(MIN_BAR, (last - first) * scale):.1f}" '
                    f'height="{LANE - 8:.0f}"><title>{escape(_open_title(view, flight))}'
                    "</title></rect>"
                )
    for marker in view.markers:
        if marker.kind == "wait":  # drawn as its bar
            continue
        ended = by_number.get(marker.after)
        x = LABEL + (ended.elapsed if ended is not None else 0.0) * scale
        parts.append(
            f'<line class="marker {escape(marker.kind)}" x1="{x:.1f}" y1="0" '
            f'x2="{x:.1f}" y2="{axis_y:.0f}"><title>{escape(marker.kind)}: '
            f"{escape(marker.message)}</title></line>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _wait_svg(wait: WaitView, y: float, scale: float, *, linked: bool) -> str:
    """A limit waited out: a pale bar in its iteration's lane, from when the wait began
    for as long as it lasted (linked to the iteration, once it committed)."""
    assert wait.at is not None
    x0 = LABEL + wait.at * scale
    width = max(MIN_BAR, wait.seconds * scale)
    rect = (
        f'<rect class="wait" x="{x0:.1f}" y="{y + 4:.0f}" width="{width:.1f}" '
        f'height="{LANE - 8:.0f}"><title>{escape(wait.text())}</title></rect>'
    )
    return f'<a href="#it-{wait.iteration}">{rect}</a>' if linked else rect


# -- the hat graph ------------------------------------------------------------------------

NODE_W = 124.0
NODE_H = 40.0
GAP = 56.0


@dataclass
class _Edge:
    source: str
    target: str
    topics: list[tuple[str, int]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(n for _, n in self.topics)


def _order(view: SessionView, edges: list[_Edge]) -> list[str]:
    """``loop``, the hats in the order they first ran (or run now), the rest, then the
    end."""
    order = ["loop"]
    for hat in [*(it.hat for it in view.iterations), *(f.hat for f in view.in_flight_runs)]:
        if hat not in order:
            order.append(hat)
    order += [h for h in view.hats if h not in order]
    for edge in edges:
        if edge.source not in order and edge.source != END:
            order.append(edge.source)
    if any(e.target == END for e in edges):
        order.append(END)
    return order


def _label_lines(edge: _Edge, limit: int = 3) -> list[str]:
    topics = sorted(edge.topics, key=lambda t: (-t[1], t[0]))
    lines = [f"{topic} ×{n}" for topic, n in topics[:limit]]
    if len(topics) > limit:
        lines.append(f"+{len(topics) - limit} more")
    return lines


def _edge_svg(edge: _Edge, x1: float, x2: float, span: int) -> tuple[str, str, float, float]:
    """An edge's arc and its label: ``(path, labels, reach above, reach below)``."""
    stroke = 1.2 + min(4.0, math.log2(edge.count + 1))
    lines = _label_lines(edge)
    above = below = 0.0
    if edge.source == edge.target:  # a hat that triggers itself: a loop over it
        top = -NODE_H / 2
        d = (
            f"M {x1 - 18:.1f} {top:.1f} C {x1 - 40:.1f} {top - 50:.1f} "
            f"{x1 + 40:.1f} {top - 50:.1f} {x1 + 18:.1f} {top:.1f}"
        )
        apex, up = top - 40, True
        above = 70 + 14 * len(lines)
    else:
        forward = x2 > x1
        rx = abs(x2 - x1) / 2
        ry = min(rx, 26 + 30 * span)
        side = -1 if forward else 1  # forward arcs above the line, back ones below
        y0 = side * NODE_H / 2
        # sweep 1 (clockwise on screen): left to right bulges up, right to left down
        d = f"M {x1:.1f} {y0:.1f} A {rx:.1f} {ry:.1f} 0 0 1 {x2:.1f} {y0:.1f}"
        apex, up = y0 + side * ry, forward
        reach = ry + NODE_H / 2 + 14 * len(lines) + 10
        above, below = (reach, 0.0) if forward else (0.0, reach)
    title = escape(f"{edge.source} → {edge.target}: " + ", ".join(lines))
    path = (
        f'<path class="edge" d="{d}" stroke-width="{stroke:.1f}" '
        f'marker-end="url(#arrow)"><title>{title}</title></path>'
    )
    mid = (x1 + x2) / 2
    labels = "".join(
        f'<text class="edge-label" x="{mid:.1f}" '
        f'y="{apex + ((n - len(lines)) * 14 + 10 if up else (n + 1) * 14):.1f}">'
        f"{escape(text)}</text>"
        for n, text in enumerate(lines)  # stacked away from the arc's apex
    )
    return path, labels, above, below


def _node_svg(name: str, x: float, view: SessionView, runs: int, flying: int) -> str:
    if name == "loop":
        cls, sub = "node loop", "start"
    elif name == END:
        cls, sub = "node end", view.completion_event
    elif name in view.hats or runs or flying:
        cls = "node hat" if runs or flying else "node hat idle"
        done = [f"×{runs}"] if runs else []
        if flying:  # iterations of it not ended: running, or in flight when it stopped
            done.append(f"{flying} {'running' if view.running else 'in flight'}")
        sub = " + ".join(done) or "not run"
    else:
        cls, sub = "node other", "publisher"
    return (
        f'<g class="{cls}"><rect x="{x - NODE_W / 2:.1f}" y="{-NODE_H / 2:.1f}" '
        f'width="{NODE_W:.0f}" height="{NODE_H:.0f}" rx="8"/><text class="node-name" '
        f'x="{x:.1f}" y="-3">{escape(_short(name, 16))}</text><text class="node-sub" '
        f'x="{x:.1f}" y="12">{escape(_short(sub, 20))}</text><title>{escape(name)}</title></g>'
    )


def graph_svg(view: SessionView, flows: list[Flow]) -> str:
    """The hats and the events that flowed between them."""
    grouped: dict[tuple[str, str], _Edge] = {}
    for flow in flows:
        edge = grouped.setdefault((flow.source, flow.target), _Edge(flow.source, flow.target))
        edge.topics.append((flow.topic, flow.count))
    edges = list(grouped.values())
    order = _order(view, edges)
    index = {name: n for n, name in enumerate(order)}
    runs: dict[str, int] = {}
    for it in view.iterations:
        runs[it.hat] = runs.get(it.hat, 0) + 1
    flying: dict[str, int] = {}
    for flight in view.in_flight_runs:
        flying[flight.hat] = flying.get(flight.hat, 0) + 1

    def cx(name: str) -> float:
        return 20 + index[name] * (NODE_W + GAP) + NODE_W / 2

    width = 40 + len(order) * (NODE_W + GAP) - GAP
    above = below = 30.0
    paths: list[str] = []
    labels: list[str] = []
    for edge in edges:
        span = abs(index[edge.target] - index[edge.source])
        path, label, up, down = _edge_svg(edge, cx(edge.source), cx(edge.target), span)
        paths.append(path)
        labels.append(label)
        above, below = max(above, up), max(below, down)
    nodes = [
        _node_svg(name, cx(name), view, runs.get(name, 0), flying.get(name, 0)) for name in order
    ]
    return (
        # drawn at its own size (never scaled up), shrunk to fit a narrow window
        f'<svg class="graph" width="{width:.0f}" height="{above + below:.0f}" '
        f'viewBox="0 {-above:.0f} {width:.0f} {above + below:.0f}" '
        f'role="img" aria-label="hats and the events that flowed between them">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
        'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>'
        + "".join(paths)
        + "".join(nodes)
        + "".join(labels)
        + "</svg>"
    )


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
