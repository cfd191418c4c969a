"""Progress on stderr while a run goes, and the summary on stdout when it ends."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from loop._text import iterations_text, them
from loop.bus import EventBus
from loop.engine.decide import FIRST_BACKOFF_MAX, Limits, WaitPlan
from loop.engine.lifecycle import (
    ITERATION_DONE,
    LOOP_RESUMED,
    LOOP_STARTED,
    LOOP_WAITING,
    SessionStarted,
    Waiting,
)
from loop.engine.state import Exhaustion, HatUsage, LoopState
from loop.events import Event
from loop.exits import REASONS_FINAL, exit_code_for
from loop.extensions import Extension
from loop.records import IterationEnd

__all__ = [
    "ProgressReporter",
    "RunSummary",
    "render_summary",
    "resume_after",
    "resume_command",
]

log = structlog.get_logger("loop.progress")


@dataclass
class RunSummary:
    """How a run ended, for the closing summary and the exit code."""

    session_id: str
    reason: str
    exit_code: int
    iterations: int
    elapsed: float
    failed_iterations: int
    events_per_hat: dict[str, int]
    activations: dict[str, int]
    cost_usd: float
    resumed: bool
    session_dir: str
    notes: list[str] = field(default_factory=list)
    usage_per_hat: dict[str, HatUsage] = field(default_factory=dict)
    tokens: int = 0
    resume_command: str | None = None
    unrouted_topic: str | None = None

    @classmethod
    def of(
        cls,
        state: LoopState,
        reason: str,
        *,
        session_id: str,
        session_dir: str,
        elapsed: float,
        resumed: bool,
        notes: list[str],
        limits: Limits | None = None,
        refused: WaitPlan | None = None,
    ) -> RunSummary:
        """The summary of a run that ended for ``reason`` in ``state`` (``limits``: what
        it ran with, and ``refused``: the wait a ``rate_limited`` stop would not make, for
        the resume command's hint)."""
        return cls(
            session_id=session_id,
            reason=reason,
            exit_code=exit_code_for(reason),
            iterations=state.iteration,
            elapsed=elapsed,
            failed_iterations=state.failed_iterations,
            events_per_hat=dict(state.events_per_hat),
            activations=dict(state.activations),
            cost_usd=state.cost_usd,
            resumed=resumed,
            session_dir=session_dir,
            notes=[*notes, *_state_notes(state, reason)],
            usage_per_hat=dict(state.usage_per_hat),
            tokens=state.tokens,
            resume_command=resume_command(session_id, reason, state, limits, refused),
            unrouted_topic=state.unrouted if reason == "unrouted_event" else None,
        )


def _state_notes(state: LoopState, reason: str) -> list[str]:
    """What the state says of how the run ended: the iterations its end cut short, a
    completion refused (why the loop went on until a limit), and the failure that ended a
    run of failures."""
    notes = []
    done = reason in REASONS_FINAL
    if state.in_flight:
        numbers = sorted(state.in_flight)
        hats = sorted({state.in_flight[n].hat for n in numbers})
        verb = "was" if len(numbers) == 1 else "were"
        note = (
            f"{iterations_text(numbers)} ({', '.join(hats)}) {verb} in flight as the run "
            f"stopped: nothing of {them(numbers)} was committed"
        )
        if not done:
            note += f", a resume runs {them(numbers)} again"
        notes.append(note)
    if state.refused is not None and not done:
        notes.append(state.refused)  # why it went on: "LOOP_COMPLETE refused: ..."
    if reason == "max_consecutive_failures" and state.last_failure is not None:
        notes.append(
            f"{state.consecutive_failures} iteration(s) failed in a row; the last: "
            f"{state.last_failure}"
        )
    if reason == "stale_loop" and state.last_signature is not None:
        topic, source, payload = state.last_signature
        shown = payload if len(payload) <= 60 else payload[:57] + "..."
        notes.append(
            f"{topic} from {source} came {state.repeat_count} times in a row, the same "
            f"each time ({shown!r}); change {source}'s prompt (its instructions, say) or "
            "backend, or raise [loop] stale_threshold, in loop.toml before you resume: a "
            "resume as it is stops again"
        )
    if reason == "unrouted_event" and state.unrouted is not None:
        notes.append(
            f"add a hat triggered by {state.unrouted} to loop.toml (or have the hat publish "
            "a topic a hat takes) before you resume: a resume as it is stops again"
        )
    if reason == "no_pending_events":
        notes += [_exhausted_note(hat, why) for hat, why in state.exhausted.items()]
    return notes


def _exhausted_note(hat: str, why: Exhaustion) -> str:
    """Why a hat's events left the queue: it reached ``max_activations``, they were
    dropped, and who took ``<hat>.exhausted``; with no taker, what a resume needs."""
    note = (
        f"hat {hat} reached max_activations ({why.activations}): {why.dropped} event(s) "
        f"for it dropped, "
    )
    if why.taker is not None:
        return note + f"{why.topic} went to hat {why.taker}"
    return note + (
        f"and {why.topic} had no taker; add a hat triggered by {why.topic} to loop.toml "
        "before you resume (the dropped events are gone: raising max_activations brings "
        "none back): a resume as it is stops again"
    )


def _untaken(state: LoopState) -> list[str]:
    """The ``<hat>.exhausted`` topics no hat took."""
    return [why.topic for why in state.exhausted.values() if why.taker is None]


def resume_after(reason: str, state: LoopState) -> str | None:
    """What ``loop.toml`` needs before a resume of a session that ended for ``reason``
    goes on (None: nothing, or no resume goes on): its resume as it is stops again at
    once. ``status`` says it beside the resume command, the summary in its note."""
    if reason == "stale_loop":
        hat = f"hat {state.last_signature[1]}'s" if state.last_signature else "the hat's"
        return f"{hat} prompt or backend, or [loop] stale_threshold, has changed in loop.toml"
    if reason == "unrouted_event" and state.unrouted is not None:
        return f"loop.toml has a hat triggered by {state.unrouted}"
    if reason == "no_pending_events" and (topics := _untaken(state)):
        return f"loop.toml has a hat triggered by {' or '.join(topics)}"
    return None


def resume_command(
    session_id: str,
    reason: str,
    state: LoopState,
    limits: Limits | None,
    refused: WaitPlan | None = None,
) -> str | None:
    """The command that goes on with a session that ended for ``reason`` (None when it
    is done), raising the limit it reached: the summary and ``status`` both say this.

    Limits keep on counting across a resume (iterations, failures in a row, spend), so
    the hint raises the limit above what was reached, not to a fresh allowance. For
    ``rate_limited``, above the wait the loop would not make (``refused``; ``status``,
    whose journal does not hold it, goes by ``max_wait_seconds``).
    """
    if reason in REASONS_FINAL:
        return None
    if reason == "no_pending_events" and not _untaken(state):
        return None  # nothing is left to do, nor can be: no hat can take a dropped event
    flag = ""
    if limits is None:
        pass
    elif reason == "max_iterations":
        flag = f" --max-iterations {max(state.iteration * 2, limits.max_iterations + 1)}"
    elif reason == "max_runtime":
        longer = max(state.elapsed, limits.max_runtime_seconds) * 2
        flag = f" --max-runtime {max(60, math.ceil(longer))}"
    elif reason == "max_consecutive_failures":
        more = state.consecutive_failures + limits.max_consecutive_failures
        flag = f" --max-consecutive-failures {more}"
    elif reason == "budget_exhausted":
        budget = limits.budget
        if budget.max_cost_usd is not None and state.cost_usd >= budget.max_cost_usd:
            flag = f" --max-cost-usd {_twice_dollars(state.cost_usd)}"
        elif budget.max_tokens is not None and state.tokens >= budget.max_tokens:
            flag = f" --max-tokens {state.tokens * 2}"
        flag += _hat_budget_flags(state, limits)  # each hat's spent budget, too
    elif reason == "rate_limited":
        flag = _wait_flag(limits, refused)
    return f"python -m loop run --resume {session_id}{flag}"


def _wait_flag(limits: Limits, refused: WaitPlan | None) -> str:
    """The flag that lets a resume wait out the limit: ``--max-wait`` at twice the wait
    refused (the iteration's waits in all), else twice ``max_wait_seconds``, and at
    least twice a first backoff (a resume starts its waits anew); ``--max-runtime`` when
    the wait would have passed the runtime left."""
    if refused is not None and refused.passes == "max_runtime_seconds":
        longer = (limits.max_runtime_seconds + refused.over) * 2
        return f" --max-runtime {max(60, math.ceil(longer))}"
    needed = limits.max_wait_seconds + (refused.over if refused is not None else 0.0)
    return f" --max-wait {math.ceil(max(needed, FIRST_BACKOFF_MAX) * 2)}"


def _twice_dollars(spent: float) -> str:
    """Twice ``spent``, rounded up to the cent (past float noise: 1.2 gives 2.4): a
    budget above what was spent."""
    return f"{math.ceil(round(spent * 200, 6)) / 100:g}"


def _hat_budget_flags(state: LoopState, limits: Limits) -> str:
    """The flags that raise each hat budget spent (``--hat-max-cost-usd HAT=USD``)."""
    flags = ""
    for hat, budget in limits.hat_budgets.items():
        usage = state.usage_per_hat.get(hat)
        if usage is None:
            continue
        cost, tokens = usage.cost_usd, usage.tokens
        if budget.max_cost_usd is not None and cost is not None and cost >= budget.max_cost_usd:
            flags += f" --hat-max-cost-usd {hat}={_twice_dollars(cost)}"
        if budget.max_tokens is not None and tokens is not None and tokens >= budget.max_tokens:
            flags += f" --hat-max-tokens {hat}={tokens * 2}"
    return flags


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def usage_text(
    cost_usd: float | None, input_tokens: int | None, output_tokens: int | None
) -> str | None:
    """``$0.0123, 1200 in / 340 out tokens``: what a backend reported, or None for nothing."""
    parts = [f"${cost_usd:.4f}"] if cost_usd is not None else []
    if input_tokens is not None or output_tokens is not None:
        parts.append(f"{_count(input_tokens or 0)} in / {_count(output_tokens or 0)} out tokens")
    return ", ".join(parts) or None


def spent_text(cost_usd: float, tokens: int) -> str | None:
    """``$0.1234 · 12.3k tokens``: a session's spend so far, or None when nothing was."""
    parts = [f"${cost_usd:.4f}"] if cost_usd else []
    if tokens:
        parts.append(f"{_count(tokens)} tokens")
    return " · ".join(parts) or None


class ProgressReporter(Extension):
    """Logs one line per iteration: number, hat, elapsed, events, status, cost, tokens,
    and the session's spend so far."""

    name = "progress"

    def __init__(self) -> None:
        self._cost = 0.0
        self._tokens = 0

    def attach(self, bus: EventBus) -> None:
        """Follow the loop's lifecycle events."""
        bus.subscribe(ITERATION_DONE, self._iteration, name="progress")
        bus.subscribe(LOOP_STARTED, self._started, name="progress")
        bus.subscribe(LOOP_RESUMED, self._started, name="progress")
        bus.subscribe(LOOP_WAITING, self._waiting, name="progress")

    def _waiting(self, event: Event) -> None:
        if not isinstance(event.payload, Waiting) or event.payload.wait is None:
            return
        wait = event.payload.wait
        log.warning(
            f"waiting out a {wait.limit.replace('_', ' ')}",
            iteration=wait.iteration,
            hat=wait.hat,
            until=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wait.until)),
            left=f"{max(wait.until - event.ts, 0.0):.0f}s",
            attempt=wait.attempt,
            message=wait.message,
        )

    def _started(self, event: Event) -> None:
        if not isinstance(event.payload, SessionStarted):
            return
        started = event.payload
        self._cost, self._tokens = started.cost_usd, started.tokens
        fields: dict[str, Any] = {
            "session": started.start.session_id,
            "hats": len(started.start.hats),
        }
        if spent := spent_text(self._cost, self._tokens):
            fields["spent"] = spent
        if started.resumed_at is not None:
            log.info("session resumed", **fields, after_iteration=started.resumed_at)
            if (override := started.override) is not None:  # what changed, as show says
                log.info("limits changed from here on", **override.changes(started.limits_before))
        else:
            log.info("session started", **fields)

    def _iteration(self, event: Event) -> None:
        if not isinstance(event.payload, IterationEnd):
            return
        rec = event.payload
        fields: dict[str, Any] = {
            "iteration": rec.iteration,
            "hat": rec.hat,
            "status": rec.status,
            "took": f"{rec.duration:.2f}s",
            "elapsed": f"{rec.elapsed:.1f}s",
            # what was published: strict_publishes' dropped events are a note's
            "events": ",".join(e.topic for e in rec.events if e not in rec.dropped) or "-",
        }
        if rec.cost_usd is not None:
            fields["cost"] = f"${rec.cost_usd:.4f}"
            self._cost += rec.cost_usd
        if rec.input_tokens is not None or rec.output_tokens is not None:
            fields["tokens"] = f"{rec.input_tokens or 0}/{rec.output_tokens or 0}"
            self._tokens += (rec.input_tokens or 0) + (rec.output_tokens or 0)
        if spent := spent_text(self._cost, self._tokens):
            fields["spent"] = spent
        if rec.reason:
            fields["reason"] = rec.reason
        for note in rec.notes:
            log.warning("note", iteration=rec.iteration, note=note)
        if rec.status == "ok":
            log.info("iteration", **fields)
        else:
            log.warning("iteration failed", **fields)


def render_summary(summary: RunSummary, extra: list[str] | None = None) -> str:
    """The closing summary a person reads at a glance."""
    hats = " · ".join(f"{h} ×{n}" for h, n in summary.activations.items()) or "none"
    lines = [
        f"hatloop: {summary.reason} after {summary.iterations} iteration(s) in "
        f"{summary.elapsed:.2f}s (exit {summary.exit_code})",
        f"  session   {summary.session_id}" + ("  (resumed)" if summary.resumed else ""),
        f"  hats      {hats}",
        f"  events    {sum(summary.events_per_hat.values())} published by hats"
        + (
            f", {summary.failed_iterations} failed iteration(s)"
            if summary.failed_iterations
            else ""
        ),
    ]
    if spent := spent_text(summary.cost_usd, summary.tokens):
        lines.append(f"  spent     {spent}")
    if summary.unrouted_topic is not None:
        lines.append(f"  unrouted  {summary.unrouted_topic} (no hat is triggered by this topic)")
    usage = [
        f"{hat} {text}"
        for hat, u in summary.usage_per_hat.items()
        if (text := usage_text(u.cost_usd, u.input_tokens, u.output_tokens))
    ]
    if usage:
        lines.append("  usage     " + " · ".join(usage))
    lines += [f"  note      {n}" for n in summary.notes]
    lines += [f"  {line}" for line in (extra or [])]
    if summary.resume_command:
        lines.append(f"  resume    {summary.resume_command}")
    return "\n".join(lines)
