"""The one seam between the engine and the outside world: the :class:`Backend` base class.

Every way of running a hat (scripted, command, python, claude, replay) subclasses
:class:`Backend`, as every httpx transport subclasses ``BaseTransport``. The engine
builds a :class:`BackendRequest`, awaits :meth:`Backend.run` inside the iteration's
timeout scope (the same path for every backend), and reads a :class:`BackendResult`.
A backend reports an ordinary failure (non-zero exit, an error result) in the result;
it raises :class:`~loop.errors.BackendUnavailable` only when it cannot run at all.

A backend states what it needs from the engine in its attributes, whose defaults are
the safe choice for a backend that says nothing:

=================  =======  ==========================================================
attribute          default  meaning
=================  =======  ==========================================================
``kind``           (none)   its type, recorded with each iteration (``command``...)
``uses_files``     True     the engine makes the iteration's folder and an empty events
                            file first (a child process may append to it)
``instant``        False    ``run`` answers without waiting on anything (no process, no
                            I/O): the engine need not flush buffered output before it
``writes_events``  True     its run may append events or tool calls to the attempt's
                            events file (an agent's ``emit``, a python hat's
                            ``ctx.emit``, a replayed emit): the engine names the file in
                            the request and reads it after the call; False (with
                            ``uses_files`` false): the request names none, none is read
``timeout_seconds`` None    its own limit; the hat runs for the tighter of it and the
                            hat's (``request.timeout_seconds`` is that tighter one)
``own_timeout``    False    ``run`` stops itself at ``request.timeout_seconds`` and
                            returns what it got, so the engine's scope is only a
                            backstop, a little later
``uses_loop_tools`` False   its agent is given hatloop's tools over MCP: the runner
                            serves the session's endpoint (``[mcp] serve = "auto"``)
``watches_output`` False    its child's output is watched as it arrives
                            (:meth:`Backend.watch`): ``request.observer`` gets it
                            (``-v``) and ``request.idle_timeout_seconds`` applies
``reports_cost``   False    its results carry ``cost_usd`` (``max_cost_usd`` holds it)
``reports_tokens`` False    its results carry token counts (``max_tokens`` holds it)
``stop_grace_seconds`` 2.0  a child it stops (a timeout, a cancellation, a resume that
                            finds it left running) gets SIGTERM and this long to exit
                            before SIGKILL; 0: SIGKILL at once
=================  =======  ==========================================================

A backend that watches its child's output passes :meth:`Backend.watch` to
:func:`~loop.backends._process.run_process`; what a line of its stdout means to a person
(a line as it is, or an agent CLI's JSON line read as text and tool calls) is its
:meth:`Backend.output_reader`. The observation itself is in one place, ``run_process``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from loop import locations
from loop.backends._output import OutputWatch
from loop.backends._process import KILL_GRACE_SECONDS
from loop.backends._procs import SpawnedProcess
from loop.events import Event

__all__ = [
    "AgentOutput",
    "Backend",
    "BackendRequest",
    "BackendResult",
    "OutputKind",
    "OutputObserver",
    "OutputReader",
    "RateLimit",
    "child_env",
    "effective_timeout",
]

# ``line``: a line the child printed as it is; ``text``: what an agent said; ``tool``: a
# tool call of an agent (its name and a short form of its input).
OutputKind = Literal["line", "text", "tool"]


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """A piece of a hat's output as it arrives, for a person to follow (``-v``)."""

    hat: str
    iteration: int
    kind: OutputKind
    text: str


OutputObserver = Callable[[AgentOutput], None]


class OutputReader:
    """Reads a child's stdout, line by line as it arrives, into what a person follows.

    The base class hands on every line as it is (``line``); the agent-CLI backends read
    their JSON lines into ``text`` and ``tool`` pieces. One reader reads one run.
    """

    def read(self, line: str) -> Iterable[tuple[OutputKind, str]]:
        """The pieces one stdout line holds."""
        return (("line", line),)

    def end(self) -> Iterable[tuple[OutputKind, str]]:
        """What is left once the output is all read (text held back for its line end)."""
        return ()


@dataclass(slots=True, kw_only=True)
class BackendRequest:
    """What a backend needs to run one iteration of one hat.

    ``activation`` is how many times this hat ran before (0 for its first run), derived
    from the session journal, so deterministic backends index their outputs by it and a
    resumed session carries on where it stopped. ``triggers`` are the events that
    activated the hat; ``env`` holds the session's variables for a child process (the
    session folder, the tools' settings...), the same for every iteration, and
    :meth:`variables` adds the iteration's own. ``observer`` (``-v``) and
    ``idle_timeout_seconds`` concern backends that watch their child's output
    (:attr:`Backend.watches_output`); the others never call the one nor apply the other.

    ``attempt`` numbers the runs of this iteration (a crash interrupted the earlier
    ones); each attempt has its own folder, :attr:`iteration_dir`, which holds
    ``events_file``: ``None`` for a backend with neither files nor events to write
    (``uses_files`` and ``writes_events`` both false: the scripted backend), which has
    no attempt folder either. ``root`` is the folder the attempt's files are reached from
    without following links (see :mod:`loop._fs`; ``None``: the attempt's folder is
    trusted as given). ``on_child`` is told who each child process the backend starts
    is (``run_process(on_start=...)``), so that a resume can stop it if it outlives
    the run.

    A request is a value: a backend reads it and never changes it. It is not ``frozen``
    because the engine builds one per iteration, and a frozen dataclass sets each field
    through ``object.__setattr__``: about three times the cost of building it.
    """

    hat: str
    prompt: str
    iteration: int
    session_id: str
    activation: int
    events_file: Path | None
    workdir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float | None = None
    triggers: tuple[Event, ...] = ()
    observer: OutputObserver | None = None
    idle_timeout_seconds: float | None = None
    attempt: int = 1
    root: Path | None = None
    on_child: Callable[[SpawnedProcess], None] | None = None

    @property
    def iteration_dir(self) -> Path:
        """The attempt's own folder (the events file's): prompt and agent config go here.

        Raises:
            ValueError: the request has no events file (its backend says it has no files
                and writes no events).
        """
        if self.events_file is None:
            raise ValueError(f"hat {self.hat!r}: its backend has no attempt folder")
        return self.events_file.parent

    def variables(self) -> dict[str, str]:
        """Every variable the loop gives a child process: the session's (``env``) and the
        attempt's (``LOOP_EVENTS_FILE``, ``LOOP_ITERATION_DIR``, ``LOOP_SESSION_ID``,
        ``LOOP_ITERATION``, ``LOOP_ATTEMPT``, ``LOOP_HAT``), which ``python -m loop emit``
        and the tools read: a child writes where these say, never where it guesses."""
        folder = self.iteration_dir
        return {
            **self.env,
            locations.ENV_EVENTS_FILE: str(self.events_file),
            locations.ENV_ITERATION_DIR: str(folder),
            locations.ENV_SESSION_ID: self.session_id,
            locations.ENV_ITERATION: str(self.iteration),
            locations.ENV_ATTEMPT: str(self.attempt),
            locations.ENV_HAT: self.hat,
        }


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Why a failed call was refused by a rate or usage limit: the loop waits it out.

    ``kind`` is ``rate_limit`` (requests or tokens per minute, an overloaded API: gone in
    seconds or minutes) or ``usage_limit`` (a plan's quota: a 5-hour window, a daily
    quota). ``reset_at`` (seconds since the epoch) and ``retry_after`` (seconds) are set
    when the CLI said when to try again.
    """

    kind: Literal["rate_limit", "usage_limit"]
    message: str
    reset_at: float | None = None
    retry_after: float | None = None


@dataclass(slots=True)
class BackendResult:
    """What came back: the output text and how the run went.

    ``limited`` is set on a failed result that a rate or usage limit caused: the engine
    waits and runs the iteration again instead of counting a failure. ``notes``: what the
    agent's CLI warned of during the run ("Loop detected, stopping execution"), one line
    each; the engine adds them to the iteration's notes, so a person reading the log or
    ``show`` learns why an agent stopped early.
    """

    output: str
    ok: bool = True
    exit_code: int | None = 0
    reason: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    limited: RateLimit | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def failed(
        cls, reason: str, *, output: str = "", exit_code: int | None = None
    ) -> BackendResult:
        """A failed iteration with its reason."""
        return cls(output=output, ok=False, exit_code=exit_code, reason=reason)


class Backend:
    """Runs one iteration of a hat. Subclass it: set ``kind``, implement :meth:`run`, and
    change a capability from its default only when the backend really has it."""

    kind: str
    uses_files: bool = True
    instant: bool = False
    writes_events: bool = True
    timeout_seconds: float | None = None
    own_timeout: bool = False
    uses_loop_tools: bool = False
    watches_output: bool = False
    reports_cost: bool = False
    reports_tokens: bool = False
    stop_grace_seconds: float = KILL_GRACE_SECONDS

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the hat once with ``request.prompt``; never raise for ordinary failures.

        Raises:
            BackendUnavailable: the backend cannot run at all (its program is missing).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    def output_reader(self) -> OutputReader:
        """A fresh reader of this backend's stdout (see :class:`OutputReader`)."""
        return OutputReader()

    def watch(self, request: BackendRequest) -> OutputWatch | None:
        """What watches one run of the child for ``request``: its stdout read by
        :meth:`output_reader` into ``request.observer``, and its silence measured against
        ``request.idle_timeout_seconds``. None when nobody looks and no limit is set."""
        observer, idle = request.observer, request.idle_timeout_seconds
        if observer is None and idle is None:
            return None
        if observer is None:
            return OutputWatch(idle_timeout=idle)
        reader = self.output_reader()
        hat, iteration = request.hat, request.iteration

        def hand_on(pieces: Iterable[tuple[OutputKind, str]]) -> None:
            for kind, text in pieces:
                observer(AgentOutput(hat=hat, iteration=iteration, kind=kind, text=text))

        return OutputWatch(
            on_line=lambda line: hand_on(reader.read(line)),
            on_end=lambda: hand_on(reader.end()),
            idle_timeout=idle,
        )


def child_env(request: BackendRequest, own: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a backend's child process: this process's environment, then the
    backend's own settings (``env`` in its config), then the loop's
    (:meth:`BackendRequest.variables`). The one place a child's environment is made.

    The loop's ``PATH`` is this Python's folder before this process's ``PATH``; a backend
    that sets its own ``PATH`` keeps it, with this Python's folder before it (the program
    is looked up in it, as ``doctor`` and the preflight check do)."""
    env = {**os.environ, **(own or {}), **request.variables()}
    if own and "PATH" in own:
        here = str(Path(sys.executable).parent)
        env["PATH"] = here + (os.pathsep + own["PATH"] if own["PATH"] else "")
    return env


def effective_timeout(*limits: float | None) -> float | None:
    """The tightest of the given limits, or None when none is set."""
    set_limits = [t for t in limits if t is not None]
    return min(set_limits) if set_limits else None
