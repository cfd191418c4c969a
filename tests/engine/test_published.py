"""Events published outside an iteration: journaled and routed, or refused loudly at the end.

A subscriber of ``loop.iteration.done`` (or any extension, between iterations) may
publish. Such an event is journaled in an ``events.published`` record as soon as the
engine's own publication returns, routed like an iteration's events, recorded, shown
and compared on replay; nothing is routed after the session's end.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from structlog.testing import capture_logs

from loop.bus import EventBus
from loop.engine.journal import read_journal
from loop.engine.lifecycle import ITERATION_DONE, LOOP_TERMINATED
from loop.engine.state import RouteContext, fold
from loop.events import Event
from loop.extensions import Extension
from loop.records import EventsPublished, IterationEnd, SessionStart
from loop.replay import replay_file, replay_recording
from loop.routing import HatSpec
from loop.runner import RunOptions, run_loop
from loop.session.load import load_session
from loop.session.recorder import Recorder
from loop.testing import make_config, scripted, tag

HATS = {
    "builder": {"triggers": ["task.start"], "publishes": ["build.done"]},
    "reviewer": {"triggers": ["build.done", "review.requested"], "publishes": ["LOOP_COMPLETE"]},
}


class RequestsReview(Extension):
    """Asks for a review when the first iteration is done (from its done handler)."""

    name = "review-requests"

    def __init__(self) -> None:
        self.bus: EventBus | None = None

    def attach(self, bus: EventBus) -> None:
        self.bus = bus
        bus.subscribe(ITERATION_DONE, self._done, name=self.name)

    async def _done(self, event: Event) -> None:
        assert self.bus is not None
        if isinstance(event.payload, IterationEnd) and event.payload.iteration == 1:
            await self.bus.publish(
                Event(topic="review.requested", payload="please", source=self.name)
            )


class SaysGoodbye(Extension):
    """Publishes when the session has ended: nothing can be routed any more."""

    name = "goodbye"

    def attach(self, bus: EventBus) -> None:
        async def bye(event: Event) -> None:
            await bus.publish(Event(topic="review.requested", payload="too late", source="bye"))

        bus.subscribe(LOOP_TERMINATED, bye, name=self.name)


async def _run(folder: Path, *extra: Extension) -> Path:
    config = make_config(HATS, folder=folder, max_iterations=5)
    backends = {
        "builder": scripted(tag("build.done", "built")),
        "reviewer": scripted(tag("LOOP_COMPLETE", "looks good")),
    }
    options = RunOptions(
        workdir=folder, session_id="s", progress=False, handle_signals=False, backends=backends
    )
    summary = await run_loop(config, options, [Recorder(folder / "rec.jsonl"), *extra])
    assert summary.reason == "completed", summary
    return folder / ".loop/sessions/s/journal.jsonl"


async def test_an_event_published_after_an_iteration_is_journaled_and_routed(
    tmp_path: Path,
) -> None:
    """Published from a ``loop.iteration.done`` handler: journaled after the iteration it
    followed, it becomes pending and wakes its hat; the recording has it too."""
    journal = await _run(tmp_path, RequestsReview())
    records = read_journal(journal).records
    kinds = [r.kind for r in records]
    assert kinds[kinds.index("iteration.end") + 1] == "events.published"
    [published] = [r for r in records if isinstance(r, EventsPublished)]
    assert published.after == 1
    assert [(e.topic, e.source) for e in published.events] == [
        ("review.requested", "review-requests")
    ]
    ends = [r for r in records if isinstance(r, IterationEnd)]
    assert [r.hat for r in ends] == ["builder", "reviewer"]
    # pending after the builder's own event, the reviewer ran on both
    assert [t.topic for t in ends[1].triggers] == ["build.done", "review.requested"]
    lines = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["header", "iteration", "published", "iteration", "footer"]


async def test_the_replay_compares_events_published_between_iterations(tmp_path: Path) -> None:
    """With the extension that published them, the replay matches; without it, the replay
    says which events were not published again, and where."""
    await _run(tmp_path, RequestsReview())
    same = await replay_recording(tmp_path / "rec.jsonl", [RequestsReview()])
    assert same.ok, same.divergence and same.divergence.render()
    # without it: the first iteration after them says they are missing
    missing = await replay_recording(tmp_path / "rec.jsonl")
    assert missing.divergence is not None
    assert missing.divergence.render() == (
        "diverged at iteration 1: events published after iteration 1 (outside any "
        "iteration) were not published on replay\n"
        '  expected: review.requested "please"\n'
        "  actual  : (none)"
    )


def test_replay_file_takes_the_extensions_too(tmp_path: Path) -> None:
    """The synchronous ``replay_file`` takes the extensions of the recorded run, as
    ``replay_recording`` does: such a session replays from sync code too."""
    anyio.run(_run, tmp_path, RequestsReview())
    recording = tmp_path / "rec.jsonl"
    for result in (
        replay_file(recording, [RequestsReview()]),
        replay_file(recording, extensions=[RequestsReview()]),
    ):
        assert result.ok, result.divergence and result.divergence.render()
    assert not replay_file(recording).ok


async def test_show_marks_where_they_were_published(tmp_path: Path) -> None:
    """The journal and the recording both show a ``published`` marker after iteration 1,
    and the events among the loop's own (``loop events``)."""
    journal = await _run(tmp_path, RequestsReview())
    for path in (journal, tmp_path / "rec.jsonl"):
        view = load_session(path)
        [marker] = [m for m in view.markers if m.kind == "published"]
        assert marker.after == 1
        assert marker.message == (
            "published outside any iteration, routed: review.requested (from review-requests)"
        )
        assert ("review.requested", 1) in [(e.event.topic, e.after) for e in view.loop_events]


async def test_an_event_published_after_the_end_is_refused_loudly(tmp_path: Path) -> None:
    """After ``session.end`` nothing is routed: the event is logged as an error, and the
    journal still ends with its ``session.end``."""
    with capture_logs() as logs:
        journal = await _run(tmp_path, SaysGoodbye())
    refused = [x for x in logs if x["event"].startswith("event published after the session")]
    assert refused == [
        {
            "event": "event published after the session ended: refused, not routed",
            "topic": "review.requested",
            "source": "bye",
            "log_level": "error",
        }
    ]
    assert read_journal(journal).records[-1].kind == "session.end"


def test_a_resumed_session_has_them_pending() -> None:
    """The reducer routes an ``events.published`` record: a resumed engine runs the hat."""
    ctx = RouteContext(
        hats=(
            HatSpec(name="builder", triggers=("task.start",)),
            HatSpec(name="reviewer", triggers=("review.requested",)),
        )
    )
    event = Event(topic="review.requested", payload="please", source="ext", ts=1.0)
    start = SessionStart(
        session_id="s",
        started_at="2026-01-01T00:00:00Z",
        config_digest="sha256:x",
        starting_event="task.start",
        completion_event="LOOP_COMPLETE",
        hats={},
        config={},
        version="0",
        config_source="loop.toml",
        start_event=Event(topic="other.start", source="loop", ts=0.0),
        ts=0.0,
    )
    state = fold([start, EventsPublished(after=0, events=(event,), ts=1.0)], ctx)
    assert [(p.hat, p.event.topic) for p in state.pending] == [("reviewer", "review.requested")]
