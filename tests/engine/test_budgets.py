"""Budgets: max_cost_usd and max_tokens for the run and per hat end it as budget_exhausted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.cli import build_parser
from loop.commands.run import limit_overrides, overrides_from
from loop.config import load_config
from loop.engine.decide import (
    NO_BUDGET,
    Budget,
    Limits,
    budget_spent,
    check_limits,
    unheld_by_budgets,
)
from loop.engine.journal import read_journal
from loop.engine.state import fold
from loop.exits import exit_code_for
from loop.records import Override
from loop.replay import replay_recording
from loop.session.recorder import Recorder
from loop.session.store import session_status
from loop.testing import make_config, run_hats, tag
from tests.engine.test_decide import CTX, LIMITS, end_record, start_record


def _end(n: int, hat: str, **usage: Any) -> Any:
    return replace(end_record(n, hat, [], []), **usage)


def test_the_runs_budget_is_spent_at_its_limit_in_dollars_or_tokens() -> None:
    """Reached (>=) is spent; the description says which limit and how much."""
    state = fold(_records(), CTX)
    assert budget_spent(state, LIMITS) is None
    dollars = replace(LIMITS, budget=Budget(max_cost_usd=0.3))
    assert budget_spent(state, dollars) == "max_cost_usd 0.3 reached ($0.3000 spent)"
    assert check_limits(state, dollars, elapsed=0.0) == "budget_exhausted"
    tokens = replace(LIMITS, budget=Budget(max_tokens=1000))
    assert check_limits(state, tokens, elapsed=0.0) is None
    state = fold([*_records(), _end(3, "planner", output_tokens=100)], CTX)
    assert budget_spent(state, tokens) == "max_tokens 1000 reached (1000 spent)"
    assert exit_code_for("budget_exhausted") == 3


def _records() -> list[Any]:
    return [start_record(), _end(1, "planner", cost_usd=0.3), _end(2, "builder", input_tokens=900)]


def test_a_hats_budget_holds_only_that_hat_and_tokens_hold_a_hat_without_cost() -> None:
    """Per hat: its own spend; a backend reporting tokens but no cost is held by tokens."""
    state = fold(_records(), CTX)
    limits = Limits(
        max_iterations=10,
        max_runtime_seconds=60,
        max_consecutive_failures=2,
        hat_budgets={"builder": Budget(max_cost_usd=0.01, max_tokens=500)},
    )
    assert check_limits(state, limits, elapsed=0.0) is None  # hats are checked on selection
    assert budget_spent(state, limits, "planner") is None
    assert (
        budget_spent(state, limits, "builder")
        == "hat 'builder': max_tokens 500 reached (900 spent)"
    )
    assert limits.budget is NO_BUDGET


class Metered(Backend):
    """Answers with scripted outputs and reports what each answer cost."""

    kind = "metered"
    uses_files = False
    instant = True

    def __init__(self, output: str, cost: float | None, tokens: int) -> None:
        self.output, self.cost, self.tokens = output, cost, tokens
        self.calls = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        self.calls += 1
        return BackendResult(
            output=self.output, cost_usd=self.cost, input_tokens=self.tokens, output_tokens=0
        )


def pingpong(tmp_path: Path, hat_keys: dict[str, Any] | None = None, **loop: Any) -> Any:
    return make_config(
        {
            "ping": {"triggers": ["task.start", "pong.done"], **(hat_keys or {})},
            "pong": {"triggers": ["ping.done"]},
        },
        folder=tmp_path,
        **loop,
    )


async def test_max_cost_usd_ends_the_run_and_the_spend_carries_across_a_resume(
    tmp_path: Path,
) -> None:
    """No activation starts once spent; a resume derives the spend from the journal."""
    cfg = pingpong(tmp_path, max_cost_usd=1.0)
    ping, pong = Metered(tag("ping.done"), 0.3, 10), Metered(tag("pong.done"), 0.1, 10)
    summary, _ = await run_hats(cfg, {"ping": ping, "pong": pong}, workdir=tmp_path, session_id="b")
    assert (summary.reason, summary.exit_code) == ("budget_exhausted", 3)
    assert summary.iterations == 5  # 0.3 + 0.1 + 0.3 + 0.1 + 0.3 = 1.1 >= 1.0
    assert summary.notes == ["max_cost_usd 1 reached ($1.1000 spent)"]
    assert round(summary.cost_usd, 6) == 1.1 and summary.tokens == 50
    again = pingpong(tmp_path, max_cost_usd=1.0)
    resumed, _ = await run_hats(
        again, {"ping": ping, "pong": pong}, workdir=tmp_path, session_id="b", resume=True
    )
    assert resumed.reason == "budget_exhausted" and resumed.iterations == 5
    assert ping.calls + pong.calls == 5  # nothing ran after the resume


async def test_a_hats_token_budget_stops_the_run_before_its_next_activation(
    tmp_path: Path,
) -> None:
    """A hat whose backend reports no cost is still held by its token budget."""
    cfg = pingpong(tmp_path, hat_keys={"max_tokens": 250})
    ping, pong = Metered(tag("ping.done"), None, 100), Metered(tag("pong.done"), 0.5, 1)
    summary, _ = await run_hats(cfg, {"ping": ping, "pong": pong}, workdir=tmp_path)
    assert summary.reason == "budget_exhausted"
    assert ping.calls == 3 and pong.calls == 3  # 300 tokens: the 4th ping never starts
    assert summary.notes == ["hat 'ping': max_tokens 250 reached (300 spent)"]


def test_hats_a_budget_cannot_hold_are_named(tmp_path: Path) -> None:
    """A cost budget over a backend without cost (or any budget over one without usage)."""
    cfg = pingpong(tmp_path, max_cost_usd=1.0)
    tokens_only = Metered("", None, 1)
    tokens_only.reports_tokens = True
    silent = Metered("", None, 1)
    assert unheld_by_budgets(cfg, {"ping": tokens_only, "pong": silent}) == [
        "hat 'ping': its metered backend reports no cost, only tokens (set max_tokens to hold it)",
        "hat 'pong': its metered backend reports no cost nor tokens",
    ]
    assert unheld_by_budgets(pingpong(tmp_path / "free"), {"ping": silent, "pong": silent}) == []


async def test_a_replay_stops_at_the_recorded_budget_without_warning_of_it(
    tmp_path: Path,
) -> None:
    """The replay backend serves the recorded spend: the budget stops the replay where it
    stopped the run, and no hat is named as one the budget cannot hold."""
    cfg = pingpong(tmp_path, max_tokens=45)
    ping, pong = Metered(tag("ping.done"), None, 10), Metered(tag("pong.done"), None, 10)
    recorder = Recorder(tmp_path / "rec.jsonl")
    summary, _ = await run_hats(
        cfg, {"ping": ping, "pong": pong}, workdir=tmp_path, extra=[recorder]
    )
    assert (summary.reason, summary.iterations) == ("budget_exhausted", 5)
    with capture_logs() as logs:
        result = await replay_recording(tmp_path / "rec.jsonl")
    assert result.ok, result.summary()
    assert (result.actual_reason, result.actual_iterations) == ("budget_exhausted", 5)
    assert [e for e in logs if e["event"] == "a budget cannot hold this hat"] == []


class Finishing(Metered):
    """A metered backend that completes the loop on its ``last``-th call."""

    def __init__(self, output: str, last: int) -> None:
        super().__init__(output, 0.01, 10)
        self.last = last

    async def run(self, request: BackendRequest) -> BackendResult:
        result = await super().run(request)
        if self.calls == self.last:
            return replace(result, output=tag("LOOP_COMPLETE"))
        return result


async def test_a_hats_spent_budget_goes_on_with_the_command_the_hint_gives(
    tmp_path: Path,
) -> None:
    """[hats.ping] max_cost_usd spent: the summary and status give the command that goes
    on (a plain resume stops again at once); that command, parsed as the command line
    parses it, raises the hat's budget and the resumed run goes on to completion."""
    cfg = pingpong(tmp_path, hat_keys={"max_cost_usd": 1.0})
    ping, pong = Metered(tag("ping.done"), 0.4, 10), Finishing(tag("pong.done"), last=4)
    backends = {"ping": ping, "pong": pong}
    first, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="h")
    assert (first.reason, ping.calls, pong.calls) == ("budget_exhausted", 3, 3)
    assert first.notes == ["hat 'ping': max_cost_usd 1 reached ($1.2000 spent)"]
    hint = "python -m loop run --resume h --hat-max-cost-usd ping=2.4"
    assert first.resume_command == hint
    assert session_status(tmp_path / ".loop/sessions", "h").resume_command == hint
    again, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="h", resume=True)
    assert (again.reason, again.resume_command, ping.calls) == ("budget_exhausted", hint, 3)

    args = build_parser("run").parse_args(hint.split()[3:])
    config = load_config(tmp_path / "loop.toml", root=tmp_path, overrides=overrides_from(args))
    done, _ = await run_hats(
        config,
        backends,
        workdir=tmp_path,
        session_id=args.resume,
        resume=True,
        limit_overrides=limit_overrides(args),
    )
    assert (done.reason, ping.calls, pong.calls) == ("completed", 4, 4)
    records = read_journal(tmp_path / ".loop/sessions/h/journal.jsonl").records
    overrides = [r for r in records if isinstance(r, Override)]
    assert [o.hat_max_cost_usd for o in overrides] == [{"ping": 2.4}]
