"""The ``emit`` channel: what an agent runs to publish an event during an iteration.

``python -m loop emit TOPIC [PAYLOAD] [--json]`` appends one JSON line to the file
named by ``LOOP_EVENTS_FILE``; ``--payloads A B C`` (or one JSON array with ``--json``)
appends one line per payload, a fan-out for a hat with ``concurrency``. Agents call it
often, so this module imports only the standard library and the leaf module ``_fs``
(the whole command starts in a few tens of milliseconds); ``_json`` (and orjson) only
for a ``--json`` payload.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from loop import _fs
from loop.errors import InputError
from loop.exits import EXIT_OK, EXIT_USAGE
from loop.locations import ENV_EVENTS_FILE
from loop.topics import RULE, is_valid_topic

# The longest line the engine reads from an events file (one event with its payload, or
# one tool call with its input and result): a longer one is dropped and reported, so emit
# refuses it here first.
MAX_LINE_BYTES = 4 * 1024 * 1024

USAGE = """usage: python -m loop emit TOPIC [PAYLOAD] [--json] [--target HAT]
       python -m loop emit TOPIC --payloads PAYLOAD... [--json] [--target HAT]

Publish an event from inside an iteration (appends to $LOOP_EVENTS_FILE).
  TOPIC          dot-separated topic, e.g. plan.ready
  PAYLOAD        text payload (or '-' to read it from stdin)
  --json         the payload is JSON (object, array or value)
  --target HAT   address the event to one hat
  --payloads     fan out: one event per PAYLOAD (with --json, one JSON array's items),
                 run in parallel by a hat with concurrency > 1
exit codes: 0 emitted, 2 bad usage or input
"""


def append_event(
    path: Path,
    topic: str,
    payload: Any,
    target: str | None = None,
    *,
    root: Path | None = None,
    create_folders: bool = False,
) -> None:
    """Append one event line with a single ``write`` on an ``O_APPEND`` descriptor.

    One write per line keeps concurrent emitters from interleaving within a line. The
    file is opened without following a link (:func:`loop._fs.append_bytes`; from
    ``root`` when given, creating the missing folders with ``create_folders``).

    Raises:
        OSError: the file cannot be written.
        InputError: a link (or something else than a file) is at ``path``, or the line
            would pass :data:`MAX_LINE_BYTES`.
    """
    append_events(path, topic, [payload], target, root=root, create_folders=create_folders)


def append_events(
    path: Path,
    topic: str,
    payloads: list[Any],
    target: str | None = None,
    *,
    root: Path | None = None,
    create_folders: bool = False,
) -> None:
    """Append one event line per payload, all with a single ``write`` (a fan-out lands
    whole or not at all); see :func:`append_event`.

    Raises:
        InputError: also for a topic that is not one, or a payload that is not JSON
            (NaN and the infinities included).
    """
    if not is_valid_topic(topic):
        raise InputError(f"invalid topic {topic!r}: {RULE}")
    now = time.time()
    lines = []
    for payload in payloads:
        record: dict[str, Any] = {"topic": topic, "payload": payload, "ts": now}
        if target:
            record["target"] = target
        try:
            try:
                line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode()
            except UnicodeEncodeError:  # a lone surrogate: escaped, the line stays valid UTF-8
                line = (json.dumps(record, allow_nan=False) + "\n").encode("ascii")
        except (TypeError, ValueError) as exc:
            raise InputError(f"the payload is not JSON: {exc}") from None
        if len(line) > MAX_LINE_BYTES:
            raise InputError(
                f"the event is {len(line)} bytes as a line; an events file takes lines of at "
                f"most {MAX_LINE_BYTES} bytes (put a large payload in a file and emit its path)"
            )
        lines.append(line)
    _fs.append_bytes(path, b"".join(lines), root=root, create_folders=create_folders)


def main(argv: list[str]) -> int:
    """Entry point of ``python -m loop emit``; returns the exit code."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return EXIT_OK if args else EXIT_USAGE
    as_json = fan_out = False
    target: str | None = None
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--json":
            as_json = True
        elif arg == "--payloads":
            fan_out = True
        elif arg == "--target":
            if i + 1 >= len(args):
                return _fail("--target needs a hat name")
            target = args[i + 1]
            i += 1
        elif arg.startswith("--target="):
            target = arg.split("=", 1)[1]
        elif arg.startswith("--") and arg != "--":
            return _fail(f"unknown option {arg}")
        else:
            positional.append(arg)
        i += 1
    if not fan_out and len(positional) not in (1, 2):
        return _fail("expected TOPIC and an optional PAYLOAD")
    if fan_out and len(positional) < 2:
        return _fail("--payloads expects TOPIC and at least one PAYLOAD")
    if not _utf8(*positional, target or ""):
        return _fail("the arguments are not UTF-8 text")
    topic = positional[0]
    if not is_valid_topic(topic):
        return _fail(f"invalid topic {topic!r}: {RULE}")
    if fan_out:
        return _fan_out(topic, positional[1:], as_json=as_json, target=target)
    raw = positional[1] if len(positional) == 2 else ""
    if raw == "-":
        try:
            raw = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            return _fail(f"the payload on stdin is not UTF-8 text ({exc.reason})")
    payload: Any = raw
    if as_json:
        from loop import _json  # noqa: PLC0415 - orjson is slow to import: only for --json

        try:
            payload = _json.loads(raw, max_depth=_json.INPUT_DEPTH) if raw else None
        except ValueError as exc:
            return _fail(f"--json payload is not valid JSON: {_json.error_text(exc)}")
    target_file = os.environ.get(ENV_EVENTS_FILE)
    if not target_file:
        return _fail(f"{ENV_EVENTS_FILE} is not set: run emit inside a hatloop iteration")
    try:
        append_event(Path(target_file), topic, payload, target)
    except OSError as exc:
        return _fail(f"cannot append to {target_file}: {exc.strerror or exc}")
    except InputError as exc:
        return _fail(exc.message)
    return EXIT_OK


def _fan_out(topic: str, raws: list[str], *, as_json: bool, target: str | None) -> int:
    """``--payloads``: one event per argument, or per item of one JSON array."""
    if "-" in raws:  # stdin is one PAYLOAD's, never one of several
        return _fail("--payloads: '-' (stdin) is for a single PAYLOAD; give each as an argument")
    payloads: list[Any] = list(raws)
    if as_json:
        from loop import _json  # noqa: PLC0415 - orjson is slow to import: only for --json

        values = []
        for n, raw in enumerate(raws, 1):
            try:
                values.append(_json.loads(raw, max_depth=_json.INPUT_DEPTH))
            except ValueError as exc:
                return _fail(
                    f"--json payload {n} of {len(raws)} ({raw[:40]!r}) is not valid JSON: "
                    f"{_json.error_text(exc)}"
                )
        if len(values) == 1 and isinstance(values[0], list):
            values = values[0]
        payloads = values
    if not payloads:
        return _fail("--payloads: the JSON array is empty")
    target_file = os.environ.get(ENV_EVENTS_FILE)
    if not target_file:
        return _fail(f"{ENV_EVENTS_FILE} is not set: run emit inside a hatloop iteration")
    try:
        append_events(Path(target_file), topic, payloads, target)
    except OSError as exc:
        return _fail(f"cannot append to {target_file}: {exc.strerror or exc}")
    except InputError as exc:
        return _fail(exc.message)
    return EXIT_OK


def _utf8(*texts: str) -> bool:
    """Whether every text is valid UTF-8 (argv bytes that are not arrive as surrogates)."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fail(message: str) -> int:
    sys.stderr.write(f"error: emit: {message}\n")
    return EXIT_USAGE
