"""The engine's decisions, in pure code over plain data.

* :func:`select_next`: which hat runs next and on which events;
* :func:`decide_outcome`: what an iteration publishes, whether it consumed its
  triggers, whether it asks to complete or cancel the loop;
* :func:`judge_completion`: whether a completion is accepted, on the state after the
  iteration's other events (``required_events``, the extensions' blockers);
* :func:`check_limits`: whether the loop stops now, and why; :func:`budget_spent`:
  which budget (the run's or a hat's) is spent;
* :func:`plan_wait`: how long to wait out a rate or usage limit, or why not to.

No clocks, no processes, no I/O: the driver passes in what it measured (``time`` here
only formats a reset time for a message).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from loop.backends.base import Backend, RateLimit
from loop.config import LoadedConfig
from loop.engine.state import LoopState, PendingEvent
from loop.events import Event, topic_matches
from loop.records import LimitSettings
from loop.routing import HatSpec
from loop.topics import COMPLETION_REJECTED

__all__ = [
    "FIRST_BACKOFF_MAX",
    "NO_BUDGET",
    "Budget",
    "Limits",
    "Outcome",
    "Selection",
    "WaitPlan",
    "allowed_publish",
    "budget_spent",
    "check_limits",
    "decide_outcome",
    "jitter_fraction",
    "judge_completion",
    "limits_from",
    "limits_of",
    "missing_required",
    "plan_wait",
    "select_next",
    "unheld_by_budgets",
]


@dataclass(slots=True)
class Selection:
    """The next step: run ``hat`` on ``triggers``, or drop them (``exhausted``).

    ``iteration``: the number it runs as, where the scheduler of parallel hats numbers its
    starts (:func:`loop.engine.schedule.plan_step`); None in a sequential loop, whose
    next iteration follows the last committed one."""

    hat: str
    triggers: tuple[PendingEvent, ...]
    exhausted: bool = False
    iteration: int | None = None


def select_next(state: LoopState, hats: dict[str, HatSpec]) -> Selection | None:
    """The hat of the oldest pending event, with every pending event routed to it."""
    if not state.pending:
        return None
    pending = state.pending
    hat = pending[0].hat
    triggers = (pending[0],) if len(pending) == 1 else tuple([p for p in pending if p.hat == hat])
    spec = hats[hat]
    if spec.max_activations is not None and state.activations.get(hat, 0) >= spec.max_activations:
        return Selection(hat=hat, triggers=triggers, exhausted=True)
    return Selection(hat=hat, triggers=triggers)


@dataclass(frozen=True, slots=True)
class Budget:
    """What a run (or one hat) may spend: dollars and tokens (input plus output)."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def spent(self, cost: float | None, tokens: int | None) -> str | None:
        """Which limit ``cost`` and ``tokens`` (None: never reported) reached, or None."""
        if self.max_cost_usd is not None and cost is not None and cost >= self.max_cost_usd:
            return f"max_cost_usd {self.max_cost_usd:g} reached (${cost:.4f} spent)"
        if self.max_tokens is not None and tokens is not None and tokens >= self.max_tokens:
            return f"max_tokens {self.max_tokens} reached ({tokens} spent)"
        return None


NO_BUDGET = Budget()


@dataclass(frozen=True)
class Limits:
    """The loop's limits (from ``[loop]``), its budget and each hat's."""

    max_iterations: int
    max_runtime_seconds: float
    max_consecutive_failures: int
    stale_threshold: int = 3
    budget: Budget = NO_BUDGET
    hat_budgets: Mapping[str, Budget] = field(default_factory=dict)
    max_wait_seconds: float = 3600.0


def limits_of(config: LoadedConfig) -> Limits:
    """The limits and budgets a configuration sets."""
    return limits_from(config.limit_settings(), config.loop.stale_threshold)


def limits_from(settings: LimitSettings, stale_threshold: int = 3) -> Limits:
    """The limits of ``settings`` (a configuration's, or an override's)."""
    names = set(settings.hat_max_cost_usd) | set(settings.hat_max_tokens)
    budget = Budget(settings.max_cost_usd, settings.max_tokens)
    return Limits(
        max_iterations=settings.max_iterations,
        max_runtime_seconds=settings.max_runtime_seconds,
        max_consecutive_failures=settings.max_consecutive_failures,
        stale_threshold=stale_threshold,
        budget=NO_BUDGET if budget == NO_BUDGET else budget,
        hat_budgets={
            n: Budget(settings.hat_max_cost_usd.get(n), settings.hat_max_tokens.get(n))
            for n in sorted(names)
        },
        max_wait_seconds=settings.max_wait_seconds,
    )


def unheld_by_budgets(config: LoadedConfig, backends: Mapping[str, Backend]) -> list[str]:
    """Hats a configured budget cannot hold, each said in one line: their backend reports
    no cost (``max_cost_usd``), or neither cost nor tokens (every budget)."""
    loop = config.loop
    out = []
    for name, backend in backends.items():
        hat = config.hats.get(name)
        if hat is None:
            continue
        cost = loop.max_cost_usd is not None or hat.max_cost_usd is not None
        tokens = loop.max_tokens is not None or hat.max_tokens is not None
        if (cost or tokens) and not (backend.reports_cost or backend.reports_tokens):
            out.append(f"hat {name!r}: its {backend.kind} backend reports no cost nor tokens")
        elif cost and not tokens and not backend.reports_cost:
            out.append(
                f"hat {name!r}: its {backend.kind} backend reports no cost, only tokens "
                "(set max_tokens to hold it)"
            )
    return out


def budget_spent(state: LoopState, limits: Limits, hat: str | None = None) -> str | None:
    """The budget already spent, described, or None: the run's, then (given ``hat``) the
    hat's.

    Spend is what the committed iterations reported (the journal's, so it carries across
    a resume). An activation is not started once a budget is spent; one in flight counts
    when it commits, so a run overshoots by what is in flight at most (one iteration's
    spend while iterations run one at a time). A backend that reports no cost is still
    held by the token budgets where it reports tokens.
    """
    run = limits.budget
    if run is not NO_BUDGET and (why := run.spent(state.cost_usd, state.tokens)):
        return why
    if hat is None or not limits.hat_budgets:
        return None
    budget = limits.hat_budgets.get(hat)
    usage = state.usage_per_hat.get(hat)
    if budget is None or usage is None:
        return None
    why = budget.spent(usage.cost_usd, usage.tokens)
    return f"hat {hat!r}: {why}" if why else None


def check_limits(state: LoopState, limits: Limits, elapsed: float) -> str | None:
    """The termination reason if the loop must stop before another iteration."""
    if state.completed:
        return "completed"
    if state.cancelled:
        return "cancelled"
    if state.unrouted is not None:
        return "unrouted_event"
    if state.repeat_count >= limits.stale_threshold:
        return "stale_loop"
    if state.consecutive_failures >= limits.max_consecutive_failures:
        return "max_consecutive_failures"
    if limits.budget is not NO_BUDGET and budget_spent(state, limits) is not None:
        return "budget_exhausted"
    if state.iteration >= limits.max_iterations:
        return "max_iterations"
    if elapsed >= limits.max_runtime_seconds:
        return "max_runtime"
    if not state.pending:
        return "no_pending_events"
    return None


@dataclass(slots=True)
class Outcome:
    """What one iteration amounts to.

    ``publish`` goes on the bus first; a completion the hat asked for (``completion``,
    its last event) is judged afterwards by :func:`judge_completion`, on the state that
    includes what ``publish`` changed.
    """

    status: Literal["ok", "failed"]
    publish: list[Event] = field(default_factory=list)
    consume: bool = False
    completion: Event | None = None
    completed: bool = False
    cancelled: bool = False
    dropped: list[Event] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


# Requests to the loop's tool domains: a hat may always make them, strict or not.
_TOOL_REQUESTS = ("task.", "theme.", "experience.")


def allowed_publish(hat: HatSpec, topic: str) -> bool:
    """Whether ``hat`` may publish ``topic`` under ``strict_publishes``: a topic its
    ``publishes`` match, its ``default_publishes``, or a tool request (``task.*``...).
    A hat that lists no ``publishes`` is not restricted."""
    if not hat.publishes or topic == hat.default_publishes or topic.startswith(_TOOL_REQUESTS):
        return True
    return any(topic_matches(p, topic) for p in hat.publishes)


def decide_outcome(
    hat: HatSpec,
    *,
    ok: bool,
    failure: str | None,
    events: list[Event],
    completion_event: str,
    now: float,
    cancellation_event: str | None = None,
    strict: bool = False,
) -> Outcome:
    """Decide what an iteration publishes, and whether it asks to complete or cancel.

    Rules: a failed iteration publishes nothing and keeps its triggers (the hat runs
    again on them); with ``strict``, events outside the hat's ``publishes`` are dropped
    (and listed in ``dropped``); an iteration left with no event uses
    ``default_publishes``, but a default never completes the loop; the cancellation
    event anywhere among the events cancels the run (and no completion is judged); the
    completion event counts only as the last event, and is judged by
    :func:`judge_completion` once the others are published. ``now``: the time of the
    events decided here.
    """
    if not ok:
        return Outcome(status="failed", reason=failure or "backend failed")
    dropped: list[Event] = []
    if strict and hat.publishes:
        kept = [e for e in events if allowed_publish(hat, e.topic)]
        if len(kept) != len(events):
            dropped = [e for e in events if not allowed_publish(hat, e.topic)]
            events = kept
    out = _outcome(hat, events, completion_event, now, cancellation_event)
    if dropped:
        out.dropped = dropped
        out.notes[:0] = [
            f"{e.topic} dropped: not in hat {hat.name!r}'s publishes (strict_publishes)"
            for e in dropped
        ]
        if out.status == "failed":
            out.reason = f"no events emitted ({len(dropped)} dropped by strict_publishes)"
    return out


def _outcome(
    hat: HatSpec,
    events: list[Event],
    completion_event: str,
    now: float,
    cancellation_event: str | None,
) -> Outcome:
    if not events:
        if hat.default_publishes is None:
            return Outcome(status="failed", reason="no events emitted")
        if hat.default_publishes == completion_event:
            return Outcome(
                status="failed",
                reason=f"no events emitted (a default publish of {completion_event} "
                "cannot complete the loop)",
            )
        default = Event(topic=hat.default_publishes, payload="", source=hat.name, ts=now)
        return Outcome(
            status="ok",
            publish=[default],
            consume=True,
            notes=[f"default_publishes {hat.default_publishes}"],
        )
    out = Outcome(status="ok", publish=list(events), consume=True)
    if cancellation_event is not None and any(e.topic == cancellation_event for e in events):
        out.cancelled = True
        if events[-1].topic == completion_event:
            out.notes.append(f"{completion_event} ignored: the run was cancelled")
        return out
    if len(events) > 1 and any(e.topic == completion_event for e in events[:-1]):
        out.notes.append(f"{completion_event} ignored: it was not the last event")
    if events[-1].topic == completion_event:
        out.completion = out.publish.pop()
    return out


def missing_required(
    required: Sequence[str], seen: Collection[str], published: Iterable[Event]
) -> list[str]:
    """The ``required_events`` topics published neither before (``seen``) nor in this
    iteration (``published``), in the configured order."""
    missing = [t for t in required if t not in seen]
    if missing:
        now = {e.topic for e in published}
        missing = [t for t in missing if t not in now]
    return missing


def judge_completion(
    outcome: Outcome,
    hat: str,
    *,
    blocker: str | None,
    missing: Sequence[str],
    now: float,
) -> list[Event]:
    """Accept or refuse the completion ``outcome`` asked for; the events to publish.

    Judged after the iteration's other events were published: ``missing`` are the
    required events still unpublished, ``blocker`` an extension's reason (open tasks).
    Accepted, the completion event is published and ``outcome.completed`` set; refused,
    it is published with a ``loop.completion_rejected`` event for the hat saying why.
    """
    event = outcome.completion
    if event is None:
        return []
    reasons = []
    if missing:
        reasons.append("required events not published yet: " + ", ".join(missing))
    if blocker:
        reasons.append(blocker)
    if not reasons:
        outcome.completed = True
        return [event]
    why = f"{event.topic} refused: " + "; ".join(reasons)
    outcome.notes.append(why)
    rejected = Event(topic=COMPLETION_REJECTED, payload=why, source="loop", target=hat, ts=now)
    return [event, rejected]


# Waiting out rate and usage limits: backoff from BACKOFF_BASE, doubling per wait up to
# BACKOFF_CAP, when the CLI did not say when to try again; a reported reset is waited
# for, plus RESET_MARGIN. Each wait is lengthened by up to JITTER of itself (up to a
# minute), so loops that hit one limit together do not all retry at once.
BACKOFF_BASE = 30.0
BACKOFF_CAP = 600.0
RESET_MARGIN = 2.0
JITTER = 0.2
# The longest first wait when the CLI says nothing of when to try again: the backoff's
# first step with the whole jitter (a resume after rate_limited starts its waits anew).
FIRST_BACKOFF_MAX = BACKOFF_BASE + min(BACKOFF_BASE * JITTER, 60.0)


@dataclass(frozen=True, slots=True)
class WaitPlan:
    """How long to wait before running the iteration again, or why the loop stops
    (``stop``): the wait would pass ``passes`` (``max_wait_seconds`` or
    ``max_runtime_seconds``) by ``over`` seconds."""

    seconds: float
    until: float
    stop: str | None = None
    passes: Literal["max_wait_seconds", "max_runtime_seconds"] | None = None
    over: float = 0.0


def jitter_fraction(*key: object) -> float:
    """A fraction in [0, 1) derived from ``key`` (session, iteration, attempt): the same
    wait on a replay or a resume, a different one for another session."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def plan_wait(
    limit: RateLimit,
    *,
    attempt: int,
    waited: float,
    now: float,
    max_wait: float,
    runtime_left: float,
    jitter: float,
) -> WaitPlan:
    """The wait before the ``attempt``-th retry of an iteration that hit ``limit``.

    Until the reported reset (``reset_at``), else the CLI's ``retry_after``, else the
    backoff; lengthened by the jitter. The loop stops (``stop`` says why, reason
    ``rate_limited``) rather than wait past ``max_wait`` seconds in all for the iteration
    (``waited``: its waits so far) or past the runtime left.
    """
    if limit.reset_at is not None and limit.reset_at > now:
        base = limit.reset_at - now + RESET_MARGIN
    elif limit.retry_after is not None:
        base = max(limit.retry_after, 0.0)
    else:
        base = min(BACKOFF_BASE * 2 ** (attempt - 1), BACKOFF_CAP)
    seconds = round(base + min(base * JITTER, 60.0) * jitter, 3)
    plan = WaitPlan(seconds=seconds, until=now + seconds)
    what = limit.kind.replace("_", " ")
    reset = f", resets at {_utc(limit.reset_at)}" if limit.reset_at is not None else ""
    if waited + seconds > max_wait:
        return replace(
            plan,
            stop=f"{what}: waiting {_span(seconds)} more would pass max_wait_seconds "
            f"({max_wait:g}){reset}: {limit.message}",
            passes="max_wait_seconds",
            over=waited + seconds - max_wait,
        )
    if seconds > runtime_left:
        return replace(
            plan,
            stop=f"{what}: waiting {_span(seconds)} would pass max_runtime_seconds{reset}: "
            f"{limit.message}",
            passes="max_runtime_seconds",
            over=seconds - runtime_left,
        )
    return plan


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min"
    return f"{seconds / 3600:.1f}h"


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
