"""Extensions: bus subscribers that also take part in an iteration.

The task, theme and experience domains connect to the loop as extensions. Each
subscribes to the bus in :meth:`Extension.attach` and publishes its results as
events (``task.completed``, ``theme.error``...). The engine also asks every
extension, at fixed points of an iteration, for:

* :meth:`on_iteration_start`: act at the start of an iteration (the theme heartbeat)
  and return events to publish before the hat runs (an ``interrupt`` event);
* :meth:`prompt_section`: a short block of context for the hat's prompt;
* :meth:`completion_blocker`: a reason to refuse the completion event, or ``None``;
* :meth:`committed`: an iteration just reached the journal (its typed record), before
  ``loop.iteration.done`` is published;
* :meth:`published`: events published outside any iteration (by a subscriber, between
  iterations) were journaled and routed (their ``events.published`` record);
* :meth:`flush`: write out anything buffered; the loop is about to wait (a hat that is
  not instant, a turn of the event loop) or to end;
* :meth:`child_env`: variables for the child processes of a running iteration (an
  endpoint's address and a secret that names the iteration), and
  :meth:`release_child_env`: the iteration's backend call is over, so what
  :meth:`child_env` handed out is void.

The engine calls a per-iteration hook only on the extensions that override it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loop._user_code import load_named
from loop.bus import EventBus
from loop.errors import UsageError
from loop.events import Event
from loop.records import EventsPublished, IterationEnd

__all__ = ["Extension", "RunningIteration", "extensions_from"]


@dataclass(frozen=True, slots=True)
class RunningIteration:
    """One iteration whose hat is running: who runs it, and where its files are.

    Several may be running at once (each is its own record); ``(session_id,
    iteration)`` names one.

    Attributes:
        session_id: the session's id.
        session_dir: the session's folder (absolute).
        hat: the hat running the iteration.
        iteration: the iteration's number (1 for the session's first).
        activation: how many times the hat ran before (0 for its first run).
        events_file: the attempt's events file (``LOOP_EVENTS_FILE``); its folder is
            the attempt's own (``LOOP_ITERATION_DIR``).
        attempt: which run of the iteration this is (1, unless a crash interrupted one).
    """

    session_id: str
    session_dir: Path
    hat: str
    iteration: int
    activation: int
    events_file: Path
    attempt: int = 1


class Extension:
    """Base class with no-op defaults; override what the extension needs."""

    name: str = "extension"

    def attach(self, bus: EventBus) -> None:
        """Subscribe handlers on ``bus`` (keep the bus to publish results)."""

    async def on_iteration_start(self, iteration: int, hat: str) -> list[Event]:
        """Act at the start of iteration ``iteration`` (run by ``hat``); return events."""
        return []

    def prompt_section(self, hat: str) -> str | None:
        """Context for ``hat``'s prompt (Markdown, a few lines), or ``None``."""
        return None

    def completion_blocker(self) -> str | None:
        """Why the loop may not complete now, or ``None`` when it may."""
        return None

    def committed(self, record: IterationEnd) -> None:
        """Iteration ``record`` is in the journal."""

    def published(self, record: EventsPublished) -> None:
        """Events published outside any iteration are in the journal (``record``)."""

    def flush(self) -> None:
        """Write out what is buffered (called before the loop waits, and at the end)."""

    def child_env(self, iteration: RunningIteration) -> Mapping[str, str]:
        """Variables for the child processes of ``iteration``.

        Called at most once per iteration, when its backend builds a child's
        environment (in-process backends never do). The engine's own ``LOOP_*``
        variables win over a name given here.
        """
        return {}

    def release_child_env(self, iteration: RunningIteration) -> None:
        """``iteration``'s backend call returned or was cancelled: revoke what
        :meth:`child_env` gave it. Called only for an iteration it was asked about."""

    async def aclose(self) -> None:
        """Release what the extension holds when the run ends."""


def extensions_from(specs: Sequence[str], *, where: Path, option: str) -> list[Extension]:
    """New extensions from their names, ``module:factory`` each (a class of
    :class:`Extension`, or a function that returns one), imported from ``where`` (the
    folder a replay runs in, the pytest rootdir) as a ``python`` hat's module is: what
    a replay of a session they published in needs (``replay --extension``, the pytest
    plugin's ``hatloop_extensions``). Each call makes new ones: each replay its own.

    Raises:
        UsageError: one line naming ``option`` and the name: not ``module:factory``, the
            module cannot be imported (or raised as it was), no such factory, or it did
            not give an :class:`Extension`.
    """
    out: list[Extension] = []
    for spec in specs:
        try:
            factory = load_named(spec, where)
        except ValueError as exc:
            raise UsageError(f"{option} {spec}: {exc}") from None
        if not callable(factory):
            raise UsageError(f"{option} {spec}: not a class or function to call")
        try:
            made = factory()
        except Exception as exc:
            raise UsageError(f"{option} {spec}: raised {type(exc).__name__}: {exc}") from None
        if not isinstance(made, Extension):
            raise UsageError(
                f"{option} {spec}: gave a {type(made).__name__}, not an Extension of hatloop's"
            )
        out.append(made)
    return out
