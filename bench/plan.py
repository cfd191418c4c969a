"""What to run: the cases per section with their sizes, for the full and the quick mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.peers import PEERS

__all__ = ["DURABLE_MODES", "RECORDING_MODES", "Case", "Sizes", "build_plan", "sizes_for"]

# The peers' modes with their own recording or persistence, per comparison group.
RECORDING_MODES = ("snapshot", "publish_hook", "tracker", "file")
DURABLE_MODES = ("sqlite",)
# The synced floors write lines as long as what the engine's durable iteration writes and
# syncs (its commit and the next start marker, ~1.1 KB in the ping-pong): a sync costs
# more for more bytes, so a shorter line would flatter the floor.
SYNCED_LINE_PAD = 950


@dataclass(frozen=True)
class Sizes:
    """Every size the bench uses; the quick mode shrinks them all."""

    runs: int
    engine_n: int
    durable_n: int
    bus_n: int
    fanout_n: int
    replay_mb: float
    replay_small_mb: float
    startup_runs: int
    task_counts: tuple[int, ...]
    task_reps: int
    queue_n: int
    jsonl_n: int
    fsync_n: int
    peer_n: dict[str, int] = field(default_factory=dict)
    mcp_calls: int = 200  # MCP tool calls per run, for the per-call latency
    replay_folder_n: int = 1_000  # small recordings in the folder `replay --jobs` runs on
    replay_folder_runs: int = 3  # runs per --jobs setting (each replays the whole folder)
    parallel_n: int = 2_000  # activations of the parallel-hats overhead case
    parallel_runs: int = 3  # runs of each parallel-hats case (a wave takes 2 s)


FULL = Sizes(
    runs=5,
    engine_n=10_000,
    durable_n=2_000,
    bus_n=100_000,
    fanout_n=20_000,
    replay_mb=100.0,
    replay_small_mb=10.0,
    startup_runs=15,
    task_counts=(1_000, 10_000),
    task_reps=10,
    queue_n=100_000,
    jsonl_n=50_000,
    fsync_n=1_000,
    # Persistence modes that rewrite or rebuild all history per step are quadratic:
    # they get fewer transitions (the report gives N for every row).
    peer_n={
        "bare": 10_000,
        "publish_hook": 10_000,
        "tracker": 5_000,
        "sqlite": 1_000,
        "snapshot": 100,
        "file": 100,
    },
)
QUICK = Sizes(
    runs=3,
    engine_n=200,
    durable_n=40,
    bus_n=2_000,
    fanout_n=500,
    replay_mb=0.5,
    replay_small_mb=0.2,
    startup_runs=3,
    task_counts=(100,),
    task_reps=3,
    queue_n=2_000,
    jsonl_n=2_000,
    fsync_n=40,
    mcp_calls=20,
    replay_folder_n=12,
    replay_folder_runs=1,
    parallel_n=200,
    parallel_runs=1,
    peer_n={
        "bare": 200,
        "publish_hook": 200,
        "tracker": 100,
        "sqlite": 40,
        "snapshot": 20,
        "file": 20,
    },
)


def sizes_for(quick: bool) -> Sizes:
    """The sizes of the quick or the full mode."""
    return QUICK if quick else FULL


@dataclass(frozen=True)
class Case:
    """One measured configuration: run ``runs`` times, each in a fresh worker process."""

    section: str
    key: str
    case: str
    params: dict[str, Any]
    metric: str = "per_iter_us"
    label: str = ""


def build_plan(sizes: Sizes, *, peers: bool) -> list[Case]:
    """The cases measured run by run (round-robin), in report order."""
    s = sizes
    cases = [
        Case(
            "engine",
            "off",
            "engine",
            {"n": s.engine_n, "recording": False, "durable": False},
            label="hatloop, recording off",
        ),
        Case(
            "engine",
            "recording",
            "engine",
            {"n": s.engine_n, "recording": True, "durable": False},
            label="hatloop, recording on (journal not fsynced)",
        ),
        Case(
            "engine",
            "durable",
            "engine",
            {"n": s.durable_n, "recording": False, "durable": True},
            label="hatloop, journal synced per iteration (fdatasync)",
        ),
        Case(
            "engine",
            "durable_recording",
            "engine",
            {"n": s.durable_n, "recording": True, "durable": True},
            label="hatloop, recording on + journal synced",
        ),
        Case(
            "bus",
            "pingpong",
            "bus_pingpong",
            {"n": s.bus_n},
            metric="per_event_us",
            label="bus ping-pong (per event)",
        ),
        Case(
            "bus",
            "fanout",
            "bus_fanout",
            {"n": s.fanout_n, "subscribers": 10},
            metric="per_event_us",
            label="bus fan-out to 10 subscribers (per event)",
        ),
        Case(
            "floor",
            "queue",
            "floor_queue",
            {"n": s.queue_n},
            label="floor: asyncio.Queue ping-pong",
        ),
        Case(
            "floor",
            "journaled",
            "floor_journaled",
            {"n": s.queue_n},
            label="floor: hand-written journaled loop (await, tag, 1 journal line)",
        ),
        Case(
            "floor",
            "contract",
            "floor_contract",
            {"n": s.queue_n},
            label="floor: hand-written loop doing the contract's least (limits, pick, prompt, "
            "await, tags, checks, stale, publish, 1 journal line)",
        ),
        Case(
            "floor",
            "jsonl",
            "floor_jsonl",
            {"n": s.jsonl_n, "output_bytes": 1000},
            metric="append_us",
            label="floor: JSONL encode+append, 1 KB records",
        ),
        Case(
            "floor",
            "jsonl_small",
            "floor_jsonl",
            {"n": s.jsonl_n, "output_bytes": 0},
            metric="append_us",
            label="floor: JSONL encode+append, small records",
        ),
        Case(
            "floor",
            "fsync",
            "floor_fsync",
            {"n": s.fsync_n, "output_bytes": SYNCED_LINE_PAD},
            label="floor: write+fsync per line",
        ),
        Case(
            "floor",
            "fdatasync",
            "floor_fdatasync",
            {"n": s.fsync_n, "output_bytes": SYNCED_LINE_PAD},
            label="floor: write+fdatasync per line (the journal's sync)",
        ),
    ]
    if peers:
        for peer, (_, modes) in PEERS.items():
            for mode in modes:
                n = s.peer_n[mode]
                cases.append(
                    Case(
                        "peers",
                        f"{peer}:{mode}",
                        "peer",
                        {"peer": peer, "mode": mode, "n": n},
                        label=f"{peer} ({mode})",
                    )
                )
    return cases
