"""The one seam between the engine and the outside world: the Backend protocol.

Every way of running a hat (scripted, command, python, claude, replay) implements
:class:`Backend`. The engine builds a :class:`BackendRequest`, awaits ``run`` inside a
cancel scope (the per-iteration timeout), and reads a :class:`BackendResult`. A
backend reports an ordinary failure (non-zero exit, an error result) in the result;
it raises :class:`~loop.errors.BackendUnavailable` only when it cannot run at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loop.events import Event

__all__ = ["Backend", "BackendRequest", "BackendResult"]


@dataclass(frozen=True, slots=True)
class BackendRequest:
    """What a backend needs to run one iteration of one hat.

    ``activation`` is how many times this hat ran before (0 for its first run), derived
    from the session journal, so deterministic backends index their outputs by it and a
    resumed session carries on where it stopped. ``triggers`` are the events that
    activated the hat; ``env`` carries the ``LOOP_*`` variables for child processes.
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
    iteration_dir: Path | None = None
    triggers: tuple[Event, ...] = ()


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


@runtime_checkable
class Backend(Protocol):
    """Runs one iteration of a hat."""

    kind: str
    # Optional: ``uses_files = False`` tells the engine not to create the iteration's
    # folder and events file up front (backends without a child process).

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the hat once with ``request.prompt``; never raise for ordinary failures."""
        ...
