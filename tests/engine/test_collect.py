"""The emit file is input: a malformed line is never fatal, reading it is bounded, and
it is never read through a link. In a loop, a dropped line is journaled
(``event.malformed``) and the hat is told in its next prompt."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from loop.backends.python_hat import HatContext, PythonBackend
from loop.emit import MAX_LINE_BYTES
from loop.engine import collect
from loop.engine.collect import MALFORMED_REPORTED, Problem, malformed_records, read_events_file
from loop.engine.journal import read_journal
from loop.records import EventMalformed, IterationEnd
from loop.testing import make_config, run_hats, scripted, tag

GOOD = b'{"topic": "work.done", "payload": "ok"}\n'

# One malformed line of each kind, and a fragment of what is reported for it.
MALFORMED = [
    (b"not json at all", "not JSON"),
    (b"\xff\xfe\n", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"payload": 1}', "no valid topic"),
    (b'{"topic": 5}', "no valid topic"),
    (b'{"topic": "a b"}', "no valid topic"),
    (b'{"topic": "x", "target": ["a"]}', "target is not a hat name"),
    (b'{"topic": "x", "ts": "yesterday"}', "ts is not a number"),
    (b'{"topic": "x", "ts": true}', "ts is not a number"),
    (b'{"topic": "x", "ts": 1e400}', "ts is not a finite number"),
    (b'{"topic": "x", "ts": NaN}', "finite"),
    (b'{"topic": "x", "payload": ' + b"[" * 150 + b"]" * 150 + b"}", "nested deeper"),
    (b'{"topic": "x", "payload": ' + b"[" * 100_000, "nested deeper"),
]


def _problem_has(problem: Problem, fragment: str) -> bool:
    return fragment in problem.problem


@pytest.mark.parametrize(("line", "fragment"), MALFORMED)
def test_a_malformed_line_is_reported_and_its_neighbours_are_read(
    tmp_path: Path, line: bytes, fragment: str
) -> None:
    """The bad line is a problem naming its number; the lines around it are events."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(GOOD + line.rstrip(b"\n") + b"\n" + GOOD)
    events, _calls, problems = read_events_file(path, "hat", 100.0)
    assert [e.topic for e in events] == ["work.done", "work.done"]
    (problem,) = problems
    assert problem.line == 2 and _problem_has(problem, fragment), problem


def test_a_line_past_the_cap_is_dropped_with_its_size(tmp_path: Path) -> None:
    """A line longer than MAX_LINE_BYTES is reported with its size; the next is read."""
    long = b'{"topic": "big", "payload": "' + b"x" * MAX_LINE_BYTES + b'"}\n'
    path = tmp_path / "events.jsonl"
    path.write_bytes(GOOD + long + GOOD + long.rstrip(b"\n"))  # the last one has no newline
    events, _calls, problems = read_events_file(path, "hat", 0.0)
    assert [e.topic for e in events] == ["work.done", "work.done"]
    assert [p.line for p in problems] == [2, 4]
    assert f"({len(long) - 1} bytes)" in problems[0].problem


def test_reading_stops_at_the_file_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_FILE_BYTES the rest is not read, and that is reported."""
    monkeypatch.setattr(collect, "MAX_FILE_BYTES", 10 * len(GOOD))
    monkeypatch.setattr(collect, "CHUNK_BYTES", 7)
    path = tmp_path / "events.jsonl"
    path.write_bytes(GOOD * 25)
    events, _calls, problems = read_events_file(path, "hat", 0.0)
    assert len(events) == 10
    (problem,) = problems
    assert problem.line is None and "the rest was not read" in problem.problem


def test_an_events_file_that_grows_while_read_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that never stops cannot keep the reader reading: the cap holds."""
    monkeypatch.setattr(collect, "MAX_FILE_BYTES", 50 * len(GOOD))
    path = tmp_path / "events.jsonl"
    path.write_bytes(GOOD)
    real_read = os.read

    def growing_read(fd: int, size: int) -> bytes:
        with path.open("ab") as fh:  # an endless writer: a line more per read
            fh.write(GOOD)
        return real_read(fd, size)

    monkeypatch.setattr(collect.os, "read", growing_read)
    events, _calls, problems = read_events_file(path, "hat", 0.0)
    assert len(events) == 50
    assert [p.line for p in problems] == [None]


def test_a_link_or_a_fifo_is_refused_never_read(tmp_path: Path) -> None:
    """A link at the events file (to a file of valid events) or a FIFO there is one
    problem; nothing is read through it, and a FIFO does not block."""
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(GOOD)
    link = tmp_path / "attempt" / "events.jsonl"
    link.parent.mkdir()
    link.symlink_to(victim)
    events, _calls, problems = read_events_file(link, "hat", 0.0, root=tmp_path)
    assert events == []
    assert [p.line for p in problems] == [None]
    assert "symbolic link" in problems[0].problem
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    events, _calls, problems = read_events_file(fifo, "hat", 0.0)
    assert events == [] and "not a regular file" in problems[0].problem


def test_many_malformed_lines_are_journaled_up_to_a_count() -> None:
    """The first MALFORMED_REPORTED problems one by one, then how many more."""
    problems = [Problem(n, "not JSON") for n in range(1, MALFORMED_REPORTED + 8)]
    records = malformed_records("hat", 3, 2, problems, 5.0)
    assert len(records) == MALFORMED_REPORTED + 1
    assert records[0] == EventMalformed(
        iteration=3, attempt=2, hat="hat", line=1, problem="not JSON", ts=5.0
    )
    assert records[-1].line is None and records[-1].problem.startswith("7 more")


# -- in a loop ----------------------------------------------------------------------------

PROMPTS: list[str] = []


def sloppy_writer(ctx: HatContext) -> None:
    """First run: two malformed lines and a good event; then completes."""
    PROMPTS.append(ctx.prompt)
    if ctx.activation == 0:
        ctx.emit("draft.ready", "v1")
        with ctx.events_file.open("ab") as fh:
            fh.write(b'{"topic": "x", "ts": "yesterday"}\n{"topic": "y", "target": ["a"]}\n')
    else:
        ctx.emit("LOOP_COMPLETE", "done")


async def test_a_loop_goes_on_and_tells_the_hat_what_was_dropped(tmp_path: Path) -> None:
    """Malformed lines end nothing: they are journaled, noted on the iteration, and the
    hat's next prompt lists them; the prompt after that no longer does."""
    PROMPTS.clear()
    cfg = make_config(
        {
            "writer": {"triggers": ["task.start", "draft.checked"], "publishes": ["draft.ready"]},
            "checker": {"triggers": ["draft.ready"], "publishes": ["draft.checked"]},
        },
        folder=tmp_path,
    )
    backends: dict[str, Any] = {
        "writer": PythonBackend(f"{__name__}:sloppy_writer"),
        "checker": scripted(tag("draft.checked")),
    }
    summary, _ = await run_hats(cfg, backends, workdir=tmp_path, session_id="m")
    assert summary.reason == "completed", summary
    records = read_journal(tmp_path / ".loop/sessions/m/journal.jsonl").records
    malformed = [r for r in records if isinstance(r, EventMalformed)]
    assert [(r.iteration, r.line) for r in malformed] == [(1, 2), (1, 3)]
    first = next(r for r in records if isinstance(r, IterationEnd))
    assert [e.topic for e in first.emitted] == ["draft.ready"]
    assert any("ts is not a number" in note for note in first.notes)
    assert "Events you emitted that were dropped" not in PROMPTS[0]
    assert "line 2: ts is not a number" in PROMPTS[1]
    assert "line 3: target is not a hat name" in PROMPTS[1]
    assert json.dumps(malformed[0].problem)  # plain text, journaled as it is
