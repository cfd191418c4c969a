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
``timeout_seconds`` None    its own limit; the hat runs for the tighter of it and the
                            hat's (``request.timeout_seconds`` is that tighter one)
``own_timeout``    False    ``run`` stops itself at ``request.timeout_seconds`` and
                            returns what it got, so the engine's scope is only a
                            backstop, a little later
``uses_loop_tools`` False   its agent is given hatloop's tools over MCP: the runner
                            serves the session's endpoint (``[mcp] serve = "auto"``)
=================  =======  ==========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.events import Event

__all__ = ["Backend", "BackendRequest", "BackendResult", "child_env", "effective_timeout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendRequest:
    """What a backend needs to run one iteration of one hat.

    ``activation`` is how many times this hat ran before (0 for its first run), derived
    from the session journal, so deterministic backends index their outputs by it and a
    resumed session carries on where it stopped. ``triggers`` are the events that
    activated the hat; ``env`` holds the session's variables for a child process (the
    session folder, the tools' settings...), the same for every iteration, and
    :meth:`variables` adds the iteration's own.
    """

    hat: str
    prompt: str
    iteration: int
    session_id: str
    activation: int
    events_file: Path
    workdir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float | None = None
    triggers: tuple[Event, ...] = ()

    @property
    def iteration_dir(self) -> Path:
        """The iteration's own folder (the events file's): prompt and MCP config go here."""
        return self.events_file.parent

    def variables(self) -> dict[str, str]:
        """Every variable the loop gives a child process: the session's (``env``) and the
        iteration's (``LOOP_EVENTS_FILE``, ``LOOP_SESSION_ID``, ``LOOP_ITERATION``,
        ``LOOP_HAT``), which ``python -m loop emit`` and the tools read."""
        return {
            **self.env,
            "LOOP_EVENTS_FILE": str(self.events_file),
            "LOOP_SESSION_ID": self.session_id,
            "LOOP_ITERATION": str(self.iteration),
            "LOOP_HAT": self.hat,
        }


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
    timeout_seconds: float | None = None
    own_timeout: bool = False
    uses_loop_tools: bool = False

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the hat once with ``request.prompt``; never raise for ordinary failures.

        Raises:
            BackendUnavailable: the backend cannot run at all (its program is missing).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement run()")


def child_env(request: BackendRequest, own: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a backend's child process: this process's environment, then the
    backend's own settings (``env`` in its config), then the loop's
    (:meth:`BackendRequest.variables`). The one place a child's environment is made."""
    return {**os.environ, **(own or {}), **request.variables()}


def effective_timeout(*limits: float | None) -> float | None:
    """The tightest of the given limits, or None when none is set."""
    set_limits = [t for t in limits if t is not None]
    return min(set_limits) if set_limits else None
