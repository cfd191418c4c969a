"""The physical floor: a bare asyncio queue ping-pong, raw JSONL append and parse, fsync."""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
import time
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

__all__ = [
    "contract_loop",
    "encoder",
    "fdatasync_per_line",
    "fsync_per_line",
    "journaled_loop",
    "jsonl_append_parse",
    "queue_pingpong",
]


def encoder() -> tuple[str, Callable[[Any], bytes], Callable[[bytes], Any]]:
    """The fastest JSON encoder available: orjson if installed, else the standard library."""
    try:
        import orjson
    except ImportError:
        return ("json", lambda obj: json.dumps(obj, separators=(",", ":")).encode(), json.loads)
    return "orjson", orjson.dumps, orjson.loads


def queue_pingpong(params: dict[str, Any]) -> dict[str, Any]:
    """Two asyncio tasks bounce ``n`` messages through two ``asyncio.Queue`` objects."""
    n = int(params["n"])

    async def main() -> float:
        a: asyncio.Queue[int] = asyncio.Queue()
        b: asyncio.Queue[int] = asyncio.Queue()

        async def ponger() -> None:
            while True:
                k = await a.get()
                await b.put(k + 1)
                if k + 1 >= n:
                    return

        task = asyncio.create_task(ponger())
        t0 = time.perf_counter()
        k = 0
        while k < n:
            await a.put(k + 1)
            k = await b.get()
        wall = time.perf_counter() - t0
        await task
        return wall

    wall = asyncio.run(main())
    # Each round trip is two transitions (ping and pong).
    transitions = n
    return {"per_iter_us": wall / transitions * 1e6, "wall_s": round(wall, 6)}


def _run_journaled(main: Callable[[int], Coroutine[Any, Any, float]], n: int) -> dict[str, Any]:
    """Run a hand-written loop ``main(fd)`` over a fresh journal file; its result per iteration."""
    with tempfile.TemporaryDirectory(prefix="hatloop-floor-") as tmp:
        path = Path(tmp) / "journal.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            wall = asyncio.run(main(fd))
        finally:
            os.close(fd)
        lines = path.read_bytes().count(b"\n")
    return {"per_iter_us": wall / n * 1e6, "wall_s": round(wall, 6), "journal_lines": lines}


_TAG = re.compile(r'<event topic="([^"]+)">(.*?)</event>', re.DOTALL)


def journaled_loop(params: dict[str, Any]) -> dict[str, Any]:
    """The least a journaled, event-driven loop can do per transition, hand-written.

    One coroutine, no framework: take the oldest pending event, await an async backend
    for the hat it routes to, parse the one ``<event>`` tag of its output, append ONE
    journal line (the committed iteration, encoded with the fastest encoder), queue the
    new event. No prompt, no bus, no timeout, no start marker: any engine whose state
    lives in a journal does at least this.
    """
    n = int(params["n"])
    _, dumps, _ = encoder()
    routes = {"task.start": "ping", "pong.x": "ping", "ping.x": "pong"}
    replies = {"ping": "ping.x", "pong": "pong.x"}

    async def backend(hat: str, trigger: str, k: int) -> str:
        return f'<event topic="{replies[hat]}">{k}</event>' if trigger else ""

    async def main(fd: int) -> float:
        pending: deque[tuple[str, str]] = deque([("task.start", "go")])
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            topic, payload = pending.popleft()
            hat = routes[topic]
            output = await backend(hat, payload, i)
            match = _TAG.search(output)
            assert match is not None
            event = {"topic": match.group(1), "payload": match.group(2), "source": hat}
            os.write(
                fd,
                dumps({"kind": "iteration.end", "iteration": i, "hat": hat, "events": [event]})
                + b"\n",
            )
            pending.append((event["topic"], event["payload"]))
        return time.perf_counter() - t0

    return _run_journaled(main, n)


# A hat of the contract floor: its instructions, what it may publish, what it replies.
_CONTRACT_HATS = {
    "ping": ("You are ping. Answer with one ping.x event.", frozenset({"ping.x"}), "ping.x"),
    "pong": ("You are pong. Answer with one pong.x event.", frozenset({"pong.x"}), "pong.x"),
}


def contract_loop(params: dict[str, Any]) -> dict[str, Any]:
    """The least a loop that keeps DESIGN.md's iteration contract can do, hand-written.

    One coroutine, no framework, no abstraction, each step in its cheapest form: check
    the limits (iterations, runtime, consecutive failures), pick the hat of the oldest
    pending event and count its activation (max_activations), build the prompt
    (instructions and the triggering event), await the backend, parse the ``<event>``
    tags, accept only the topics the hat may publish, count a failure, track repeated
    identical events (stale loop), publish to the one subscriber, route the events, and
    journal the committed iteration (one line, no prompt or output: the least a
    restarted process needs to derive its state). No start marker, no timeout, no
    extensions, no recording. An engine that keeps the contract does at least this;
    hatloop's iteration is measured against it.
    """
    n = int(params["n"])
    _, dumps, _ = encoder()
    routes = {"task.start": "ping", "pong.x": "ping", "ping.x": "pong"}
    max_iterations, max_runtime, max_failures, max_activations = n, 3600.0, 3, n
    stale_limit = n
    seen: list[dict[str, Any]] = []
    subscribers: list[Callable[[dict[str, Any]], None]] = [seen.append]

    async def backend(hat: str, prompt: str, k: int) -> str:
        return f'<event topic="{_CONTRACT_HATS[hat][2]}">{k}</event>' if prompt else ""

    async def main(fd: int) -> float:
        pending: deque[tuple[str, str]] = deque([("task.start", "go")])
        activations = {"ping": 0, "pong": 0}
        failures, repeats = 0, 0
        last: tuple[tuple[str, str], ...] | None = None
        clock = time.perf_counter
        t0 = clock()
        for i in range(1, n + 1):
            if i > max_iterations or clock() - t0 > max_runtime or failures >= max_failures:
                break
            topic, payload = pending.popleft()
            hat = routes[topic]
            if activations[hat] >= max_activations:
                continue
            activations[hat] += 1
            instructions, allowed, _ = _CONTRACT_HATS[hat]
            prompt = f'{instructions}\n\n<event topic="{topic}">{payload}</event>\n'
            started = clock()
            output = await backend(hat, prompt, i)
            found = _TAG.findall(output)
            ok = all(t in allowed for t, _ in found)
            failures = 0 if ok else failures + 1
            signature = tuple(found)
            repeats = repeats + 1 if signature == last else 1
            last = signature
            if repeats > stale_limit:
                break
            events = [{"topic": t, "payload": p, "source": hat} for t, p in found] if ok else []
            for event in events:
                for subscriber in subscribers:
                    subscriber(event)
                pending.append((event["topic"], event["payload"]))
            os.write(
                fd,
                dumps(
                    {
                        "kind": "iteration.end",
                        "iteration": i,
                        "hat": hat,
                        "status": "ok" if ok else "failed",
                        "events": events,
                        "duration": clock() - started,
                        "ts": time.time(),
                    }
                )
                + b"\n",
            )
            if len(seen) >= 1024:  # the subscriber keeps a bounded window
                seen.clear()
        return clock() - t0

    return _run_journaled(main, n)


def _record(i: int, pad: str) -> dict[str, Any]:
    return {
        "kind": "iteration.end",
        "iteration": i,
        "hat": "ping",
        "status": "ok",
        "output": pad,
        "events": [{"topic": "ping.x", "payload": str(i), "source": "ping"}],
        "ts": time.time(),
    }


def jsonl_append_parse(params: dict[str, Any]) -> dict[str, Any]:
    """Encode and append ``n`` records (one ``write`` per line), then read and parse them."""
    n = int(params["n"])
    pad = "x" * int(params.get("output_bytes", 1000))
    name, dumps, loads = encoder()
    with tempfile.TemporaryDirectory(prefix="hatloop-floor-") as tmp:
        path = Path(tmp) / "floor.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        t0 = time.perf_counter()
        for i in range(n):
            os.write(fd, dumps(_record(i, pad)) + b"\n")
        append = time.perf_counter() - t0
        os.close(fd)
        size = path.stat().st_size
        t0 = time.perf_counter()
        count = 0
        with path.open("rb") as fh:
            for line in fh:
                loads(line)
                count += 1
        parse = time.perf_counter() - t0
    return {
        "encoder": name,
        "append_us": append / n * 1e6,
        "parse_us": parse / n * 1e6,
        "parse_records_per_s": count / parse,
        "parse_mb_per_s": size / parse / 1e6,
        "line_bytes": size / n,
    }


def _synced_lines(
    path: Path,
    n: int,
    pad: str,
    sync: Callable[[int], None],
    before: Callable[[int], None] | None = None,
) -> float:
    """Seconds to append ``n`` encoded lines to ``path``, each followed by ``sync``
    (and each preceded by ``before(i)``, when given)."""
    _, dumps, _ = encoder()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    t0 = time.perf_counter()
    for i in range(n):
        if before is not None:
            before(i)
        os.write(fd, dumps(_record(i, pad)) + b"\n")
        sync(fd)
    wall = time.perf_counter() - t0
    os.close(fd)
    return wall


def _line_bytes(pad: str) -> int:
    _, dumps, _ = encoder()
    return len(dumps(_record(0, pad))) + 1


def fdatasync_per_line(params: dict[str, Any]) -> dict[str, Any]:
    """Append ``n`` encoded lines, each followed by ``fdatasync`` (the journal's own sync)."""
    n = int(params["n"])
    pad = "x" * int(params.get("output_bytes", 200))
    with tempfile.TemporaryDirectory(prefix="hatloop-floor-") as tmp:
        sync = getattr(os, "fdatasync", os.fsync)
        wall = _synced_lines(Path(tmp) / "fdatasync.jsonl", n, pad, sync)
    return {"per_iter_us": wall / n * 1e6, "line_bytes": _line_bytes(pad)}


def fsync_per_line(params: dict[str, Any]) -> dict[str, Any]:
    """Append ``n`` encoded lines, each followed by ``fsync`` (the durable floor)."""
    n = int(params["n"])
    pad = "x" * int(params.get("output_bytes", 200))
    with tempfile.TemporaryDirectory(prefix="hatloop-floor-") as tmp:
        wall = _synced_lines(Path(tmp) / "fsync.jsonl", n, pad, os.fsync)

        def folder_and_file(i: int) -> None:
            # what a per-iteration folder and events file add to every journal fsync
            d = Path(tmp) / f"it-{i}"
            d.mkdir()
            (d / "events.jsonl").write_bytes(b"")

        wall_dirs = _synced_lines(Path(tmp) / "fsync2.jsonl", n, pad, os.fsync, folder_and_file)
    return {
        "per_iter_us": wall / n * 1e6,
        "with_dir_and_file_us": wall_dirs / n * 1e6,
        "line_bytes": _line_bytes(pad),
    }
