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


@pytest.mark.parametrize("depth", [1_100, 5_000, 100_000])
@pytest.mark.parametrize("large", [False, True])
def test_nesting_too_deep_to_parse_is_a_decode_error(depth: int, large: bool) -> None:
    """No RecursionError escapes, whatever the depth, on the orjson and the large path."""
    pad = " " * (_json.LARGE + 1) if large else ""
    for text in ("[" * depth + "]" * depth + pad, "[" * depth + pad, '{"a":' * depth + "1"):
        with pytest.raises(_json.JSONDecodeError, match="nested too deeply"):
            _json.loads(text)
        with pytest.raises(ValueError, match="nested deeper than 100 levels"):
            _json.loads(text.encode(), max_depth=_json.INPUT_DEPTH)


@pytest.mark.parametrize("limit", [1, 2, 100, 200])
def test_max_depth_is_exact(limit: int) -> None:
    """A document nested exactly ``max_depth`` levels parses; one level more is refused."""
    for open_, close in (("[", "]"), ('{"k":', "}")):
        inner = "1" if open_.startswith("{") else ""
        ok = open_ * limit + inner + close * limit
        assert _json.too_deep(_json.loads(ok, max_depth=limit), limit) is False
        deeper = open_ + ok + close
        with pytest.raises(_json.TooDeep) as info:
            _json.loads(deeper, max_depth=limit)
        assert _json.error_text(info.value) == f"nested deeper than {limit} levels"


def test_brackets_inside_strings_are_not_nesting() -> None:
    """Only structure counts: a string full of brackets is depth 1."""
    text = json.dumps({"code": "{[" * 5_000})
    assert _json.loads(text, max_depth=1) == {"code": "{[" * 5_000}


def test_error_text_is_one_line() -> None:
    """Invalid JSON and too-deep JSON are each described on one line."""
    with pytest.raises(ValueError) as bad:
        _json.loads('{"a": \n  oops}')
    assert _json.error_text(bad.value) == "Expecting value at line 2 column 3"
    assert "\n" not in _json.error_text(_json.TooDeep(None))


@given(JSON, st.integers(0, 6))
def test_too_deep_agrees_with_the_text(value: Any, limit: int) -> None:
    """too_deep on a value and max_depth on its text draw the line at the same depth."""
    text = json.dumps(value)
    deep = _json.too_deep(value, limit)
    if deep:
        with pytest.raises(_json.TooDeep):
            _json.loads(text, max_depth=limit)
    else:
        assert _json.loads(text, max_depth=limit) == value
