"""When to try again: reading rate and usage limits out of the agent CLIs' messages.

Pure functions over text (and ``now``, seconds since the epoch), shared by the agent
backends, each of which knows where its CLI says it (see :func:`classify_text` and the
backends' ``summarize``). What the CLIs print, checked against the local mocks:

* Claude Code: a ``result`` line with ``is_error`` and ``api_error_status`` 429 (529:
  overloaded), after its own retries; for a subscription's usage window a
  ``rate_limit_event`` line whose ``rate_limit_info`` says ``status: rejected`` and
  ``resetsAt`` (epoch seconds); older versions wrote ``Claude AI usage limit
  reached|<epoch>``.
* Gemini CLI: ``[API Error: ...]`` with ``Please wait and try again later`` for a 429,
  ``Suggested retry after 41s.`` when the API said, ``You have exhausted your daily
  quota on this model.`` for a daily quota (which resets at midnight Pacific time).
* Codex: ``exceeded retry limit, last status: 429 Too Many Requests``, ``rate limit
  exceeded: ... Please try again in 2.5s.``, and ``You've hit your usage limit. ... try
  again at 8:33 PM.`` (or ``Try again at Nov 26th, 2026 2:46 AM.``, local time).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from loop.backends.base import RateLimit

__all__ = [
    "classify_text",
    "next_pacific_midnight",
    "reset_at_in",
    "retry_after_in",
]

_DURATION = r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?!s))?\s*(?:(\d+(?:\.\d+)?)(ms|s))?"
_RETRY_IN = re.compile(
    r"(?:try again|retry)(?: in| after)\s+" + _DURATION + r"(?!\w)", re.IGNORECASE
)
_EPOCH_AFTER_BAR = re.compile(r"limit reached\|(\d{10})\b", re.IGNORECASE)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_TRY_AT = re.compile(
    r"try again at\s+(?:([A-Za-z]{3})[a-z]*\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4}),?\s+)?"
    r"(\d{1,2}):(\d{2})\s*([AP]M)?",
    re.IGNORECASE,
)
_USAGE = re.compile(
    r"usage limit|hit your (?:usage |session |weekly )?limit|daily quota|out of usage"
    r"|(?:session|weekly) limit",
    re.IGNORECASE,
)
_RATE = re.compile(
    r"\b429\b|too many requests|rate.?limit|resource.?exhausted|overloaded_error|\b529\b"
    r"|please wait and try again later|quota exceeded|exhausted your capacity",
    re.IGNORECASE,
)


def retry_after_in(text: str) -> float | None:
    """Seconds from ``try again in 2.5s``, ``retry after 1m30s``, ``Suggested retry after
    41s``, ``retry in 120ms`` (None when the text names no such delay)."""
    for match in _RETRY_IN.finditer(text):
        hours, minutes, amount, unit = match.groups()
        if not (hours or minutes or amount):
            continue
        seconds = float(hours or 0) * 3600 + float(minutes or 0) * 60
        if amount:
            seconds += float(amount) / (1000 if unit == "ms" else 1)
        return seconds
    return None


def reset_at_in(text: str, now: float) -> float | None:
    """When a limit resets, from ``limit reached|<epoch>`` or ``try again at 8:33 PM`` /
    ``try again at Nov 26th, 2026 2:46 AM`` (local time; a time of day already past
    today is tomorrow's). None when the text names no time."""
    if match := _EPOCH_AFTER_BAR.search(text):
        return float(match.group(1))
    match = _TRY_AT.search(text)
    if match is None:
        return None
    month, day, year, hour, minute, half = match.groups()
    h = int(hour) % 12 + (12 if half and half.upper() == "PM" else 0) if half else int(hour)
    local_now = datetime.fromtimestamp(now).astimezone()
    try:
        if month:
            when = local_now.replace(
                year=int(year),
                month=_MONTHS.index(month[:3].lower()) + 1,
                day=int(day),
                hour=h,
                minute=int(minute),
                second=0,
                microsecond=0,
            )
        else:
            when = local_now.replace(hour=h, minute=int(minute), second=0, microsecond=0)
            if when.timestamp() < now - 60:
                when += timedelta(days=1)
    except ValueError:  # month names nobody writes, a 30th of February
        return None
    return when.timestamp()


def next_pacific_midnight(now: float) -> float | None:
    """The next midnight in Pacific time (when Google's daily quotas reset), or None
    where this Python has no time zone data."""
    try:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # noqa: PLC0415 - rare path
    except ImportError:  # pragma: no cover - zoneinfo is in every supported Python
        return None
    try:
        pacific = ZoneInfo("America/Los_Angeles")
    except (ZoneInfoNotFoundError, ValueError):
        return None
    today = datetime.fromtimestamp(now, pacific)
    midnight = (today + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.timestamp()


def classify_text(text: str, now: float, *, status: int | None = None) -> RateLimit | None:
    """A rate or usage limit told by an error ``text`` (and an HTTP ``status``), or None.

    A usage limit (a plan's quota) is told by its words; a rate limit by a 429 or 529
    status, ``rate limit``, ``too many requests``, ``resource exhausted`` or
    ``overloaded``. The reset time and the delay are read when the text gives them.
    """
    usage = _USAGE.search(text) is not None
    if not usage and status not in (429, 529) and _RATE.search(text) is None:
        return None
    kind: Literal["rate_limit", "usage_limit"] = "usage_limit" if usage else "rate_limit"
    return RateLimit(
        kind=kind,
        message=" ".join(text.split())[:300],
        reset_at=reset_at_in(text, now),
        retry_after=retry_after_in(text),
    )
