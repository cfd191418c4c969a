"""The session view: loaded from journals and recordings of real runs, and its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.errors import InputError
from loop.session.load import load_session, resolve_session
from loop.session.view import END, event_rows, flows, hat_stats, outcome
from tests.commands.helpers import loop, waited_session, wave_toml

REPO = Path(__file__).resolve().parents[2]

EXHAUST = """\
[loop]
prompt = "exhaust"
max_iterations = 10
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.a]
description = "a"
triggers = ["task.start", "b.x"]
publishes = ["a.x"]
max_activations = 2
[hats.a.backend]
type = "scripted"
outputs = ['<event topic="a.x">1</event>', '<event topic="a.x">2</event>']
[hats.b]
description = "b"
triggers = ["a.x"]
publishes = ["b.x"]
[hats.b.backend]
type = "scripted"
outputs = ['<event topic="b.x">1</event>', '<event topic="b.x">2</event>']
"""


def test_a_hat_exhausted_is_a_marker_and_the_loops_notice_an_event(tmp_path: Path) -> None:
    """A real run where hat `a` reaches max_activations: the journal's hat.exhausted is a
    marker after iteration 4, and the notice the loop published is listed with the loop
    as its publisher; the event it dropped went nowhere."""
    (tmp_path / "loop.toml").write_text(EXHAUST, encoding="utf-8")
    res = loop("run", "-q", "--session-id", "ex", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    view = load_session(resolve_session("ex", tmp_path / ".loop/sessions"))
    assert outcome(view) == "limit" and view.end is not None
    assert view.end.reason == "no_pending_events"
    assert [(m.kind, m.after) for m in view.markers] == [("hat_exhausted", 4)]
    rows = list(event_rows(view))
    assert [(r.iteration, r.hat, r.event.topic, r.to) for r in rows] == [
        (0, None, "task.start", 1),
        (1, "a", "a.x", 2),
        (2, "b", "b.x", 3),
        (3, "a", "a.x", 4),
        (4, "b", "b.x", None),
        (4, None, "a.exhausted", None),
    ]
    [notice] = event_rows(view, topic="*.exhausted", iteration=4)
    assert notice.event.source == "loop" and notice.hat is None


def test_a_failed_iteration_is_retried_on_the_same_events() -> None:
    """The command recording: iteration 2 failed and 3 ran on the same events, so they
    went to 3 (the one that consumed them); flows count both runs."""
    view = load_session(REPO / "recordings" / "command.jsonl")
    rows = list(event_rows(view, iteration=1))
    assert [(r.event.topic, r.to) for r in rows] == [("count.step", 3), ("count.logged", 3)]
    counts = {(f.source, f.target, f.topic): f.count for f in flows(view)}
    assert counts[("counter", "checker", "count.step")] == 4  # iterations 2, 3, 5, 7
    assert counts[("checker", END, "LOOP_COMPLETE")] == 1


# A fan-out of three identical events (same topic, source, time and payload) to three
# reviewers at once; each reviewer waits for the next one's answer, so they commit in
# the reverse of the order they started (4, 3, then 2).
SYNTHESIZER = "cat >/dev/null; echo '<event topic=\"LOOP_COMPLETE\">ok</event>'"
COORDINATOR = 'cat >/dev/null; "$LOOP_PYTHON" -m loop emit review.perspective --payloads x x x'
REVIEWER = r"""
cat > /dev/null
n=0
while [ "$LOOP_ITERATION" -lt 4 ] && [ ! -e "done-$((LOOP_ITERATION + 1))" ]; do
  n=$((n + 1)); [ "$n" -gt 600 ] && exit 9
  sleep 0.05
done
echo "<event topic=\"review.done\">verdict $LOOP_ITERATION</event>"
touch "done-$LOOP_ITERATION"
"""


def test_each_event_of_a_fan_out_goes_to_the_activation_that_ran_on_it(tmp_path: Path) -> None:
    """Three identical events fanned out to three reviewers at once, which commit out of
    order: each event's `to` is the iteration that took it (2, 3, 4, by the numbers the
    loop gave them), in the journal and in the recording alike."""
    config = wave_toml(
        coordinator=COORDINATOR, reviewer=REVIEWER, synthesizer=SYNTHESIZER, timeout=60
    )
    (tmp_path / "loop.toml").write_text(config, encoding="utf-8")
    res = loop("run", "-q", "--session-id", "w", "--record-session", "rec.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    journal = load_session(resolve_session("w", tmp_path / ".loop/sessions"))
    recording = load_session(tmp_path / "rec.jsonl")
    for view in (journal, recording):
        rows = list(event_rows(view))
        fanned = [(r.iteration, r.event.payload, r.to) for r in rows if r.hat == "coordinator"]
        assert fanned == [(1, "x", 2), (1, "x", 3), (1, "x", 4)], view.source
        assert len({(r.event.ts, r.event.source) for r in rows if r.hat == "coordinator"}) == 1
        verdicts = {r.event.payload: r.to for r in rows if r.hat == "reviewer"}
        assert verdicts == {"verdict 2": 5, "verdict 3": 5, "verdict 4": 5}, view.source
        for number in (2, 3, 4):  # each took the one event the loop numbered for it
            it = view.iteration(number)
            assert it is not None and it.trigger_seqs == (number,), view.source
    # the journal as it was while the three reviewers ran: each event is taken by the
    # activation running on it, and no iteration that ended ran on it
    lines = (tmp_path / ".loop/sessions/w/journal.jsonl").read_bytes().splitlines(keepends=True)
    starts = [n for n, line in enumerate(lines) if b'"kind":"iteration.start"' in line]
    running = tmp_path / "running.jsonl"
    running.write_bytes(b"".join(lines[: starts[3] + 1]))
    view = load_session(running)
    assert [(f.iteration, f.hat, f.trigger_seqs) for f in view.in_flight_runs] == [
        (2, "reviewer", (2,)),
        (3, "reviewer", (3,)),
        (4, "reviewer", (4,)),
    ]
    fanned = [(r.to, r.taken_by) for r in event_rows(view, topic="review.perspective")]
    assert fanned == [(None, 2), (None, 3), (None, 4)]


def test_the_wave_recordings_perspectives_go_to_their_reviewers() -> None:
    """The committed wave recording (its reviewers committed 3, 4, then 2): security went
    to 2, performance to 3, docs to 4, as each one's triggers say."""
    view = load_session(REPO / "recordings" / "wave.jsonl")
    rows = event_rows(view, topic="review.perspective")
    assert [(r.event.payload, r.to) for r in rows] == [
        ("security", 2),
        ("performance", 3),
        ("docs", 4),
    ]
    for number, payload in ((2, "security"), (3, "performance"), (4, "docs")):
        it = view.iteration(number)
        assert it is not None and [e.payload for e in it.triggers] == [payload]


def test_a_limit_waited_out_is_a_marker_and_the_iterations_own(tmp_path: Path) -> None:
    """A planner refused twice by a rate limit: each journaled wait is a `wait` marker
    before the planner's row, in the session's waits with where it began on the
    session's time, and in the planner's iteration, which began before its waits (its
    last call, after them)."""
    view = load_session(waited_session(tmp_path))
    first, second = view.waits
    assert (first.hat, first.iteration, first.limit, first.attempt) == (
        "planner",
        1,
        "rate_limit",
        1,
    )
    assert first.at == 0.0 and second.at == pytest.approx(first.seconds)
    assert [(m.kind, m.after) for m in view.markers] == [("wait", 0), ("wait", 0)]
    assert view.markers[0].message == (
        f"planner waited {first.seconds:.2f}s for rate_limit (iteration 1): 429 Too Many Requests"
    )
    planner = view.iteration(1)
    assert planner is not None and planner.waits == (first, second)
    assert planner.began == 0.0 and planner.waited == first.seconds + second.seconds
    assert planner.started == pytest.approx(planner.waited)  # its last call, after the waits
    builder = view.iteration(2)
    assert builder is not None and builder.waits == () and builder.waited == 0.0
    assert builder.began == pytest.approx(planner.elapsed)


def test_hat_stats_add_what_backends_reported() -> None:
    """Per hat: iterations, failures, time, events; cost and tokens only where reported."""
    view = load_session(REPO / "recordings" / "claude.jsonl")
    stats = {s.hat: s for s in hat_stats(view)}
    writer, finisher = stats["writer"], stats["finisher"]
    it = view.iterations[0]
    assert (writer.iterations, writer.failed, writer.events) == (1, 0, 1)
    assert writer.cost_usd == it.cost_usd and writer.input_tokens == it.input_tokens
    assert finisher.cost_usd is None and finisher.input_tokens is None
    assert writer.duration == it.duration
    view = load_session(REPO / "recordings" / "command.jsonl")
    assert {s.hat: s.failed for s in hat_stats(view)} == {"counter": 0, "checker": 1}


def test_resolve_prefers_a_file_then_an_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file or a session folder by path; otherwise a session id in the sessions folder;
    an id that is not a plain name is just a missing file."""
    sessions = tmp_path / "sessions"
    (sessions / "s1").mkdir(parents=True)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # ../x is in tmp_path, where nothing is
    (sessions / "s1" / "journal.jsonl").write_text("{}\n", encoding="utf-8")
    assert resolve_session("s1", sessions) == sessions / "s1" / "journal.jsonl"
    assert resolve_session(str(sessions / "s1"), sessions) == sessions / "s1" / "journal.jsonl"
    assert resolve_session(None, sessions) == sessions / "s1" / "journal.jsonl"
    with pytest.raises(InputError, match=r"^\.\./x: no such file$"):
        resolve_session("../x", sessions)
    with pytest.raises(InputError, match="unknown session 's2'"):
        resolve_session("s2", sessions)
