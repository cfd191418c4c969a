"""Sessions made by real runs (of the CLI, or of the engine in-process with a fake
clock), for the show, events, report and watch tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from loop.backends.scripted import ScriptedBackend
from loop.testing import FakeClock, make_config, run_hats, tag
from tests.engine.test_waits import Limited

__all__ = [
    "ENV",
    "HOSTILE",
    "WAITED_AT",
    "hostile_recording",
    "loop",
    "pingpong_session",
    "waited_session",
    "wave_toml",
]

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}

# Text that would break or inject into a page that pasted it as markup.
HOSTILE = (
    '</script><script>window.__pwned = "script"</script>'
    '<img src=x onerror="window.__pwned = &quot;img&quot;"><!-- <b>bold?</b> & \u2028 end'
)


def loop(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process (``env``: variables set on top of :data:`ENV`)."""
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env={**ENV, **(env or {})},
        timeout=300,
        check=False,
    )


PINGPONG = """\
[loop]
prompt = "ping-pong, {n} iterations"
max_iterations = {n}
stale_threshold = 1000000
max_runtime_seconds = 3600
durable = false

[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.ping]
description = "ping"
triggers = ["task.start", "pong.x"]
publishes = ["ping.x"]
backend = {{ type = "scripted", outputs_file = "ping.json" }}

[hats.pong]
description = "pong"
triggers = ["ping.x"]
publishes = ["pong.x"]
backend = {{ type = "scripted", outputs_file = "pong.json" }}
"""


def pingpong_session(folder: Path, n: int) -> Path:
    """Run a two-hat loop of ``n`` iterations for real (ended by max_iterations, exit 3),
    recorded; return the recording."""
    folder.mkdir(parents=True, exist_ok=True)
    for hat, topic in (("ping", "ping.x"), ("pong", "pong.x")):
        outputs = [f'{hat} {k}\n<event topic="{topic}">{k}</event>' for k in range(n // 2 + 1)]
        (folder / f"{hat}.json").write_text(json.dumps(outputs), encoding="utf-8")
    (folder / "loop.toml").write_text(PINGPONG.format(n=n), encoding="utf-8")
    res = loop("run", "-q", "--record-session", "big.jsonl", cwd=folder)
    assert res.returncode == 3, res.stderr
    return folder / "big.jsonl"


def hostile_recording(source: Path, target: Path) -> None:
    """``source`` with :data:`HOSTILE` in every free text: prompts, outputs, payloads,
    reasons, notes and meta of every iteration."""
    out = []
    for line in source.read_text(encoding="utf-8").splitlines():
        rec: dict[str, Any] = json.loads(line)
        if rec["kind"] == "iteration":
            rec["prompt"] = HOSTILE + "\n" + rec["prompt"]
            rec["output"] = HOSTILE + "\n" + rec["output"]
            for key in ("events", "published", "triggers"):
                for event in rec[key]:
                    event["payload"] = HOSTILE
            rec["notes"] = [HOSTILE]
            rec["meta"] = {"stderr_tail": HOSTILE}
            if rec["status"] == "failed":
                rec["reason"] = HOSTILE
        out.append(json.dumps(rec, ensure_ascii=False))
    target.write_text("\n".join(out) + "\n", encoding="utf-8")


_WAVE = """\
[loop]
prompt = "review"
max_iterations = 10
durable = {durable}
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.coordinator]
triggers = ["task.start"]
publishes = ["review.perspective"]
backend = {{ type = "command", command = ["sh", "-c", {coordinator}] }}
[hats.reviewer]
triggers = ["review.perspective"]
publishes = ["review.done"]
concurrency = 3
backend = {{ type = "command", command = ["sh", "-c", {reviewer}] }}
[hats.synthesizer]
triggers = ["review.done"]
publishes = ["LOOP_COMPLETE"]
aggregate = {{ mode = "wait_for_all", timeout_seconds = {timeout} }}
backend = {{ type = "command", command = ["sh", "-c", {synthesizer}] }}
"""


def wave_toml(
    *, coordinator: str, reviewer: str, synthesizer: str, timeout: int = 120, durable: bool = True
) -> str:
    """A ``loop.toml``: a coordinator fans ``review.perspective`` out to three reviewers
    that run at once (``concurrency = 3``), and a synthesizer waits for all of them;
    each hat is a shell script (run with ``sh -c``)."""
    return _WAVE.format(
        coordinator=json.dumps(coordinator),
        reviewer=json.dumps(reviewer),
        synthesizer=json.dumps(synthesizer),
        timeout=timeout,
        durable="true" if durable else "false",
    )


WAITED_AT = 1_800_000_000.0  # the fake clock's start, in waited_session


def waited_session(folder: Path, session_id: str = "w") -> Path:
    """A planner refused twice by a rate limit (two waits journaled, the first of the
    30 s backoff and the second longer, waited out on a fake clock from
    :data:`WAITED_AT`), then a builder that completes the loop; the journal."""
    config = make_config(
        {
            "planner": {"triggers": ["task.start"], "publishes": ["plan.ready"]},
            "builder": {"triggers": ["plan.ready"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=folder,
    )
    backends = {
        "planner": Limited(tag("plan.ready", "the plan"), times=2),
        "builder": ScriptedBackend([tag("LOOP_COMPLETE")]),
    }
    clock = FakeClock(WAITED_AT)

    async def run() -> None:
        summary, _ = await run_hats(
            config,
            backends,
            workdir=folder,
            session_id=session_id,
            clock=clock,
            wall_clock=clock,
            sleep=clock.sleep,
        )
        assert summary.reason == "completed", summary.notes

    anyio.run(run)
    return folder / ".loop" / "sessions" / session_id / "journal.jsonl"
