"""Rate and usage limits: each agent CLI's way of saying it, classified for the loop to wait.

The pure tests read the lines the real CLIs printed against the local mocks (Claude
Code 2.1, Gemini CLI 0.61, Codex 0.169); the real-CLI tests make the mocks answer 429.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from loop.backends import claude, codex, gemini
from loop.backends._limits import (
    classify_text,
    next_pacific_midnight,
    reset_at_in,
    retry_after_in,
)
from loop.backends._process import ProcessResult
from loop.backends.base import RateLimit
from loop.engine.journal import read_journal
from loop.records import Wait
from loop.testing import FakeClock, make_config, run_hats, tag
from loop.testing.anthropic_mock import ErrorTurn, MockAnthropic, TextTurn
from loop.testing.gemini_mock import MockGemini
from loop.testing.openai_mock import MockOpenAI
from tests.backends.conftest import MakeClaude, MakeCodex, MakeGemini, MakeRequest

NOW = datetime(2026, 11, 23, 19, 0).timestamp()
WALL = 1_800_000_000.0  # local time: what "at 8:33 PM" means


def proc(stdout: str, stderr: str = "", returncode: int = 1) -> ProcessResult:
    return ProcessResult(
        returncode=returncode, stdout=stdout.encode(), stderr=stderr.encode(), timed_out=False
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Please try again in 2.5s.", 2.5),
        ("Suggested retry after 41s.", 41.0),
        ("rate limited; retry after 1m30s", 90.0),
        ("Please try again in 120ms.", 0.12),
        ("try again in 2h", 7200.0),
        ("Try again later.", None),
    ],
)
def test_retry_after_reads_the_delay_a_message_names(text: str, seconds: float | None) -> None:
    """Delays in s, ms, m and h, and none when the text gives none."""
    assert retry_after_in(text) == seconds


def test_reset_times_are_read_as_an_epoch_or_a_local_time() -> None:
    """|epoch, a time of day (tomorrow once past), a full date; nothing else."""
    assert reset_at_in("Claude AI usage limit reached|1795465000", NOW) == 1795465000
    at = reset_at_in("visit the page or try again at 8:33 PM.", NOW)
    assert at == datetime(2026, 11, 23, 20, 33).timestamp()
    past = reset_at_in("try again at 6:15 AM", NOW)
    assert past == datetime(2026, 11, 24, 6, 15).timestamp()
    dated = reset_at_in("You've hit your usage limit. Try again at Nov 26th, 2026 2:46 AM.", NOW)
    assert dated == datetime(2026, 11, 26, 2, 46).timestamp()
    assert reset_at_in("Try again later.", NOW) is None


def test_google_daily_quotas_reset_at_pacific_midnight() -> None:
    """The next midnight in America/Los_Angeles (8:00 UTC in winter)."""
    midnight = next_pacific_midnight(
        datetime.fromisoformat("2026-11-23T19:00:00+00:00").timestamp()
    )
    assert midnight == datetime.fromisoformat("2026-11-24T08:00:00+00:00").timestamp()


def test_classify_text_tells_rate_limits_from_usage_limits_and_from_other_errors() -> None:
    """429 and its words are rate limits; a plan's quota is a usage limit; others neither."""
    assert classify_text("API Error: 500 internal server error", NOW) is None
    assert classify_text("invalid api key", NOW) is None
    rate = classify_text("exceeded retry limit, last status: 429 Too Many Requests", NOW)
    assert rate is not None and rate.kind == "rate_limit" and rate.reset_at is None
    assert classify_text("some error", NOW, status=429) is not None
    usage = classify_text("You've hit your usage limit. Try again later.", NOW)
    assert usage is not None and usage.kind == "usage_limit"


CLAUDE_429 = [
    {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "API Error: Request rejected (429)"}]},
        "error": "rate_limit",
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 429,
        "result": "API Error: Request rejected (429) · Number of requests has exceeded your "
        "rate limit",
        "total_cost_usd": 0,
    },
]


def _lines(items: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(i) for i in items) + "\n"


def test_claude_429_is_a_rate_limit_and_a_rejected_usage_window_has_its_reset() -> None:
    """api_error_status 429; a rate_limit_event (subscriptions) gives resetsAt."""
    result = claude.summarize(proc(_lines(CLAUDE_429)), None, NOW)
    assert not result.ok and result.limited is not None
    assert result.limited.kind == "rate_limit" and result.limited.reset_at is None
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1795465000,
            "rateLimitType": "five_hour",
        },
    }
    windowed = claude.summarize(proc(_lines([event, *CLAUDE_429])), None, NOW)
    assert windowed.limited is not None
    assert (windowed.limited.kind, windowed.limited.reset_at) == ("usage_limit", 1795465000)
    assert windowed.limited.message.endswith("(five_hour limit)")
    other = [{"type": "result", "is_error": True, "api_error_status": 400, "result": "bad"}]
    assert claude.summarize(proc(_lines(other)), None, NOW).limited is None


GEMINI_RESULT = {
    "type": "result",
    "status": "error",
    "error": {
        "type": "unknown",
        "message": "[API Error: Quota exceeded for metric generate_content_free_tier_requests\n"
        "Suggested retry after 41s.]\nPlease wait and try again later. To increase your "
        "limits, request a quota increase through AI Studio, or switch to another /auth method",
    },
    "stats": {"input_tokens": 0, "output_tokens": 0},
}


def test_gemini_quota_errors_are_limits_with_the_suggested_delay_or_the_daily_reset() -> None:
    """RetryInfo's delay; a daily quota waits for Pacific midnight; other errors are not."""
    stderr = "RetryableQuotaError: Quota exceeded\n  retryDelayMs: 41000,\n  status: 429\n"
    result = gemini.summarize(proc(_lines([GEMINI_RESULT]), stderr, 173), None, now=NOW)
    assert result.limited == RateLimit(
        "rate_limit", result.limited.message if result.limited else "", None, 41.0
    )
    daily = dict(
        GEMINI_RESULT,
        error={
            "message": "[API Error: You have exhausted your daily "
            "quota on this model.]\nPlease wait and try again later."
        },
    )
    limited = gemini.summarize(proc(_lines([daily]), "TerminalQuotaError", 173), None, now=NOW)
    assert limited.limited is not None and limited.limited.kind == "usage_limit"
    assert limited.limited.reset_at == next_pacific_midnight(NOW)
    bad = dict(GEMINI_RESULT, error={"message": "[API Error: API key not valid.]"})
    assert gemini.summarize(proc(_lines([bad])), None, now=NOW).limited is None


def test_codex_usage_limit_has_its_reset_time_and_a_429_is_a_rate_limit() -> None:
    """turn.failed messages: usage limit with 'try again at', 429 after its retries."""
    usage = [
        {"type": "turn.started"},
        {
            "type": "turn.failed",
            "error": {
                "message": "You’ve hit your usage limit. Upgrade to Pro "
                "(https://chatgpt.com/explore/pro) or try again at 8:33 PM."
            },
        },
    ]
    result = codex.summarize(proc(_lines(usage)), None, NOW)
    assert result.limited is not None and result.limited.kind == "usage_limit"
    assert result.limited.reset_at == datetime(2026, 11, 23, 20, 33).timestamp()
    rate = [
        {
            "type": "turn.failed",
            "error": {"message": "exceeded retry limit, last status: 429 Too Many Requests"},
        }
    ]
    limited = codex.summarize(proc(_lines(rate)), None, NOW).limited
    assert limited is not None and limited.kind == "rate_limit"


@pytest.mark.claude
async def test_real_claude_429_is_classified_as_a_rate_limit(
    make_claude: MakeClaude, make_request: MakeRequest
) -> None:
    """The real CLI, answered 429 (its retries off): a failed result the loop can wait out."""
    turn = ErrorTurn(429, "rate_limit_error", "Number of requests has exceeded your rate limit")
    with MockAnthropic(default=turn) as mock:
        result = await make_claude(mock).run(make_request())
    assert not result.ok and result.limited is not None
    assert result.limited.kind == "rate_limit"
    assert "429" in result.limited.message


@pytest.mark.gemini
async def test_real_gemini_429_with_retry_info_is_classified_with_its_delay(
    make_gemini: MakeGemini, make_request: MakeRequest
) -> None:
    """Google's RetryInfo reaches the classification as retry_after."""
    turn = ErrorTurn(
        429,
        message="Quota exceeded for metric generate_content_free_tier_requests",
        error_fields={
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "41s"}]
        },
    )
    with MockGemini(default=turn) as mock:
        result = await make_gemini(mock, mcp=False).run(make_request())
    assert not result.ok and result.limited is not None
    assert (result.limited.kind, result.limited.retry_after) == ("rate_limit", 41.0)


@pytest.mark.codex
async def test_real_codex_usage_limit_is_classified_with_its_reset_time(
    make_codex: MakeCodex, make_request: MakeRequest
) -> None:
    """OpenAI's usage_limit_reached with resets_at: Codex's message dates the reset."""
    resets = int(time.time()) + 7200
    turn = ErrorTurn(
        429,
        "usage_limit_reached",
        "The usage limit has been reached",
        error_fields={"resets_at": resets},
    )
    with MockOpenAI(default=turn) as mock:
        result = await make_codex(mock, mcp=False).run(make_request())
    assert not result.ok and result.limited is not None
    assert result.limited.kind == "usage_limit" and result.limited.reset_at is not None
    assert abs(result.limited.reset_at - resets) < 61  # the CLI prints it to the minute


@pytest.mark.claude
async def test_a_real_claude_429_is_waited_out_then_the_loop_completes(
    tmp_path: Path, make_claude: MakeClaude
) -> None:
    """The real CLI against the mock: a 429, a journaled wait, then the answer."""
    cfg = make_config({"a": {"triggers": ["task.start"]}}, folder=tmp_path / "loop")
    turns = [
        ErrorTurn(429, "rate_limit_error", "Number of requests has exceeded your rate limit"),
        TextTurn(tag("LOOP_COMPLETE", "done")),
    ]
    clock = FakeClock(WALL)
    with MockAnthropic(turns) as mock:
        summary, _ = await run_hats(
            cfg,
            {"a": make_claude(mock)},
            workdir=tmp_path / "loop",
            session_id="c",
            wall_clock=clock,
            sleep=clock.sleep,
        )
    assert summary.reason == "completed" and summary.failed_iterations == 0
    journal = tmp_path / "loop/.loop/sessions/c/journal.jsonl"
    waits = [r for r in read_journal(journal).records if isinstance(r, Wait)]
    assert len(waits) == 1 and waits[0].limit == "rate_limit" and "429" in waits[0].message


@pytest.mark.claude
async def test_a_real_claude_loop_stops_on_max_cost_usd(
    tmp_path: Path, make_claude: MakeClaude
) -> None:
    """The CLI's total_cost_usd adds up in the journal; no iteration starts once spent."""
    cfg = make_config(
        {"a": {"triggers": ["task.start", "a.again"], "publishes": ["a.again"]}},
        folder=tmp_path / "loop",
        max_cost_usd=0.03,
        max_iterations=10,
    )
    turns = [
        TextTurn(tag("a.again", str(n)), input_tokens=1000, output_tokens=500) for n in range(9)
    ]
    with MockAnthropic(turns) as mock:
        summary, _ = await run_hats(
            cfg, {"a": make_claude(mock)}, workdir=tmp_path / "loop", session_id="b"
        )
        served = len(mock.turn_requests)
    assert (summary.reason, summary.exit_code) == ("budget_exhausted", 3)
    assert 1 < summary.iterations < 10 and served == summary.iterations
    assert summary.cost_usd >= 0.03
    assert summary.notes[0].startswith("max_cost_usd 0.03 reached ($")
