"""The one seam between the engine and the outside world: the Backend protocol.

Every way of running a hat (scripted, command, python, claude, replay) implements
:class:`Backend`. The engine builds a :class:`BackendRequest`, awaits ``run`` inside a
cancel scope (the per-iteration timeout; none for a backend that declares itself
``instant``), and reads a :class:`BackendResult`. A
backend reports an ordinary failure (non-zero exit, an error result) in the result;
it raises :class:`~loop.errors.BackendUnavailable` only when it cannot run at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loop.events import Event

__all__ = ["Backend", "BackendRequest", "BackendResult", "LoopToolsUser", "effective_timeout"]


class BackendRequest:
    """What a backend needs to run one iteration of one hat.

    ``activation`` is how many times this hat ran before (0 for its first run), derived
    from the session journal, so deterministic backends index their outputs by it and a
    resumed session carries on where it stopped. ``triggers`` are the events that
    activated the hat; ``env`` carries the ``LOOP_*`` variables for child processes.

    ``events_file`` and ``iteration_dir`` may be given as text, and ``env`` as a function
    that makes it: they are built only when a backend reads them (in-process backends
    never do, and building them is a measurable part of an instant iteration).
    """

    __slots__ = (
        "_env",
        "_events_file",
        "_iteration_dir",
        "activation",
        "hat",
        "iteration",
        "prompt",
        "session_id",
        "timeout_seconds",
        "triggers",
        "workdir",
    )

    def __init__(
        self,
        *,
        hat: str,
        prompt: str,
        iteration: int,
        session_id: str,
        activation: int,
        events_file: Path | str,
        workdir: Path,
        env: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
        timeout_seconds: float | None = None,
        iteration_dir: Path | str | None = None,
        triggers: tuple[Event, ...] = (),
    ) -> None:
        self.hat = hat
        self.prompt = prompt
        self.iteration = iteration
        self.session_id = session_id
        self.activation = activation
        self._events_file = events_file
        self.workdir = workdir
        self._env = env
        self.timeout_seconds = timeout_seconds
        self._iteration_dir = iteration_dir
        self.triggers = triggers

    @property
    def events_file(self) -> Path:
        """The file ``python -m loop emit`` appends this iteration's events to."""
        if not isinstance(self._events_file, Path):
            self._events_file = Path(self._events_file)
        return self._events_file

    @property
    def env(self) -> Mapping[str, str]:
        """The ``LOOP_*`` variables (and the backend's own) for a child process."""
        env = self._env
        if env is None:
            env = self._env = {}
        elif callable(env):
            env = self._env = env()
        return env

    @property
    def iteration_dir(self) -> Path | None:
        """The iteration's own folder (the events file's folder), if the engine named one."""
        if self._iteration_dir is not None and not isinstance(self._iteration_dir, Path):
            self._iteration_dir = Path(self._iteration_dir)
        return self._iteration_dir

    def __repr__(self) -> str:
        return f"BackendRequest(hat={self.hat!r}, iteration={self.iteration})"


@dataclass(slots=True)
class BackendResult:
    """What came back: the output text and how the run went."""

    output: str
    ok: bool = True
    exit_code: int | None = 0
    reason: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # False when the backend knows nothing wrote the iteration's events file (an in-process
    # backend that did not emit): the engine then does not look for it. None: unknown.
    wrote_events_file: bool | None = None

    @classmethod
    def failed(
        cls, reason: str, *, output: str = "", exit_code: int | None = None
    ) -> BackendResult:
        """A failed iteration with its reason."""
        return cls(output=output, ok=False, exit_code=exit_code, reason=reason)


@runtime_checkable
class Backend(Protocol):
    """Runs one iteration of a hat."""

    kind: str
    # Optional flags (read with getattr, default False/True as noted):
    # ``uses_files = False`` tells the engine not to create the iteration's folder and
    #   events file up front (backends without a child process; default True).
    # ``instant = True`` says ``run`` never suspends (it awaits nothing that waits), so
    #   a timeout could never interrupt it: the engine runs it without a cancel scope
    #   (default False: every other backend runs under the per-iteration timeout).
    # ``timeout_seconds``: the backend's own limit; the engine runs the hat for the
    #   tighter of it and the hat's timeout (``request.timeout_seconds``).
    # ``own_timeout = True`` says ``run`` stops itself at ``request.timeout_seconds``
    #   and returns what it got (partial output, stderr): the engine's scope is then
    #   only a backstop, a little later (default False: the engine's scope is the limit).

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the hat once with ``request.prompt``; never raise for ordinary failures."""
        ...


def effective_timeout(*limits: float | None) -> float | None:
    """The tightest of the given limits, or None when none is set."""
    set_limits = [t for t in limits if t is not None]
    return min(set_limits) if set_limits else None


class LoopToolsUser:
    """A backend whose agent is given hatloop's tools (over MCP).

    The runner serves the session's MCP endpoint (``[mcp] serve = "auto"``) only when
    some hat's backend is one of these and :meth:`uses_loop_tools` says so.
    """

    def uses_loop_tools(self) -> bool:
        """Whether this backend hands its agent hatloop's tools (default: yes)."""
        return True
