"""Replay: the real engine against a recording; divergences, bad input, the CLI, JUnit XML."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import anyio
import pytest
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from loop.backends.base import BackendRequest
from loop.backends.replay import ReplayBackend
from loop.cli import main
from loop.config import config_digest
from loop.engine import state as engine_state
from loop.errors import RecordingError, ReplayDivergence, UsageError
from loop.replay import RecordingReader, replay_file, replay_recording
from loop.session import reader as reader_module
from tests.session.test_recorder import LOOP_TOML, record_session

REPO = Path(__file__).resolve().parents[1]


def edit(
    path: Path, change: Callable[[list[dict[str, Any]]], None], *, name: str = "edited.jsonl"
) -> Path:
    """A copy of the recording at ``path`` with its decoded lines changed by ``change``."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    change(records)
    out = path.with_name(name)
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return out


def its(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The iteration records among ``records``."""
    return [r for r in records if r["kind"] == "iteration"]


@pytest.fixture
async def recording(tmp_path: Path) -> Path:
    """A fresh recording of the five-iteration test loop."""
    path, _, _ = await record_session(tmp_path)
    return path


async def test_a_fresh_recording_replays(recording: Path) -> None:
    """Replaying an unchanged recording matches: same hats, events, count and reason."""
    result = await replay_recording(recording)
    assert result.ok, result.divergence
    assert (result.actual_iterations, result.expected_iterations) == (5, 5)
    assert result.actual_reason == result.expected_reason == "completed"
    assert result.partial is None
    assert result.summary().startswith("ok ")
    result.raise_for_divergence()


async def test_kept_and_indexed_iterations_read_the_same(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An iteration the scan kept is the record read from disk when it is not kept."""
    with RecordingReader(recording) as kept:
        monkeypatch.setattr(reader_module, "KEEP_PARSED", 0)
        with RecordingReader(recording) as indexed:
            assert kept.iterations == indexed.iterations == 5
            for number in range(1, 7):
                assert kept.iteration(number) == indexed.iteration(number)
            assert indexed.iteration(5) is not None
            assert (kept.published, kept.schedule, kept.footer) == (
                indexed.published,
                indexed.schedule,
                indexed.footer,
            )


async def test_the_replay_writes_an_events_file_only_if_its_recording_did(
    recording: Path,
) -> None:
    """A recording whose iterations emitted through the events file (or made tool calls)
    replays with a backend that writes it; one whose hats only wrote tags, without."""
    with RecordingReader(recording) as reader:
        assert not reader.file_events  # scripted hats: tags only
    result = await replay_recording(recording)
    assert result.ok, result.divergence
    committed = REPO / "recordings" / "command.jsonl"
    with RecordingReader(committed) as reader:
        assert reader.file_events
    result = await replay_recording(committed)
    assert result.ok, result.divergence


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "recordings").glob("*.jsonl")))
def test_committed_recordings_replay(name: str) -> None:
    """Every committed recording (default preset, command backend...) replays cleanly."""
    result = replay_file(REPO / "recordings" / name)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == result.expected_iterations > 0


async def test_the_replayed_engines_log_lines_name_their_recording() -> None:
    """A folder replays in one process: each engine line says which recording it is of."""
    path = REPO / "recordings" / "tools.jsonl"  # its experience export logs as it replays
    with capture_logs(processors=[merge_contextvars]) as logs:
        result = await replay_recording(path)
    assert result.ok, result.summary()
    assert logs
    assert {entry.get("recording") for entry in logs} == {str(path)}


def test_a_recording_is_named_by_a_string_too() -> None:
    """The public API takes a path as text, as a person at a prompt writes it."""
    name = str(REPO / "recordings" / "default.jsonl")
    result = replay_file(name)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.path == Path(name)
    with RecordingReader(name) as reader:
        assert reader.path == Path(name) and reader.iterations > 0


@pytest.mark.parametrize(("name", "loaded"), [("wave.jsonl", False), ("tools.jsonl", True)])
def test_the_tools_are_loaded_only_for_a_recording_with_agent_calls(
    name: str, loaded: bool
) -> None:
    """A recording whose agents made no tool call replays without importing the tool
    domains (a fresh interpreter: the registry caches what it loaded)."""
    code = (
        "import sys; from loop.replay import replay_file; import loop.tools.registry as r; "
        "res = replay_file(sys.argv[1]); print(res.ok, r._cache is not None)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "recordings" / name)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.splitlines()[-1].split() == ["True", str(loaded)]


async def test_an_edited_event_diverges(recording: Path) -> None:
    """A recorded event payload that the output does not produce is a divergence."""

    def change(rs: list[dict[str, Any]]) -> None:
        its(rs)[2]["events"][0]["payload"] = "edited"

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 3
    assert "events differ" in result.divergence.what
    text = result.divergence.render()
    assert 'expected: review.rejected "edited"' in text
    assert 'actual  : review.rejected "missing test"' in text
    with pytest.raises(ReplayDivergence, match="diverged at iteration 3") as info:
        result.raise_for_divergence()
    assert info.value.exit_code == 4


async def test_an_edited_output_diverges(recording: Path) -> None:
    """An output whose tag changed produces other events than recorded: a divergence."""

    def change(rs: list[dict[str, Any]]) -> None:
        its(rs)[0]["output"] = its(rs)[0]["output"].replace("1. split", "1. join")

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 1


async def test_a_different_hat_diverges(recording: Path) -> None:
    """A recording that says another hat ran is a divergence at that iteration."""

    def change(rs: list[dict[str, Any]]) -> None:
        its(rs)[1]["hat"] = "reviewer"

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 2
    assert result.divergence.what == "a different hat ran"
    assert (result.divergence.expected, result.divergence.actual) == (["reviewer"], ["builder"])


async def test_a_missing_iteration_diverges(recording: Path) -> None:
    """An iteration missing from the middle of the recording is a divergence there."""

    def change(rs: list[dict[str, Any]]) -> None:
        rs.remove(its(rs)[2])

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 3
    assert "missing from the recording" in result.divergence.what


async def test_a_missing_last_iteration_diverges(recording: Path) -> None:
    """When the replay runs past the recording, the backend says 'recording exhausted'."""

    def change(rs: list[dict[str, Any]]) -> None:
        rs.remove(its(rs)[-1])

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 5
    assert "the recording ends at iteration 4" in result.divergence.what
    assert "recording exhausted" in result.divergence.render()


async def test_an_extra_recorded_iteration_means_the_loop_ended_early(recording: Path) -> None:
    """A recording longer than the replayed loop diverges: the loop ended early."""

    def change(rs: list[dict[str, Any]]) -> None:
        extra = dict(its(rs)[-1], iteration=6)
        rs.insert(len(rs) - 1, extra)

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 6
    assert result.divergence.what == "the replayed loop ended early"


async def test_a_different_termination_diverges(recording: Path) -> None:
    """A footer with another termination reason is a divergence at the end."""

    def change(rs: list[dict[str, Any]]) -> None:
        rs[-1]["reason"] = "max_iterations"

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration is None
    assert result.divergence.what == "termination differs"
    assert "diverged at the end" in result.divergence.render()


async def test_a_different_iteration_count_in_the_footer_diverges(recording: Path) -> None:
    """A footer that says 6 iterations where 5 were recorded and replayed is a divergence
    at the end, naming both counts (only the reason was compared)."""

    def change(rs: list[dict[str, Any]]) -> None:
        rs[-1]["iterations"] = 6

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration is None
    assert (
        result.divergence.what == "the iteration count differs: the footer says 6, the replay ran 5"
    )
    assert result.divergence.expected == ["completed after 6 iteration(s)"]
    assert result.divergence.actual == ["completed after 5 iteration(s)"]


async def test_a_prefix_recording_is_not_held_to_its_footers_count(recording: Path) -> None:
    """A recording of a run that ended in a way a replay cannot reproduce (interrupted):
    its iterations are compared, not the footer's count, which the replay cannot reach."""

    def change(rs: list[dict[str, Any]]) -> None:
        del rs[3:-1]  # iterations 3 to 5 never recorded: the run was stopped
        rs[-1].update(reason="interrupted", iterations=3)

    result = await replay_recording(edit(recording, change))
    assert result.ok, result.divergence and result.divergence.render()
    assert result.partial == "the recorded run ended by interrupted"
    assert result.actual_iterations == 2


async def test_a_changed_routing_rule_in_the_config_diverges(recording: Path) -> None:
    """Recorded under other triggers (review.rejected → planner), the replay diverges."""

    def change(rs: list[dict[str, Any]]) -> None:
        header = rs[0]
        for where in (header["hats"], header["config"]["hats"]):
            where["builder"]["triggers"] = ["plan.ready"]
            where["planner"]["triggers"] = ["task.start", "review.rejected"]
        header["config_digest"] = config_digest(header["config"])

    result = await replay_recording(edit(recording, change))
    assert result.divergence is not None
    assert result.divergence.iteration == 4
    assert (result.divergence.expected, result.divergence.actual) == (["builder"], ["planner"])


async def test_a_changed_routing_rule_in_the_engine_diverges(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine regression (routing code sends review.rejected elsewhere) is caught."""
    real = engine_state.route

    def regressed(event: Any, hats: Any, **kwargs: Any) -> str | None:
        if event.topic == "review.rejected":
            return "planner"
        return real(event, hats, **kwargs)

    monkeypatch.setattr(engine_state, "route", regressed)
    result = await replay_recording(recording)
    assert result.divergence is not None
    assert result.divergence.iteration == 4
    assert result.divergence.what == "a different hat ran"


async def test_a_recorded_failure_replays_as_the_same_failure(tmp_path: Path) -> None:
    """A failed iteration (scripted outputs exhausted) replays as a failure, and matches."""
    toml = LOOP_TOML.replace(
        "max_iterations = 20", "max_iterations = 20\nmax_consecutive_failures = 2"
    ).replace("'<event topic=\"LOOP_COMPLETE\">approved</event>',", "")
    path, summary, _ = await record_session(tmp_path, toml=toml)
    assert summary.reason == "max_consecutive_failures"
    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert result.actual_reason == "max_consecutive_failures"
    reader = RecordingReader(path)
    last = reader.iteration(reader.last_iteration)
    reader.close()
    assert last is not None
    assert (last.status, last.backend_ok) == ("failed", False)


async def test_replay_file_in_a_running_event_loop_says_to_await_replay_recording() -> None:
    """Called from async code (an async test, a notebook), the synchronous ``replay_file``
    cannot run its own event loop: a one-line usage error says what to await instead (it
    was anyio's ``RuntimeError: Already running asyncio in this thread``)."""
    with pytest.raises(UsageError) as info:
        replay_file(REPO / "recordings" / "default.jsonl")
    assert str(info.value) == (
        "replay_file() cannot run inside a running event loop (async code, a notebook): "
        "await replay_recording(path) there instead"
    )
    assert (info.value.code, info.value.exit_code) == ("usage_error", 2)
    assert (await replay_recording(REPO / "recordings" / "default.jsonl")).ok


def test_a_byte_order_mark_before_the_header_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording saved by an editor that starts UTF-8 files with a BOM: `replay DIR`
    and the pytest plugin take it for a recording, so the reader reads it too, as
    loop.toml is read: replay, show and events take it whole."""
    from loop.session.discover import starts_recording

    good = REPO / "recordings" / "default.jsonl"
    path = tmp_path / "bom.jsonl"
    path.write_bytes("\ufeff".encode() + good.read_bytes())
    assert starts_recording(path)
    with RecordingReader(path) as marked, RecordingReader(good) as plain:
        assert [r for _, r in marked.records()] == [r for _, r in plain.records()]
        assert marked.iteration(marked.last_iteration) == plain.iteration(plain.last_iteration)
    for command in (["replay"], ["show"], ["events"]):
        assert main([*command, str(path)]) == 0, capsys.readouterr().err
    assert "error" not in capsys.readouterr().err


async def test_a_torn_last_line_warns_and_the_rest_replays(recording: Path) -> None:
    """A crash mid-write (torn last line) is a warning; the iterations before it replay."""
    data = await anyio.Path(recording).read_bytes()
    torn = anyio.Path(recording.with_name("torn.jsonl"))
    body = data[: data.rstrip(b"\n").rfind(b"\n") + 1]  # drop the footer...
    await torn.write_bytes(body + b'{"kind":"footer","rea')  # ...and leave half of it
    result = await replay_recording(Path(torn))
    assert result.ok, result.divergence
    assert any("torn last line" in w and "torn.jsonl:7" in w for w in result.warnings)
    assert result.partial == "the recording has no footer"
    assert result.actual_iterations == 5


async def test_a_torn_iteration_line_at_the_end_is_not_indexed(recording: Path) -> None:
    """Cut mid-iteration (the recorder's own line, no newline): a warning, the rest replays."""
    lines = (await anyio.Path(recording).read_bytes()).splitlines(keepends=True)
    assert lines[5].startswith(b'{"kind":"iteration","iteration":5,')  # the recorder's form
    torn = anyio.Path(recording.with_name("torn5.jsonl"))
    await torn.write_bytes(b"".join(lines[:5]) + lines[5][:60])
    result = await replay_recording(Path(torn))
    assert result.ok, result.divergence
    assert (result.expected_iterations, result.actual_iterations) == (4, 4)
    assert result.partial == "the recording has no footer"
    assert any("torn last line" in w and "torn5.jsonl:6" in w for w in result.warnings)


async def test_a_damaged_line_in_the_middle_is_bad_input_naming_it(recording: Path) -> None:
    """A middle line whose JSON breaks off (its first bytes intact): bad input, its line."""
    lines = (await anyio.Path(recording).read_bytes()).splitlines(keepends=True)
    lines[3] = lines[3][:80] + b"\n"  # iteration 3: its prefix intact, the rest gone
    damaged = anyio.Path(recording.with_name("d.jsonl"))
    await damaged.write_bytes(b"".join(lines))
    with pytest.raises(RecordingError, match=r"d\.jsonl:4: corrupt record \(not JSON") as info:
        await replay_recording(Path(damaged))
    assert info.value.exit_code == 2
    assert "\n" not in str(info.value)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BAD_INPUTS: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "missing file": (lambda rec, d: d / "nope.jsonl", r"nope\.jsonl: recording not found"),
    "folder": (lambda rec, d: d, "is a folder"),
    "empty file": (lambda rec, d: _write(d / "e.jsonl", b""), r"e\.jsonl: empty recording"),
    "blank lines": (lambda rec, d: _write(d / "e.jsonl", b"\n\n"), "empty recording"),
    "not JSONL": (
        lambda rec, d: _write(d / "t.jsonl", b"hello world\nsecond line\n"),
        r"t\.jsonl:1: not a JSONL recording",
    ),
    "JSON without kind": (
        lambda rec, d: _write(d / "k.jsonl", b'{"a": 1}\n'),
        r"k\.jsonl:1: not a hatloop recording",
    ),
    "corrupt middle line": (
        lambda rec, d: _write(
            d / "c.jsonl",
            b"\n".join(
                line if i != 3 else b'{"kind": "iteration", oops'
                for i, line in enumerate(rec.read_bytes().split(b"\n"))
            ),
        ),
        r"c\.jsonl:4: corrupt record \(not JSON",
    ),
    "invalid record in the middle": (
        lambda rec, d: edit(rec, lambda rs: its(rs)[1].pop("hat"), name="i.jsonl"),
        r"i\.jsonl:3: invalid record: iteration\.hat: Field required",
    ),
    "invalid field found when replayed": (  # indexed first, validated when it is served
        lambda rec, d: edit(rec, lambda rs: its(rs)[2].pop("output"), name="o.jsonl"),
        r"o\.jsonl:4: invalid record: output: Field required",
    ),
    "unknown schema version": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(schema_version=99), name="v.jsonl"),
        r"v\.jsonl:1: unknown schema version 99",
    ),
    "schema version 1 (no tool calls)": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(schema_version=1), name="v1.jsonl"),
        r"v1\.jsonl:1: schema version 1, an older format that holds no tool calls.*re-record it",
    ),
    "schema version true": (  # a bool is no version, though Python counts it as 1
        lambda rec, d: edit(rec, lambda rs: rs[0].update(schema_version=True), name="t.jsonl"),
        r"t\.jsonl:1: unknown schema version True",
    ),
    "schema version 1.0": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(schema_version=1.0), name="f.jsonl"),
        r"f\.jsonl:1: unknown schema version 1\.0",
    ),
    "schema version 2.0": (  # the current version, but not an integer
        lambda rec, d: edit(rec, lambda rs: rs[0].update(schema_version=2.0), name="g2.jsonl"),
        r"g2\.jsonl:1: unknown schema version 2\.0",
    ),
    "schema version missing": (
        lambda rec, d: edit(rec, lambda rs: rs[0].pop("schema_version"), name="n.jsonl"),
        r"n\.jsonl:1: unknown schema version None",
    ),
    "a session journal": (  # what a run writes anyway: say how to get a recording
        lambda rec, d: next(d.glob(".loop/sessions/*/journal.jsonl")),
        r"journal\.jsonl:1: a session journal, not a recording: record a session to replay "
        r"with run --record-session FILE",
    ),
    "header not first": (
        lambda rec, d: edit(rec, lambda rs: rs.pop(0), name="h.jsonl"),
        r"h\.jsonl:1: expected a header record first, found 'iteration'",
    ),
    "header hats differ": (
        lambda rec, d: edit(
            rec,
            lambda rs: rs[0]["hats"]["builder"].update(triggers=["other.topic"]),
            name="m.jsonl",
        ),
        r"m\.jsonl:1: header does not match the hats: hat 'builder': triggers is "
        r'\["other\.topic"\] in the header, \["plan\.ready", "review\.rejected"\] in the '
        r"recorded configuration$",
    ),
    "header max_activations differs": (  # the one field that differs, with both values
        lambda rec, d: edit(
            rec,
            lambda rs: rs[0]["hats"]["builder"].update(max_activations=9),
            name="ma.jsonl",
        ),
        r"ma\.jsonl:1: header does not match the hats: hat 'builder': max_activations is 9 "
        r"in the header, 5 in the recorded configuration$",
    ),
    "header hat the configuration lacks": (
        lambda rec, d: edit(
            rec,
            lambda rs: rs[0]["hats"].update(ghost=rs[0]["hats"]["planner"]),
            name="gh.jsonl",
        ),
        r"gh\.jsonl:1: header does not match the hats: hat 'ghost' is in the header, not in "
        r"the recorded configuration$",
    ),
    "header completion event differs": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(completion_event="DONE"), name="ce.jsonl"),
        r'ce\.jsonl:1: header does not match the hats: completion_event is "DONE" in the '
        r'header, "LOOP_COMPLETE" in the recorded configuration$',
    ),
    "config digest differs": (
        lambda rec, d: edit(
            rec, lambda rs: rs[0]["config"]["loop"].update(max_iterations=3), name="g.jsonl"
        ),
        r"g\.jsonl:1: header does not match its configuration",
    ),
    "unknown hat in an iteration": (
        lambda rec, d: edit(rec, lambda rs: its(rs)[0].update(hat="ghost"), name="u.jsonl"),
        r"u\.jsonl:2: iteration 1 names hat 'ghost'",
    ),
    "duplicate iteration": (
        lambda rec, d: edit(rec, lambda rs: its(rs)[1].update(iteration=1), name="dup.jsonl"),
        r"dup\.jsonl:3: iteration 1 is recorded twice",
    ),
    "a session id that is a path": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(session_id="../x"), name="sid.jsonl"),
        r"sid\.jsonl:1: invalid header: session id must be a plain name without path sep",
    ),
    "an empty session id": (
        lambda rec, d: edit(rec, lambda rs: rs[0].update(session_id=""), name="e.jsonl"),
        r"e\.jsonl:1: invalid header: session id must be a non-empty name",
    ),
    "records lost to write failures": (
        lambda rec, d: edit(rec, lambda rs: rs[-1].update(write_failures=2), name="w.jsonl"),
        r"w\.jsonl: recording is incomplete",
    ),
}


@pytest.mark.parametrize("keep", ["kept", "indexed"])
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
async def test_bad_input_is_a_one_line_error_naming_file_and_line(
    case: str, keep: str, recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each kind of bad recording is a RecordingError with the file (and line), whether
    its scan keeps the parsed iterations or only indexes them."""
    if keep == "indexed":
        monkeypatch.setattr(reader_module, "KEEP_PARSED", 0)
    make, pattern = BAD_INPUTS[case]
    target = make(recording, tmp_path)
    with pytest.raises(RecordingError, match=pattern) as info:
        await replay_recording(target)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


async def test_replay_backend_serves_both_channels_and_runs_out(
    recording: Path, tmp_path: Path
) -> None:
    """The backend writes the recorded emit-file events and fails past the recording."""

    def change(rs: list[dict[str, Any]]) -> None:
        its(rs)[0]["emitted"] = [{"topic": "plan.extra", "payload": {"a": 1}, "source": "planner"}]

    reader = RecordingReader(edit(recording, change))
    backend = ReplayBackend(reader)
    events = tmp_path / "events.jsonl"

    def request(iteration: int, hat: str) -> BackendRequest:
        return BackendRequest(
            hat=hat,
            prompt="p",
            iteration=iteration,
            session_id="s",
            activation=0,
            events_file=events,
            workdir=tmp_path,
        )

    first = await backend.run(request(1, "planner"))
    assert first.ok
    assert "plan.ready" in first.output
    assert json.loads(events.read_text())["payload"] == {"a": 1}
    wrong = await backend.run(request(2, "reviewer"))
    assert not wrong.ok
    assert "recorded for hat 'builder'" in str(wrong.reason)
    past = await backend.run(request(9, "builder"))
    assert not past.ok
    assert str(past.reason).startswith("recording exhausted: it holds 5 iteration(s)")
    reader.close()


async def test_replay_memory_stays_flat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording of many large outputs replays without holding them all in memory:
    past the records its scan keeps (a fixed budget of bytes), iterations are read from
    disk as they are replayed."""
    monkeypatch.setattr(reader_module, "KEEP_PARSED", 200_000)  # about one line of 100 KB
    big = "x" * 100_000
    outputs = [f'{big}<event topic="work.next">{i}</event>' for i in range(40)]
    outputs.append('<event topic="LOOP_COMPLETE">done</event>')
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    toml = f"""
[loop]
prompt = "work"
max_iterations = 100
durable = false
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.worker]
triggers = ["task.start", "work.next"]
backend = {{ type = "scripted", outputs_file = "{tmp_path / "outputs.json"}" }}
"""
    path, summary, _ = await record_session(tmp_path, toml=toml)
    assert summary.iterations == 41
    size = path.stat().st_size
    assert size > 4_000_000
    tracemalloc.start()
    try:
        result = await replay_recording(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok, result.divergence
    assert peak < size / 4, (peak, size)


# -- the command line ---------------------------------------------------------------------


def test_replay_command_runs_a_folder_with_junit_xml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`loop replay DIR --junit-xml` prints a line per recording, a summary, and exits 4."""
    recording = anyio.run(record_session, tmp_path)[0]
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a_good.jsonl").write_bytes(recording.read_bytes())
    edit(recording, lambda rs: its(rs)[1].update(hat="reviewer"), name="b_bad.jsonl").rename(
        suite / "b_bad.jsonl"
    )
    report = tmp_path / "out" / "junit.xml"
    code = main(["replay", str(suite), "--junit-xml", str(report), "--log-format", "json"])
    out = capsys.readouterr().out
    assert code == 4
    assert f"ok       {suite / 'a_good.jsonl'}: 5 iteration(s), completed" in out
    assert f"DIVERGED {suite / 'b_bad.jsonl'}: at iteration 2" in out
    assert "diverged at iteration 2: a different hat ran" in out
    assert "2 recording(s): 1 passed, 1 diverged, 0 error(s)" in out
    root = ET.parse(report).getroot()
    tests = root.find("testsuite")
    assert tests is not None
    assert (tests.get("tests"), tests.get("failures"), tests.get("errors")) == ("2", "1", "0")
    failure = root.find(".//testcase[@name='%s']/failure" % (suite / "b_bad.jsonl"))
    assert failure is not None
    assert "a different hat ran" in str(failure.get("message"))


def test_replay_command_replays_sub_folders_and_counts_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`loop replay DIR` replays the recordings in DIR's sub-folders too, as pytest runs
    them (a diverging one there fails the run: it passed, unseen); the summary counts the
    .jsonl files of a folder without a recording, which it skips."""
    good = REPO / "recordings" / "default.jsonl"
    suite = tmp_path / "suite"
    (suite / "feature-x").mkdir(parents=True)
    (suite / "data").mkdir()
    (suite / "top.jsonl").write_bytes(good.read_bytes())
    tampered = good.read_bytes().replace(b'"approved: 4 tests pass"', b'"approved"')
    (suite / "feature-x" / "tampered.jsonl").write_bytes(tampered)
    (suite / "data" / "clips.jsonl").write_text('{"file": "a.wav"}\n', encoding="utf-8")
    code = main(["replay", str(suite), "-q", "--log-format", "json"])
    out = capsys.readouterr().out
    assert code == 4
    assert f"DIVERGED {suite / 'feature-x' / 'tampered.jsonl'}: at iteration 5" in out
    assert "2 recording(s): 1 passed, 1 diverged, 0 error(s)" in out
    assert (
        f"skipped 1 *.jsonl file(s) in folders that hold no recording: "
        f"{suite / 'data' / 'clips.jsonl'}\n"
    ) in out


def test_a_junit_file_that_cannot_be_written_is_refused_before_any_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--junit naming a folder, a symbolic link or a file below a file: one line, exit 2,
    before any recording is replayed (it was a traceback after every replay)."""
    (tmp_path / "jd").mkdir()
    (tmp_path / "link.xml").symlink_to(tmp_path / "elsewhere.xml")
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    recording = str(REPO / "recordings" / "default.jsonl")
    for junit, message in (
        ("jd", "jd: is a folder; --junit needs a file name"),
        ("link.xml", "link.xml: is a symbolic link; --junit needs a plain file"),
        ("a-file/r.xml", f"a-file/r.xml: cannot write it: {tmp_path / 'a-file'} is not a folder"),
    ):
        code = main(["replay", recording, "--junit", str(tmp_path / junit)])
        out, err = capsys.readouterr()
        assert code == 2
        assert out == ""  # nothing replayed
        assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "jd").iterdir()) == []


def test_replay_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 0 when all match, 2 on bad input (an empty folder, a missing file)."""
    assert main(["replay", str(REPO / "recordings"), "--log-format", "json"]) == 0
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "x.jsonl"), "--log-format", "json"]) == 2
    out = capsys.readouterr().out
    assert "ERROR    " in out and "1 recording(s): 0 passed, 0 diverged, 1 error(s)" in out


def test_an_empty_folder_is_bad_usage_before_any_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder with no *.jsonl is one line, exit 2, before anything is replayed and with
    no JUnit file; it was counted as a recording, with an error row and a JUnit case."""
    empty = tmp_path / "empty"
    empty.mkdir()
    junit = tmp_path / "replay.xml"
    recording = str(REPO / "recordings" / "default.jsonl")
    code = main(["replay", recording, str(empty), "--junit", str(junit), "--log-format", "json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err == f"error: no recordings in {empty} (no *.jsonl file in that folder or below it)\n"
    assert not junit.exists()


def test_a_run_whose_agent_program_is_missing_replays_as_a_prefix(tmp_path: Path) -> None:
    """``backend_unavailable``: the iteration whose program was missing never ran, so the
    recording holds what came before it; that much replays, and the replay is not held to
    an iteration it cannot have."""
    emit = "print('<event topic=\"next\">go</event>')"
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[themes]\nenabled = false\n'
        '[hats.a]\ntriggers = ["task.start"]\npublishes = ["next"]\n'
        f'backend = {{ type = "command", command = [{json.dumps(sys.executable)}, "-c", '
        f"{json.dumps(emit)}] }}\n"
        '[hats.b]\ntriggers = ["next"]\npublishes = ["LOOP_COMPLETE"]\n'
        'backend = { type = "command", command = ["hatloop-no-such-program"] }\n'
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "loop",
            "run",
            "-q",
            "--no-preflight",
            "--record-session",
            "r.jsonl",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1 and "backend_unavailable after 1 iteration" in run.stdout
    result = replay_file(tmp_path / "r.jsonl")
    assert result.ok, result.divergence and result.divergence.render()
    assert result.partial == "the recorded run ended by backend_unavailable"
    assert result.actual_iterations == 1
