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

Deep nesting never crashes a reader. The standard library's parser recurses once per
level and fails with ``RecursionError`` at a depth that depends on the caller's stack;
:func:`loads` turns that into :class:`TooDeep`, a ``JSONDecodeError``, so every reader
that handles invalid JSON handles it too. On its own, :func:`loads` reads whatever its
parsers can without that risk (about a thousand levels), so every record hatloop wrote
reads back. With ``max_depth`` it refuses anything nested deeper, at exactly that
depth: state files are read with :data:`MAX_DEPTH`, and what users and agents send
(tool arguments, event payloads, ``--input``) with the lower :data:`INPUT_DEPTH`, so a
file or record that carries an input always stays within its reader's limit.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson

__all__ = [
    "INPUT_DEPTH",
    "LARGE",
    "MAX_DEPTH",
    "UTF8_BOM",
    "JSONDecodeError",
    "TooDeep",
    "dumps_line",
    "dumps_record_line",
    "error_text",
    "is_large",
    "loads",
    "too_deep",
    "without_bom",
]

JSONDecodeError = json.JSONDecodeError  # orjson's error is a subclass; both are ValueErrors

# The deepest nesting of a JSON document hatloop reads (files, journal and recording
# lines): pydantic's own parser stops at 200 too, and it is far from Python's recursion
# limit whatever the caller's stack.
MAX_DEPTH = 200
# The deepest nesting of a value a user or an agent sends (tool arguments, event
# payloads, --input): lower than MAX_DEPTH, so the records that carry one read back.
INPUT_DEPTH = 100

# No OPT_NON_STR_KEYS: it makes every line a third slower, and the engine's records
# only ever have text keys; a dict with other keys goes through the fallback instead.
_LINE = orjson.OPT_APPEND_NEWLINE


def _fields(value: Any) -> Any:
    """A dataclass as the standard library writes it: its fields (orjson's own rule)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _fallback(value: Any) -> bytes:
    # orjson refused (a lone surrogate, an integer beyond 64 bits, a key that is not a
    # string): the standard library writes all of them; ASCII escapes keep the bytes
    # valid UTF-8.
    return json.dumps(value, separators=(",", ":"), default=_fields).encode()


# Above this many bytes of text, the standard library's memory profile wins.
LARGE = 32 * 1024


def _large(value: Any) -> bytes:
    # the standard library holds about twice the output at its peak, not eight times
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_fields)
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
    return dumps_line(record, large=is_large(record))


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


class TooDeep(JSONDecodeError):
    """A JSON document nested deeper than the reader's limit (a ``ValueError``).

    ``limit`` is ``None`` when the document was too deep to parse at all.
    """

    def __init__(self, limit: int | None) -> None:
        self.msg = (
            f"nested deeper than {limit} levels" if limit is not None else "nested too deeply"
        )
        ValueError.__init__(self, f"JSON {self.msg}")
        self.doc = ""
        self.pos = 0
        self.lineno = 1
        self.colno = 1
        self.limit = limit

    def __reduce__(self) -> tuple[type[TooDeep], tuple[int | None]]:
        return (TooDeep, (self.limit,))


def _may_nest(data: bytes | bytearray | memoryview | str, limit: int) -> bool:
    """Whether ``data`` holds more than ``limit`` opening brackets (a bound on its depth)."""
    if len(data) <= limit:
        return False
    if isinstance(data, memoryview):
        data = data.tobytes()
    if isinstance(data, str):
        return data.count("[") + data.count("{") > limit
    return data.count(b"[") + data.count(b"{") > limit


# What some editors (Notepad, PowerShell's Out-File) put before the first line of a UTF-8
# file. A file's first line is read without it (:func:`without_bom`): the standard
# library's json.loads skips it in bytes, and orjson does not, so a reader that did not
# drop it would disagree with tools that use the standard library (the pytest plugin).
UTF8_BOM = b"\xef\xbb\xbf"


def without_bom(first_line: bytes) -> bytes:
    """A file's first line without a leading UTF-8 byte order mark."""
    return first_line.removeprefix(UTF8_BOM)


def loads(data: bytes | bytearray | memoryview | str, *, max_depth: int | None = None) -> Any:
    """Parse one JSON document; with ``max_depth``, one nested at most that deep.

    Parsing never recurses in Python beyond what is safe: orjson does not recurse and
    stops at 1024 levels, and the standard library's ``RecursionError`` is caught. With
    ``max_depth``, a document holding more opening brackets than the limit is measured
    after parsing (one that holds fewer cannot pass it, and costs nothing more).

    Raises:
        TooDeep: nested deeper than ``max_depth``, or too deep to parse (a
            ``JSONDecodeError``).
        JSONDecodeError: not valid JSON (a ``ValueError``).
    """
    try:
        value = _parse(data)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if max_depth is not None and _may_nest(data, max_depth) and too_deep(value, max_depth):
        raise TooDeep(max_depth)
    return value


def _parse(data: bytes | bytearray | memoryview | str) -> Any:
    if len(data) > LARGE:
        return json.loads(data if isinstance(data, str | bytes | bytearray) else bytes(data))
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # what orjson refuses but JSON allows (an escaped lone surrogate) parses here;
        # anything else fails here too, with the standard library's message
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "surrogatepass")
        return json.loads(text)


def error_text(exc: ValueError) -> str:
    """A parse error in one line: the reason and, for invalid text, where it is."""
    if isinstance(exc, TooDeep):
        return exc.msg
    if isinstance(exc, JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


_NESTED = (dict, list, tuple)


def too_deep(value: Any, limit: int) -> bool:
    """Whether a parsed value (dicts and lists) nests deeper than ``limit`` levels.

    Iterative, so any depth is measured without recursion; a scalar has depth 0.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, _NESTED))
    return False
