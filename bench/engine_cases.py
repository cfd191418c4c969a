"""hatloop cases: the engine ping-pong (recording and durability on/off) and the bus."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench.stats import Stamps

__all__ = ["bus_fanout", "bus_pingpong", "engine_pingpong", "write_pingpong_project"]

LOOP_TOML = """\
[loop]
prompt = "bench"
max_iterations = {n}
stale_threshold = 1000000
max_runtime_seconds = 86400
durable = {durable}

[tasks]
enabled = false

[themes]
enabled = false

[experience]
enabled = false

[recording]
max_bytes = {max_bytes}

[hats.ping]
description = "ping"
triggers = ["task.start", "pong.x"]
publishes = ["ping.x"]
concurrency = {concurrency}

[hats.pong]
description = "pong"
triggers = ["ping.x"]
publishes = ["pong.x"]
"""


def write_pingpong_project(
    folder: Path,
    *,
    n: int,
    durable: bool,
    max_bytes: int = 100 * 1024 * 1024,
    concurrency: int = 1,
) -> Path:
    """Write the two-hat ping-pong ``loop.toml`` into ``folder``; return its path.

    ``concurrency`` above 1 (on ``ping``) runs the same session through the parallel
    hats' lanes: only one event is ever pending, so nothing runs at once."""
    path = folder / "loop.toml"
    text = LOOP_TOML.format(
        n=n,
        durable="true" if durable else "false",
        max_bytes=max_bytes,
        concurrency=concurrency,
    )
    path.write_text(text, encoding="utf-8")
    return path


def scripted_backend(topic: str, count: int, pad: int = 0) -> Any:
    """The real scripted backend, instant: ``count`` outputs, each one ``topic`` event.

    The payload is the activation number, so no two consecutive events are alike (the
    stale-loop rule never fires); ``pad`` bytes of text precede the tag.
    """
    from loop.backends.scripted import ScriptedBackend

    filler = "x" * pad
    return ScriptedBackend([f'{filler}<event topic="{topic}">{k}</event>' for k in range(count)])


def _stamp_extension(stamps: Stamps) -> Any:
    """Stamps each iteration from a ``loop.iteration.done`` subscriber: what a normal run
    has anyway (the progress display), so the engine takes no extra per-iteration path."""
    from loop.extensions import Extension

    class StampExtension(Extension):
        name = "bench-stamps"

        def attach(self, bus: Any) -> None:
            bus.subscribe("loop.iteration.done", lambda _event: stamps.hit(), name=self.name)

    return StampExtension()


def engine_pingpong(params: dict[str, Any]) -> dict[str, Any]:
    """Run the real engine for ``n`` iterations of ping-pong with instant backends.

    Params: ``n``, ``recording`` (bool), ``durable`` (bool), ``output_bytes`` (padding
    of each backend output), ``keep`` (a path to copy the recording to),
    ``concurrency`` (of ``ping``; above 1: the parallel hats' lanes run the session).
    """
    from loop.config import load_config
    from loop.runner import RunOptions, run_loop

    n = int(params["n"])
    pad = int(params.get("output_bytes", 0))
    with tempfile.TemporaryDirectory(prefix="hatloop-bench-") as tmp:
        folder = Path(tmp)
        max_bytes = int(params.get("max_bytes", 100 * 1024 * 1024))
        cfg = load_config(
            write_pingpong_project(
                folder,
                n=n,
                durable=bool(params["durable"]),
                max_bytes=max_bytes,
                concurrency=int(params.get("concurrency", 1)),
            ),
            root=folder,
        )
        stamps = Stamps()
        extra: list[Any] = []
        rec_path = Path(params["keep"]) if params.get("keep") else folder / "rec.jsonl"
        if params.get("recording"):
            from loop.session.recorder import Recorder

            extra.append(
                Recorder(rec_path, max_bytes=max_bytes, force=True, append=False, redact=True)
            )
        options = RunOptions(
            workdir=folder,
            progress=False,
            handle_signals=False,
            backends={
                "ping": scripted_backend("ping.x", n // 2 + 1, pad),
                "pong": scripted_backend("pong.x", n // 2 + 1, pad),
            },
            extensions=[_stamp_extension(stamps)],
        )
        t0 = time.perf_counter()
        summary = anyio.run(run_loop, cfg, options, extra)
        total = time.perf_counter() - t0
        out = stamps.result()
        out.update(
            {"iterations": summary.iterations, "reason": summary.reason, "total_s": round(total, 6)}
        )
        if params.get("recording"):
            size = rec_path.stat().st_size if rec_path.exists() else 0
            out["recording_bytes"] = size
        journals = list((folder / ".loop" / "sessions").glob("*/journal.jsonl"))
        if journals and summary.iterations:
            # what one iteration writes (and syncs): the commit and the next start marker
            out["journal_bytes_per_iteration"] = journals[0].stat().st_size / summary.iterations
    return out


def bus_pingpong(params: dict[str, Any]) -> dict[str, Any]:
    """Two bus subscribers bounce ``n`` events (each handler publishes the next one)."""
    from loop.bus import EventBus
    from loop.events import Event

    n = int(params["n"])
    bus = EventBus()
    count = 0

    async def on_ping(event: Event) -> None:
        nonlocal count
        count += 1
        if count < n:
            await bus.publish(Event(topic="pong.x", payload=count, source="pong"))

    async def on_pong(event: Event) -> None:
        nonlocal count
        count += 1
        if count < n:
            await bus.publish(Event(topic="ping.x", payload=count, source="ping"))

    bus.subscribe("ping.x", on_ping, name="pong")
    bus.subscribe("pong.x", on_pong, name="ping")

    async def main() -> float:
        t0 = time.perf_counter()
        await bus.publish(Event(topic="ping.x", payload=0, source="ping"))
        return time.perf_counter() - t0

    wall = anyio.run(main)
    return {"per_event_us": wall / n * 1e6, "events": count, "wall_s": round(wall, 6)}


def bus_fanout(params: dict[str, Any]) -> dict[str, Any]:
    """Publish ``n`` events to ``subscribers`` handlers on one pattern."""
    from loop.bus import EventBus
    from loop.events import Event

    n = int(params["n"])
    subs = int(params.get("subscribers", 10))
    bus = EventBus()
    delivered = 0

    async def handler(event: Event) -> None:
        nonlocal delivered
        delivered += 1

    for i in range(subs):
        bus.subscribe("fan.*", handler, name=f"s{i}")

    async def main() -> float:
        t0 = time.perf_counter()
        for i in range(n):
            await bus.publish(Event(topic="fan.x", payload=i, source="bench"))
        return time.perf_counter() - t0

    wall = anyio.run(main)
    return {
        "per_event_us": wall / n * 1e6,
        "per_delivery_us": wall / (n * subs) * 1e6,
        "delivered": delivered,
        "wall_s": round(wall, 6),
    }
