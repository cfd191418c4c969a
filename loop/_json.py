"""One JSON codec for the engine: the journal, the recording, replay, events and tags.

orjson encodes and parses several times faster than the standard library (a journal
line with a 1 KB prompt: about 1 µs instead of 12), and its output is the compact,
UTF-8 form the journal and the recording have always used (``separators=(",", ":")``,
``ensure_ascii=False``). Every part of the engine reads and writes JSON through this
module, so a value reads back the same wherever it went:

* keys that are not strings are written as strings (the standard library does it, as
  the fallback for such a value);
* NaN and the infinities are written as ``null`` (they are not JSON);
* integers beyond 64 bits read back as floats (outside the range JSON numbers
  interoperate in, RFC 8259 §6);
* text holding a lone surrogate, which orjson refuses, goes through the standard
  library instead (escaped as ``\\udxxx``).

Large documents go through the standard library too: orjson reserves about eight
times the size of its output while encoding (and over a megabyte to parse a 100 KB
line), which would make a long agent output cost several times its size in memory.
Records decide by the size of their texts (:func:`dumps_record_line`); parsing by size.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = [
    "LARGE",
    "JSONDecodeError",
    "dumps_line",
    "dumps_record_line",
    "is_large",
    "loads",
]

JSONDecodeError = json.JSONDecodeError  # orjson's error is a subclass; both are ValueErrors

# No OPT_NON_STR_KEYS: it makes every line a third slower, and the engine's records
# only ever have text keys; a dict with other keys goes through the fallback instead.
_LINE = orjson.OPT_APPEND_NEWLINE


def _fallback(value: Any) -> bytes:
    # orjson refused (a lone surrogate, an integer beyond 64 bits, a key that is not a
    # string): the standard library writes all of them; ASCII escapes keep the bytes
    # valid UTF-8.
    return json.dumps(value, separators=(",", ":")).encode()


# Above this many bytes of text, the standard library's memory profile wins.
LARGE = 32 * 1024


def _large(value: Any) -> bytes:
    # the standard library holds about twice the output at its peak, not eight times
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: escape it (still valid JSON)
        return _fallback(value)


def is_large(record: dict[str, Any]) -> bool:
    """Whether a journal or recording record's long texts (output, prompt) pass LARGE."""
    output, prompt = record.get("output"), record.get("prompt")
    size = (len(output) if isinstance(output, str) else 0) + (
        len(prompt) if isinstance(prompt, str) else 0
    )
    return size > LARGE


def dumps_record_line(record: dict[str, Any]) -> bytes:
    """A journal or recording record as one JSONL line (:func:`is_large` decides the codec)."""
    if is_large(record):
        return _large(record) + b"\n"
    try:  # dumps_line's small case, inline (hot path: two records per iteration)
        return orjson.dumps(record, option=_LINE)
    except TypeError:
        return _fallback(record) + b"\n"


def dumps_line(value: Any, *, large: bool = False) -> bytes:
    """``value`` as one JSONL line (compact UTF-8 JSON and a newline).

    ``large``: it holds more than :data:`LARGE` bytes of text.

    Raises:
        TypeError: ``value`` holds something JSON cannot represent.
    """
    if large:
        return _large(value) + b"\n"
    try:
        return orjson.dumps(value, option=_LINE)
    except TypeError:
        return _fallback(value) + b"\n"


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON document.

    Raises:
        JSONDecodeError: not valid JSON (a ``ValueError``).
    """
    if len(data) > LARGE:
        return json.loads(data if isinstance(data, str | bytes | bytearray) else bytes(data))
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # what orjson refuses but JSON allows (an escaped lone surrogate) parses here;
        # anything else fails here too, with the standard library's message
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "surrogatepass")
        return json.loads(text)
