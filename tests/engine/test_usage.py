"""Cost and tokens: folded per hat from the journal, shown per iteration and per hat."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from loop.bus import EventBus
from loop.engine.lifecycle import SessionStarted
from loop.engine.progress import ProgressReporter, RunSummary, render_summary, usage_text
from loop.engine.state import HatUsage, fold
from loop.events import Event
from loop.records import IterationEnd, LimitSettings, Override
from tests.engine.test_decide import CTX, end_record, start_record


def _end(n: int, hat: str, **usage: Any) -> IterationEnd:
    return replace(end_record(n, hat, [], []), **usage)


def test_usage_is_folded_per_hat_from_what_each_backend_reported() -> None:
    """Costs and tokens add up per hat; a figure never reported stays None; the total cost
    is the sum of the reported ones."""
    state = fold(
        [
            start_record(),
            _end(1, "planner", cost_usd=0.25, input_tokens=100, output_tokens=10),
            _end(2, "builder", cost_usd=None, input_tokens=40, output_tokens=4),
            _end(3, "planner", cost_usd=0.5, input_tokens=None, output_tokens=None),
            _end(4, "builder", cost_usd=None, input_tokens=60, output_tokens=6),
            _end(5, "checker", cost_usd=None, input_tokens=None, output_tokens=None),
        ],
        CTX,
    )
    assert state.usage_per_hat == {
        "planner": HatUsage(cost_usd=0.75, input_tokens=100, output_tokens=10),
        "builder": HatUsage(cost_usd=None, input_tokens=100, output_tokens=10),
    }
    assert state.cost_usd == 0.75
    assert state.tokens == 220  # input plus output, wherever reported


def test_usage_text_says_only_what_was_reported() -> None:
    """Cost and tokens, tokens alone, or nothing; large counts in thousands."""
    assert usage_text(0.0123, 1200, 340) == "$0.0123, 1200 in / 340 out tokens"
    assert usage_text(None, 123_456, 7) == "123.5k in / 7 out tokens"
    assert usage_text(None, None, None) is None


def _summary(usage: dict[str, HatUsage], cost: float = 0.0, tokens: int = 0) -> RunSummary:
    return RunSummary(
        session_id="s",
        reason="completed",
        exit_code=0,
        iterations=3,
        elapsed=1.0,
        failed_iterations=0,
        events_per_hat={},
        activations={"planner": 1, "builder": 2},
        cost_usd=cost,
        resumed=False,
        session_dir="/s",
        usage_per_hat=usage,
        tokens=tokens,
    )


def test_summary_shows_usage_per_hat() -> None:
    """One usage line names each hat that reported something; none without usage."""
    usage = {
        "planner": HatUsage(cost_usd=0.25, input_tokens=100, output_tokens=10),
        "builder": HatUsage(input_tokens=40, output_tokens=4),
        "checker": HatUsage(),
    }
    text = render_summary(_summary(usage, cost=0.25, tokens=154))
    assert "  spent     $0.2500 · 154 tokens" in text.splitlines()
    assert (
        "  usage     planner $0.2500, 100 in / 10 out tokens · builder 40 in / 4 out tokens"
        in text.splitlines()
    )
    assert "usage" not in render_summary(_summary({}))
    assert "spent" not in render_summary(_summary({}))


async def test_progress_line_shows_cost_and_tokens() -> None:
    """The iteration line carries cost and tokens when the backend reported them."""
    bus = EventBus()
    ProgressReporter().attach(bus)
    record = replace(end_record(1, "planner", [], []), duration=1.0, elapsed=1.0)
    with capture_logs() as logs:
        await bus.publish(
            Event(
                topic="loop.iteration.done",
                source="loop",
                payload=replace(record, cost_usd=0.5, input_tokens=1200, output_tokens=34),
            )
        )
        await bus.publish(Event(topic="loop.iteration.done", source="loop", payload=record))
    lines = [entry for entry in logs if entry["event"] == "iteration"]
    assert (lines[0]["cost"], lines[0]["tokens"]) == ("$0.5000", "1200/34")
    assert "cost" not in lines[1] and "tokens" not in lines[1]


async def test_progress_line_lists_the_published_events_not_the_dropped() -> None:
    """Under strict_publishes, events= names what was published; a dropped event is the
    note's (it was listed as if published)."""
    bus = EventBus()
    ProgressReporter().attach(bus)
    done, stray = (Event(topic=t, source="builder", ts=0.0) for t in ("build.done", "stray.x"))
    record = replace(end_record(1, "builder", [], []), events=(done, stray), dropped=(stray,))
    with capture_logs() as logs:
        await bus.publish(Event(topic="loop.iteration.done", source="loop", payload=record))
    line = next(e for e in logs if e["event"] == "iteration")
    assert line["events"] == "build.done"


async def test_progress_shows_the_sessions_spend_so_far_across_a_resume() -> None:
    """spent= adds each iteration's figures to what the session had spent at its start."""
    bus = EventBus()
    ProgressReporter().attach(bus)
    started = SessionStarted(
        start=start_record(), session_dir=Path("/s"), resumed_at=4, cost_usd=1.5, tokens=20_000
    )
    record = replace(end_record(5, "planner", [], []), cost_usd=0.25, input_tokens=900)
    with capture_logs() as logs:
        await bus.publish(Event(topic="loop.resumed", source="loop", payload=started))
        await bus.publish(Event(topic="loop.iteration.done", source="loop", payload=record))
    resumed = next(e for e in logs if e["event"] == "session resumed")
    line = next(e for e in logs if e["event"] == "iteration")
    assert resumed["spent"] == "$1.5000 · 20.0k tokens"
    assert line["spent"] == "$1.7500 · 20.9k tokens"


async def test_a_resumes_log_line_names_only_the_limits_it_changed() -> None:
    """Resumed with --max-iterations 12 and another builder backend: the line names those,
    not every limit (no max_cost_usd=None), as show's override marker does."""
    before = LimitSettings(
        max_iterations=10,
        max_runtime_seconds=3600.0,
        max_consecutive_failures=3,
        hat_max_tokens={"planner": 5000},
    )
    override = Override(
        **{**before.__dict__, "max_iterations": 12},
        after_iteration=4,
        backends={"builder": "scripted"},
        ts=0.0,
    )
    bus = EventBus()
    ProgressReporter().attach(bus)
    started = SessionStarted(
        start=start_record(),
        session_dir=Path("/s"),
        resumed_at=4,
        override=override,
        limits_before=before,
    )
    with capture_logs() as logs:
        await bus.publish(Event(topic="loop.resumed", source="loop", payload=started))
    line = next(e for e in logs if e["event"] == "limits changed from here on")
    assert {k: v for k, v in line.items() if k not in ("event", "log_level")} == {
        "max_iterations": 12,
        "builder.backend": "scripted",
    }
