"""Resuming a stopped session, in pure code: its state, and the records a resume appends.

A resumed session keeps the limits and budgets it ran with (its journal's
``session.start``, changed by any earlier ``override``), except those given as flags to
``run --resume`` (:class:`LimitOverrides`) and those edited in the configuration since
the session started (:func:`resumed_limits`); a hat whose backend type changed
(``--backend``) is a change too. The flags the session was started with
(``--max-iterations``, ``--backend``...) hold on its resumes unless given again
(:func:`carried_flags`): a plain ``run --resume`` runs as the session started. The
changes are journaled as one ``override`` record right after the ``resume`` record, so
``status`` and a replay of the session's recording apply the same limits from the same
iteration on. A session that stopped as a stale loop goes on once the hat that repeated
itself has changed (:func:`streak_hat_changed`) or ``stale_threshold`` rose, on a fresh
streak (the journal's fold starts one at the first iteration after the stop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pydantic import TypeAdapter, ValidationError

from loop.backends.base import Backend
from loop.config import LoadedConfig
from loop.config.models import snapshot_limits
from loop.engine.prompt import PromptTemplate
from loop.engine.state import LoopState, RouteContext, fold
from loop.errors import InputError, SessionError
from loop.exits import REASONS_FINAL
from loop.records import (
    FlagValue,
    IterationEnd,
    JournalRecord,
    LimitSettings,
    Override,
    Resume,
    SessionStart,
    validation_message,
)

__all__ = [
    "LimitOverrides",
    "carried_flags",
    "journaled_limits",
    "resume_records",
    "resumed_limits",
    "streak_hat_changed",
]

_SETTINGS: TypeAdapter[LimitSettings] = TypeAdapter(LimitSettings)


@dataclass(frozen=True, slots=True)
class LimitOverrides:
    """The limits given on the command line of a resume (None: keep the session's); a
    hat's budgets by hat name (``--hat-max-cost-usd HAT=USD``), for the hats given."""

    max_iterations: int | None = None
    max_runtime_seconds: float | None = None
    max_consecutive_failures: int | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_wait_seconds: float | None = None
    hat_max_cost_usd: Mapping[str, float] | None = None
    hat_max_tokens: Mapping[str, int] | None = None

    def given(self) -> dict[str, Any]:
        """The limits given, by name (a hat's budgets: a mapping of the hats given)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


def carried_flags(
    records: Sequence[JournalRecord], given: Mapping[str, object]
) -> dict[str, FlagValue]:
    """The flags the session last ran with (its ``session.start``'s, or its last
    ``resume``'s) that this resume is not given again (``given``: the resume's, ``None``
    where absent): they hold, as if given again."""
    last: Mapping[str, FlagValue] = {}
    for record in records:
        if isinstance(record, SessionStart | Resume):
            last = record.flags
    return {name: value for name, value in last.items() if given.get(name) is None}


def resumed_limits(
    *,
    started: LimitSettings,
    last: LimitSettings,
    loaded: LimitSettings,
    given: LimitOverrides,
) -> LimitSettings:
    """The limits a session resumes with, limit by limit: the one given on the command
    line; else the configuration's when it differs from what the session started with
    (the file was edited since); else the one the session last ran with (``last``: a
    previous resume's override stays). The hats' budgets are taken so as a whole, then
    the hats given on the command line change theirs.

    Raises:
        ValueError: a limit given is out of range (``max_iterations = 0``, say).
    """
    flags = given.given()
    values: dict[str, Any] = {}
    for f in fields(LimitSettings):
        name = f.name
        edited = getattr(loaded, name) != getattr(started, name)
        kept = getattr(loaded, name) if edited else getattr(last, name)
        if name in flags and isinstance(kept, dict):  # a hat's budgets: the hats given
            values[name] = {**kept, **flags[name]}
        elif name in flags:
            values[name] = flags[name]
        else:
            values[name] = kept
    try:
        return _SETTINGS.validate_python(values, strict=False)  # a dict, of typed values
    except ValidationError as exc:
        raise ValueError(validation_message(exc)) from None


def streak_hat_changed(
    records: Sequence[JournalRecord],
    state: LoopState,
    templates: Mapping[str, PromptTemplate],
    backends: Mapping[str, Backend],
    redact: Callable[[str], str] | None = None,
) -> bool:
    """Whether a session that stopped as a stale loop resumes with the hat that repeated
    itself changed since it last ran: its last iteration's prompt, as journaled, is not
    one its template renders now (its instructions, description or publishes, the
    guardrails...), or it runs on another backend, or it is gone. Then the streak starts
    afresh (:func:`~loop.engine.state.restart_streak`), as the journal's fold does at the
    resumed run's first iteration; otherwise the resume stops again at once.

    ``templates`` and ``backends``: the resumed run's; ``redact``: the journal's
    redaction of the prompts it holds."""
    if not state.stale_stopped or state.last_signature is None:
        return False
    hat = state.last_signature[1]
    template, backend = templates.get(hat), backends.get(hat)
    if template is None or backend is None:
        return True
    last = next(
        (r for r in reversed(records) if isinstance(r, IterationEnd) and r.hat == hat), None
    )
    if last is None:  # the repeats came from its iterations: a journal cut short
        return False
    return last.backend != backend.kind or not template.renders(last.prompt, redact)


def journaled_limits(state: LoopState, start: SessionStart) -> LimitSettings:
    """The limits a session last ran with: its last override's, else its start's.

    Raises:
        SessionError: the journal's configuration snapshot cannot be read.
    """
    return state.settings if state.settings is not None else _started(start)


def _started(start: SessionStart) -> LimitSettings:
    try:
        return snapshot_limits(start.config)
    except ValueError as exc:
        raise SessionError(
            f"session {start.session_id}: its journaled configuration is not valid: {exc}"
        ) from exc


def resume_records(
    records: Sequence[JournalRecord],
    ctx: RouteContext,
    config: LoadedConfig,
    overrides: LimitOverrides,
    *,
    pid: int,
    now: float,
) -> tuple[LoopState, LimitSettings, list[JournalRecord]]:
    """Fold a stopped session's ``records``; the limits it resumes with and the records
    the resume appends (``resume``, and ``override`` when limits or backends change).

    Raises:
        SessionError: the session completed or was cancelled, or its journal does not
            start with ``session.start``.
        InputError: a limit given is out of range.
    """
    start = records[0] if records else None
    if not isinstance(start, SessionStart):
        raise SessionError("the journal does not start with a session.start record")
    state = fold(records, ctx)
    if state.termination in REASONS_FINAL:
        raise SessionError(
            f"session {start.session_id} already {state.termination}; start a new one"
        )
    started = _started(start)
    before = state.settings if state.settings is not None else started
    try:
        after = resumed_limits(
            started=started, last=before, loaded=config.limit_settings(), given=overrides
        )
    except ValueError as exc:
        raise InputError(f"run --resume {start.session_id}: {exc}") from None
    ran = {name: hat.backend for name, hat in start.hats.items()} | state.backends
    changed = {
        name: hat.backend
        for name, hat in config.topology().items()
        if ran.get(name) not in (None, hat.backend)
    }
    appended: list[JournalRecord] = [
        Resume(
            pid=pid,
            iteration=state.iteration,
            in_flight=min(state.in_flight, default=None),
            in_flight_all=tuple(sorted(state.in_flight)) if len(state.in_flight) > 1 else (),
            flags=dict(config.flags),
            ts=now,
        )
    ]
    if after != before or changed:
        values = {f.name: getattr(after, f.name) for f in fields(LimitSettings)}
        appended.append(
            Override(**values, after_iteration=state.iteration, backends=changed, ts=now)
        )
    return state, after, appended
