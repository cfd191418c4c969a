"""The live view of a running loop: a status line on a terminal, and the hats' output.

While an iteration runs, the status line says which iteration, which hat, how long it
has run and what the session has spent so far (cost and tokens, where the backends
report them), with a spinner; while the loop waits (a rate limit), it says for what and
until when. ``-v`` prints each hat's output as it arrives, one line at a time prefixed
with the hat. Both go to one stream (stderr for ``run``, stdout for ``watch``); log lines
written meanwhile appear above the status line, which is erased when the view stops.

The line is drawn by `rich <https://github.com/Textualize/rich>`_'s ``Live`` display: a
maintained library that keeps one redrawn region at the bottom of the terminal while
other writes scroll above it (it routes ``sys.stderr`` through itself while it runs), crops
the line to the terminal's width, and refreshes it from its own thread, so the spinner
turns even while an in-process hat holds the event loop. It is imported only when a
live line or ``-v`` is on. Whether the line is drawn at all is
:func:`loop._log.live_line_allowed`'s decision: a terminal, not ``TERM=dumb``, not in CI,
colour not turned off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import structlog

from loop.backends.base import AgentOutput
from loop.bus import EventBus
from loop.engine.lifecycle import (
    ITERATION_DONE,
    ITERATION_STARTED,
    LOOP_RESUMED,
    LOOP_STARTED,
    LOOP_WAITING,
    IterationStarted,
    SessionStarted,
    Waiting,
)
from loop.engine.progress import usage_text
from loop.engine.state import HatUsage
from loop.events import Event
from loop.extensions import Extension
from loop.records import IterationEnd

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

__all__ = ["LiveExtension", "LiveStatus", "LiveView", "clock_text", "status_text"]

_log = structlog.get_logger("loop.output")

REFRESH_PER_SECOND = 8
_STYLES = {"line": "", "text": "", "tool": "yellow"}


@dataclass
class LiveStatus:
    """What the status line says: the session, the running iteration, the spend, a wait.

    ``started`` is the running iteration's start, in seconds since the epoch.
    """

    session_id: str = ""
    iteration: int | None = None
    hat: str | None = None
    started: float | None = None
    spent: HatUsage = field(default_factory=HatUsage)
    waiting: Waiting | None = None
    done: int = 0  # iterations committed
    lanes: dict[int, tuple[str, float]] = field(default_factory=dict)  # in flight: hat, start


def clock_text(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``: a duration as a clock reads it."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def status_text(status: LiveStatus, now: float) -> str:
    """The status line's text at ``now`` (seconds since the epoch); pure."""
    spent = usage_text(status.spent.cost_usd, status.spent.input_tokens, status.spent.output_tokens)
    tail = f" · spent {spent}" if spent else ""
    wait = status.waiting
    if wait is not None and (wait.until is None or wait.until > now):  # once over: the call
        text = f"waiting for {wait.reason}"
        if wait.until is not None:
            left = wait.until - now
            # to the second under an hour: "until 15:55" at 15:55:07 would read as past
            shape = "%H:%M:%S" if left < 3600 else "%H:%M"
            text += f" until {time.strftime(shape, time.localtime(wait.until))}"
            text += f" ({clock_text(left)} left)"
        return text + tail
    if len(status.lanes) > 1:  # parallel hats: one lane per activation in flight
        lanes = " · ".join(
            f"#{n} {hat} {clock_text(now - started)}"
            for n, (hat, started) in sorted(status.lanes.items())
        )
        return f"{len(status.lanes)} running · {lanes}{tail}"
    if status.iteration is None or status.hat is None or status.started is None:
        label = f"session {status.session_id}" if status.session_id else "session"
        doing = f"{status.done} iteration(s) done" if status.done else "starting"
        return f"{label} · {doing}{tail}"
    running = clock_text(now - status.started)
    return f"iteration {status.iteration} · {status.hat} · {running}{tail}"


class LiveView:
    """Draws the status line (when ``live``) and prints output lines on one stream.

    Args:
        stream: ``stderr`` (``run``) or ``stdout`` (``watch``).
        live: draw the status line (the caller has checked it may).
        colors: colour the hat names and tool calls.
        clock: the time of day, in seconds since the epoch.
        log: hand the hats' output to the log as ``output`` events (JSON log lines)
            instead of printing it.
    """

    def __init__(
        self,
        *,
        stream: Literal["stdout", "stderr"] = "stderr",
        live: bool = True,
        colors: bool = True,
        clock: Callable[[], float] = time.time,
        log: bool = False,
    ) -> None:
        from rich.console import Console  # noqa: PLC0415 - ~40 ms, only when a view is on

        self.status = LiveStatus()
        self.live = live
        self.clock = clock
        self.log = log
        self._stream = stream
        self.console: Console = Console(
            stderr=stream == "stderr",
            soft_wrap=True,  # a long line wraps in the terminal, not by hard line breaks
            highlight=False,
            markup=False,
            emoji=False,
            color_system="auto" if colors else None,
            force_terminal=True if colors else None,
            no_color=not colors,
        )
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    # -- the status line ------------------------------------------------------------

    def start(self) -> None:
        """Show the status line (nothing when it is off, or already shown)."""
        if not self.live or self._live is not None:
            return
        from rich.live import Live  # noqa: PLC0415 - rich, only when the line is drawn
        from rich.spinner import Spinner  # noqa: PLC0415 - see start()

        self._spinner = Spinner("dots", style="cyan")
        self._live = Live(
            console=self.console,
            get_renderable=self._render,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=True,  # erased when it stops: the summary follows on a clean screen
            redirect_stdout=self._stream == "stdout",
            redirect_stderr=self._stream == "stderr",
        )
        self._live.start(refresh=True)

    def _render(self) -> Spinner:
        from rich.text import Text  # noqa: PLC0415 - imported with rich.live already

        assert self._spinner is not None
        text = Text(status_text(self.status, self.clock()), no_wrap=True, overflow="ellipsis")
        self._spinner.update(text=text)
        return self._spinner

    def _redraw(self) -> None:
        # At once, not at the next tick: a log line printed meanwhile redraws the line
        # as it was last drawn, so a stale frame would show an ended activation running.
        if self._live is not None:
            self._live.refresh()

    def stop(self) -> None:
        """Erase the status line (idempotent)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    # -- what it shows --------------------------------------------------------------

    def session(self, session_id: str) -> None:
        """The session the view follows."""
        self.status.session_id = session_id

    def iteration_started(
        self, iteration: int, hat: str, started: float, spent: HatUsage | None = None
    ) -> None:
        """Iteration ``iteration`` of ``hat`` started at ``started`` (epoch seconds)."""
        st = self.status
        st.iteration, st.hat, st.started, st.waiting = iteration, hat, started, None
        st.lanes[iteration] = (hat, started)
        if spent is not None:  # a copy: what ends later is added to it
            st.spent = replace(spent)
        self._redraw()

    def iteration_ended(self, record: IterationEnd) -> None:
        """Iteration ``record`` is committed: its cost counts from now on."""
        st = self.status
        st.spent.add(record.cost_usd, record.input_tokens, record.output_tokens)
        st.done = max(st.done, record.iteration)
        st.lanes.pop(record.iteration, None)
        if st.iteration == record.iteration:
            st.iteration = st.hat = st.started = None
            if st.lanes:  # another activation still runs (parallel hats)
                st.iteration = max(st.lanes)
                st.hat, st.started = st.lanes[st.iteration]
        self._redraw()

    def waiting(self, wait: Waiting) -> None:
        """The loop waits (until the next iteration starts)."""
        self.status.waiting = wait
        self._redraw()

    def print(self, line: str, *, style: str = "") -> None:
        """One line of text, above the status line."""
        from rich.text import Text  # noqa: PLC0415 - rich is imported with the view

        self.console.print(Text(line, style=style))

    def output(self, piece: AgentOutput, *, numbered: bool = False) -> None:
        """A hat's output as it arrives: each of its lines prefixed with the hat, and with
        the iteration when ``numbered`` (activations that run at once: ``[reviewer #3]``)."""
        if self.log:
            _log.info(
                "output", hat=piece.hat, iteration=piece.iteration, kind=piece.kind, text=piece.text
            )
            return
        from rich.text import Text  # noqa: PLC0415 - rich is imported with the view

        label = f"{piece.hat} #{piece.iteration}" if numbered else piece.hat
        prefix = f"[{label}] " + ("→ " if piece.kind == "tool" else "")
        style = _STYLES[piece.kind]
        for line in piece.text.splitlines() or [""]:
            self.console.print(Text.assemble((prefix, "cyan"), (line, style)))


class LiveExtension(Extension):
    """Drives a :class:`LiveView` from a run's lifecycle events.

    With ``verbose``, a hat whose backend does not report output as it arrives (``python``,
    ``scripted``) has its whole output printed when its iteration ends. The output of an
    activation that may run alongside others is numbered (``[reviewer #3]``).
    """

    name = "live"

    def __init__(self, view: LiveView, *, verbose: bool = False) -> None:
        self.view = view
        self.verbose = verbose
        self._running: dict[int, IterationStarted] = {}  # the iterations in flight

    def attach(self, bus: EventBus) -> None:
        """Follow the lifecycle events."""
        for topic in (LOOP_STARTED, LOOP_RESUMED, ITERATION_STARTED, ITERATION_DONE, LOOP_WAITING):
            bus.subscribe(topic, self._on_event, name="live")

    def _on_event(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, SessionStarted):
            self.view.session(payload.start.session_id)
            self.view.start()
        elif isinstance(payload, IterationStarted):
            self._running[payload.iteration] = payload
            self.view.iteration_started(payload.iteration, payload.hat, payload.ts, payload.spent)
        elif isinstance(payload, IterationEnd):
            self.view.iteration_ended(payload)
            started = self._running.get(payload.iteration)
            watched = started is None or started.watched  # its output streamed
            if self.verbose and not watched and payload.output.strip():
                self.observe(
                    AgentOutput(
                        hat=payload.hat,
                        iteration=payload.iteration,
                        kind="text",
                        text=payload.output,
                    )
                )
            self._running.pop(payload.iteration, None)
        elif isinstance(payload, Waiting):
            self.view.waiting(payload)

    def observe(self, piece: AgentOutput) -> None:
        """The engine's output observer (``-v``)."""
        started = self._running.get(piece.iteration)
        self.view.output(piece, numbered=started is not None and started.alongside)

    async def aclose(self) -> None:
        """Erase the status line before the summary is printed."""
        self.view.stop()
