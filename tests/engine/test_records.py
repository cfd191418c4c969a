"""The journal records the engine builds."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loop import _json
from loop.backends.base import BackendResult
from loop.engine.decide import Outcome
from loop.engine.records import iteration_end
from loop.records import IterationEnd, Resume, SessionStart, encode_record, parse_record
from loop.session.recording import iteration_data, parse_iteration

seconds = st.floats(min_value=0, max_value=10**6, allow_nan=False, allow_infinity=False)


def _record(
    result: BackendResult, outcome: Outcome, *, duration: float = 0.0, elapsed: float = 0.0
) -> IterationEnd:
    """The record of an iteration with no triggers and no events."""
    return iteration_end(
        iteration=1,
        hat="h",
        activation=0,
        backend="scripted",
        prompt="p",
        result=result,
        outcome=outcome,
        triggers=(),
        trigger_seqs=(),
        events=[],
        emitted=[],
        published=[],
        duration=duration,
        elapsed=elapsed,
        now=1.0,
    )


@given(duration=seconds, elapsed=seconds)
def test_timings_are_kept_to_the_microsecond(duration: float, elapsed: float) -> None:
    """duration and elapsed: within half a microsecond, written with at most 6 decimals."""
    rec = _record(
        BackendResult(output=""), Outcome(status="ok"), duration=duration, elapsed=elapsed
    )
    for given_value, kept in ((duration, rec.duration), (elapsed, rec.elapsed)):
        assert abs(kept - given_value) <= 5e-7 + 1e-9 * given_value
        exponent = Decimal(repr(kept)).as_tuple().exponent
        assert isinstance(exponent, int) and exponent >= -6


def test_a_backend_that_succeeded_with_nothing_to_say_is_journaled_as_ok() -> None:
    """The engine fails an iteration that emitted nothing, but the backend itself ran fine:
    the record says so without any reading of the reason text."""
    rec = _record(
        BackendResult(output="nothing to say"),
        Outcome(status="failed", reason="the hat published nothing"),
    )
    assert (rec.status, rec.backend_ok) == ("failed", True)
    failed = _record(BackendResult.failed("exit code 2"), Outcome(status="failed"))
    assert failed.backend_ok is False
    line = _json.dumps_record_line(iteration_data(rec))
    assert parse_iteration(line).backend_ok is True


def test_a_journal_of_the_format_before_tool_calls_still_reads() -> None:
    """Version 1 (no ``tool_calls``, no ``workdir``) parses, with none of them; an
    unknown version is a one-line error naming it."""
    start = {
        "kind": "session.start",
        "schema_version": 1,
        "session_id": "s",
        "started_at": "2026-01-01T00:00:00Z",
        "config_digest": "sha256:x",
        "starting_event": "task.start",
        "completion_event": "LOOP_COMPLETE",
        "hats": {},
        "config": {},
        "version": "0.1.0",
        "config_source": "loop.toml",
        "start_event": {"topic": "task.start", "payload": "", "source": "loop", "ts": 0.0},
        "ts": 0.0,
    }
    record = parse_record(_json.dumps_line(start))
    assert isinstance(record, SessionStart)
    assert (record.schema_version, record.workdir) == (1, "")
    with pytest.raises(ValueError, match="journal format version 7: this hatloop reads versions"):
        parse_record(_json.dumps_line({**start, "schema_version": 7}))


def test_a_resume_names_every_iteration_in_flight_and_a_sequential_one_keeps_its_form() -> None:
    """Several in flight (parallel hats): ``in_flight_all`` names them all; one alone
    leaves the optional field out, so the line reads as before it existed."""
    several = Resume(pid=7, iteration=2, in_flight=3, in_flight_all=(3, 4), ts=1.0)
    assert parse_record(encode_record(several)) == several
    assert several.lost() == (3, 4)
    one = Resume(pid=7, iteration=2, in_flight=3, ts=1.0)
    line = encode_record(one)
    assert b"in_flight_all" not in line
    assert parse_record(line) == one and one.lost() == (3,)
    assert Resume(pid=7, iteration=2, ts=1.0).lost() == ()
