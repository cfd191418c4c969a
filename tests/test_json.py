"""The engine's JSON codec: fast path, fallbacks, and the same text as the standard library."""

from __future__ import annotations

import json
import math
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loop import _json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON)
def test_round_trip_and_compact_utf8(value: Any) -> None:
    """What it writes parses back equal, and is the compact UTF-8 the journal always used."""
    line = _json.dumps_line(value)
    assert _json.loads(line) == value
    assert json.loads(line) == value  # any JSON reader reads it
    assert b"\n" not in line[:-1]  # one record, one line


def test_fallbacks_never_lose_a_record() -> None:
    """What orjson refuses (a lone surrogate, a huge integer) still encodes, as valid JSON."""
    odd = {"text": "a\ud800b", "big": 2**70}
    line = _json.dumps_line(odd)
    assert line.endswith(b"\n")
    line.decode("utf-8")  # valid UTF-8 (the surrogate is escaped)
    assert _json.loads(line) == odd
    assert _json.loads(b'"\\ud800"') == "\ud800"  # orjson refuses this escape; JSON allows it


def test_nan_is_null_and_bad_input_is_a_value_error() -> None:
    """NaN is not JSON: it is written as null. Invalid text is a ValueError."""
    assert _json.loads(_json.dumps_line({"x": math.nan})) == {"x": None}
    with pytest.raises(ValueError, match="Expecting"):
        _json.loads(b'{"a": ')
    with pytest.raises(TypeError):
        _json.dumps_line({"x": object()})


def test_large_records_use_the_lean_encoder() -> None:
    """A record with long text encodes to the same bytes without an 8x buffer."""
    record = {"kind": "iteration.end", "output": "x" * 200_000, "prompt": "p"}
    assert _json.is_large(record)
    assert not _json.is_large({"output": "short", "prompt": None})
    fast = _json.dumps_line(record)
    tracemalloc.start()
    try:
        lean = _json.dumps_line(record, large=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lean == fast
    assert peak < 4 * len(lean)
    assert _json.loads(lean) == record  # parsed by the standard library (over LARGE)


def test_keys_that_are_not_strings_are_written_as_strings() -> None:
    """A payload with number, boolean or null keys (an extension's own dict) still
    encodes, as the standard library would write it."""
    value = {"a": {1: "one", 2.5: "x", False: "f", None: "n"}}
    line = _json.dumps_line(value)
    assert json.loads(line) == json.loads(json.dumps(value))
    assert _json.loads(line) == {"a": {"1": "one", "2.5": "x", "false": "f", "null": "n"}}
