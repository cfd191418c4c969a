"""The journal records the engine builds."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from loop.backends.base import BackendResult
from loop.engine.decide import Outcome
from loop.engine.records import iteration_record

seconds = st.floats(min_value=0, max_value=10**6, allow_nan=False, allow_infinity=False)


@given(duration=seconds, elapsed=seconds)
def test_timings_are_kept_to_the_microsecond(duration: float, elapsed: float) -> None:
    """duration and elapsed: within half a microsecond, written with at most 6 decimals."""
    rec = iteration_record(
        iteration=1,
        hat="h",
        activation=0,
        backend="scripted",
        prompt="p",
        result=BackendResult(output=""),
        outcome=Outcome(status="ok"),
        triggers=(),
        events=[],
        emitted=[],
        published=[],
        duration=duration,
        elapsed=elapsed,
    )
    for given_value, kept in ((duration, rec["duration"]), (elapsed, rec["elapsed"])):
        assert abs(kept - given_value) <= 5e-7 + 1e-9 * given_value
        exponent = Decimal(repr(kept)).as_tuple().exponent
        assert isinstance(exponent, int) and exponent >= -6
