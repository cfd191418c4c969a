"""The session recorder: format, refusal, append on resume, redaction, size cap, failures."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop import _json
from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.backends.scripted import ScriptedBackend
from loop.bus import EventBus
from loop.config import load_config
from loop.emit import append_event
from loop.engine.decide import Outcome
from loop.engine.journal import read_journal
from loop.engine.progress import RunSummary
from loop.engine.records import iteration_end
from loop.errors import InputError, RecordingError, SessionError
from loop.events import Event
from loop.extensions import Extension
from loop.records import IterationEnd, encode_record, parse_record
from loop.replay import replay_recording
from loop.runner import RunOptions, build_backends, run_loop
from loop.session import recorder as recorder_mod
from loop.session.recorder import MIN_MAX_BYTES, Recorder, RecorderClosed, Redactor
from loop.session.recording import (
    SCHEMA_VERSION,
    FooterRecord,
    HeaderRecord,
    IterationRecord,
    MarkerRecord,
    iso_time,
    iteration_data,
    parse_iteration,
    parse_line,
    recording_json_schema,
)

# planner → builder → reviewer (rejects once) → builder → reviewer (completes): 5 iterations.
LOOP_TOML = """
[loop]
prompt = "Reverse the words of a sentence."
max_iterations = 20
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.planner]
description = "Plans"
triggers = ["task.start"]
publishes = ["plan.ready"]
[hats.planner.backend]
type = "scripted"
outputs = ['Plan.<event topic="plan.ready">1. split 2. reverse</event>']

[hats.builder]
description = "Builds"
triggers = ["plan.ready", "review.rejected"]
publishes = ["build.done"]
max_activations = 5
backend = { type = "scripted", outputs = [
  '<event topic="build.done">first build</event>',
  '<event topic="build.done" target="reviewer">{"tests": 4}</event>',
] }

[hats.reviewer]
description = "Reviews"
triggers = ["build.done"]
publishes = ["review.rejected", "LOOP_COMPLETE"]
backend = { type = "scripted", outputs = [
  '<event topic="review.rejected">missing test</event>',
  '<event topic="LOOP_COMPLETE">approved</event>',
] }
"""


class Yielding(Backend):
    """A backend wrapper with a checkpoint, so a cancelled run stops between iterations."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.uses_files = inner.uses_files

    async def run(self, request: BackendRequest) -> BackendResult:
        """Yield to the event loop, then run the wrapped backend."""
        await anyio.lowlevel.checkpoint()
        return await self.inner.run(request)


async def record_session(
    tmp_path: Path,
    *,
    toml: str = LOOP_TOML,
    name: str = "rec.jsonl",
    extra: list[Extension] | None = None,
    session_id: str | None = None,
    resume: bool = False,
    **kwargs: Any,
) -> tuple[Path, RunSummary, Recorder]:
    """Run the real loop in ``tmp_path`` with a recorder; return (file, summary, recorder)."""
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    path = tmp_path / name
    rec = Recorder(path, **kwargs)
    backends: dict[str, Backend] = {n: Yielding(b) for n, b in build_backends(config).items()}
    options = RunOptions(
        workdir=tmp_path,
        progress=False,
        handle_signals=False,
        session_id=session_id,
        resume=resume,
        backends=backends,
    )
    summary = await run_loop(config, options, [rec, *(extra or [])])
    return path, summary, rec


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a recording, decoded."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class StopAfter(Extension):
    """Cancels the run (like SIGINT) once ``n`` iterations are done."""

    def __init__(self, n: int, scope: anyio.CancelScope) -> None:
        self.n = n
        self.scope = scope

    def attach(self, bus: EventBus) -> None:
        """Watch the iterations."""
        bus.subscribe("loop.iteration.done", self._done)

    def _done(self, event: Event) -> None:
        if isinstance(event.payload, IterationEnd) and event.payload.iteration >= self.n:
            self.scope.cancel()


async def test_records_header_iterations_and_footer(tmp_path: Path) -> None:
    """A run is recorded as a header, one record per iteration and a footer, all valid."""
    path, summary, rec = await record_session(tmp_path)
    data = lines(path)
    kinds = [d["kind"] for d in data]
    assert kinds == ["header"] + ["iteration"] * 5 + ["footer"]
    records = [parse_line(line) for line in path.read_bytes().splitlines()]
    schema = recording_json_schema()
    for d in data:
        jsonschema.validate(d, schema)
    header = records[0]
    assert isinstance(header, HeaderRecord)
    assert header.schema_version == SCHEMA_VERSION
    assert header.session_id == summary.session_id
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    assert header.config_digest == config.digest()
    assert header.hats["builder"].triggers == ("plan.ready", "review.rejected")
    assert header.hats["reviewer"].backend == "scripted"
    assert header.python_version.count(".") == 2
    its = [r for r in records if isinstance(r, IterationRecord)]
    assert [r.hat for r in its] == ["planner", "builder", "reviewer", "builder", "reviewer"]
    assert [r.iteration for r in its] == [1, 2, 3, 4, 5]
    second_build = its[3]
    assert second_build.events[0].topic == "build.done"
    assert second_build.events[0].payload == {"tests": 4}
    assert second_build.events[0].target == "reviewer"
    assert "Builds" in second_build.prompt
    assert second_build.output.startswith("<event")
    assert second_build.timestamp.endswith("Z")
    assert second_build.backend == "scripted"
    assert second_build.status == "ok"
    footer = records[-1]
    assert isinstance(footer, FooterRecord)
    assert 0 <= second_build.duration <= footer.elapsed
    assert (footer.reason, footer.iterations, footer.exit_code) == ("completed", 5, 0)
    assert footer.records == 6
    assert footer.write_failures == 0
    assert not footer.cap_reached
    assert rec.records == 7
    assert rec.bytes == path.stat().st_size
    assert "7 records" in rec.describe()
    assert "0 write failure(s)" in rec.describe()


def test_refuses_an_existing_file_unless_forced(tmp_path: Path) -> None:
    """An existing file is refused at construction (nothing runs); --force overwrites."""
    path = tmp_path / "rec.jsonl"
    path.write_text("keep me\n")
    with pytest.raises(InputError, match="already exists; pass --force"):
        Recorder(path)
    assert path.read_text() == "keep me\n"
    Recorder(path, force=True)  # accepted; the file is replaced only when the run starts


async def test_an_empty_file_is_taken_without_force(tmp_path: Path) -> None:
    """An empty file (a run killed as it began left it) holds nothing to keep: a new
    recording takes it without --force, and replaces nothing."""
    (tmp_path / "rec.jsonl").write_bytes(b"")
    path, summary, _ = await record_session(tmp_path)
    assert summary.iterations > 0
    assert lines(path)[0]["kind"] == "header" and lines(path)[-1]["kind"] == "footer"


def test_refuses_a_folder_and_a_tiny_cap(tmp_path: Path) -> None:
    """A folder as the target, or a cap below the minimum, is bad input."""
    with pytest.raises(InputError, match="is a folder"):
        Recorder(tmp_path)
    with pytest.raises(InputError, match="at least"):
        Recorder(tmp_path / "r.jsonl", max_bytes=MIN_MAX_BYTES - 1)


async def test_force_overwrites_the_old_recording(tmp_path: Path) -> None:
    """With force, the old content is replaced by the new recording."""
    (tmp_path / "rec.jsonl").write_text("old content that is not JSON\n")
    path, _, _ = await record_session(tmp_path, force=True)
    assert lines(path)[0]["kind"] == "header"


async def test_recorder_is_one_shot(tmp_path: Path) -> None:
    """Attaching twice, or after close, raises a clear error."""
    async with Recorder(tmp_path / "r.jsonl") as rec:
        rec.attach(EventBus())
        with pytest.raises(RecorderClosed, match="already attached"):
            rec.attach(EventBus())
    with pytest.raises(RecorderClosed, match="closed"):
        rec.attach(EventBus())
    with pytest.raises(RecorderClosed, match="closed"):
        async with rec:
            pass


async def test_resumed_session_appends_after_a_marker(tmp_path: Path) -> None:
    """A killed session resumed with the same file appends (torn tail cut) and replays whole."""
    with anyio.CancelScope() as scope:
        await record_session(tmp_path, session_id="s1", extra=[StopAfter(2, scope)])
    path = tmp_path / "rec.jsonl"
    first = lines(path)
    assert first[-1]["kind"] == "footer"
    assert first[-1]["reason"] == "interrupted"
    with path.open("ab") as fh:
        fh.write(b'{"kind":"iteration","iter')  # a crash mid-write
    _, summary, _ = await record_session(tmp_path, session_id="s1", resume=True, append=True)
    assert summary.reason == "completed"
    data = lines(path)  # every line parses: the torn tail was cut before appending
    assert [d["kind"] for d in data].count("header") == 1
    markers = [d for d in data if d["kind"] == "marker"]
    assert [m["marker"] for m in markers] == ["resumed"]
    assert markers[0]["resumed_at_iteration"] == 2
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 2, 3, 4, 5]
    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert result.actual_iterations == 5


async def test_resume_backfills_iterations_committed_but_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the journal commit but before the recording write: the resumed recorder
    takes the missing iteration from the journal, so the recording holds each one once."""
    monkeypatch.chdir(tmp_path)  # state paths resolve against the working folder, as in the CLI
    with anyio.CancelScope() as scope:
        await record_session(tmp_path, session_id="s1", extra=[StopAfter(3, scope)])
    path = tmp_path / "rec.jsonl"
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if json.loads(line).get("iteration") != 3 and json.loads(line)["kind"] != "footer"
    ]
    path.write_text("".join(kept), encoding="utf-8")  # iteration 3 committed, never recorded
    await record_session(tmp_path, session_id="s1", resume=True, append=True)
    data = lines(path)
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 2, 3, 4, 5]
    # the backfilled iteration, then the footer the file lost too (the journal has the
    # end), then the resume's marker
    assert [d["kind"] for d in data][:6] == ["header", *["iteration"] * 3, "footer", "marker"]
    assert data[4]["reason"] == "interrupted"
    result = await replay_recording(path)
    assert result.ok, result.divergence


async def test_appending_to_another_session_is_refused(tmp_path: Path) -> None:
    """Resuming into a recording of another session writes nothing; each record is counted."""
    with anyio.CancelScope() as scope:
        await record_session(tmp_path, session_id="s1", extra=[StopAfter(1, scope)])
    with anyio.CancelScope() as scope:
        await record_session(
            tmp_path, session_id="s2", name="other.jsonl", extra=[StopAfter(1, scope)]
        )
    path = tmp_path / "rec.jsonl"
    before = path.read_bytes()
    (tmp_path / "other.jsonl").unlink()
    rec = Recorder(path, append=True)
    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    await run_loop(
        config,
        RunOptions(
            workdir=tmp_path, progress=False, handle_signals=False, session_id="s2", resume=True
        ),
        [rec],
    )
    assert path.read_bytes() == before
    assert rec.write_failures == 6  # the resume marker, four iterations and the footer


def test_resuming_into_another_sessions_recording_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --resume s1 --record-session F` where F records session s2 (or is not a
    recording) stops with exit 2 and one line naming the file and both sessions; nothing
    is written: neither the file nor the resumed session's journal."""
    from loop.cli import main

    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    quiet = ["-q", "--log-format", "json", "--max-iterations", "2"]
    for sid, name in (("s1", "mine.jsonl"), ("s2", "other.jsonl")):
        assert main(["run", *quiet, "--session-id", sid, "--record-session", name]) == 3
    capsys.readouterr()
    journal = tmp_path / ".loop/sessions/s1/journal.jsonl"
    (tmp_path / "notes.jsonl").write_text('{"note": "mine"}\n', encoding="utf-8")
    files = ("other.jsonl", "notes.jsonl", "mine.jsonl")
    before = {p: p.read_bytes() for p in [journal, *map(tmp_path.joinpath, files)]}
    resume = ["run", "-q", "--log-format", "json", "--resume"]
    assert main([*resume, "s1", "--record-session", "other.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: other.jsonl: holds the recording of session s2, not of session s1 (the one "
        "resumed); choose another file for --record-session\n"
    )
    assert main([*resume, "--record-session", "notes.jsonl"]) == 2  # the latest: s2
    assert "notes.jsonl: is not a recording" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before
    mine = ["--record-session", "mine.jsonl", "--max-iterations", "9"]  # 2 held: raised
    assert main([*resume, "s1", *mine]) == 0  # its own: appended
    assert [d["kind"] for d in lines(tmp_path / "mine.jsonl")].count("header") == 1
    assert lines(tmp_path / "mine.jsonl")[-1]["reason"] == "completed"


async def test_secrets_are_redacted_and_the_replay_still_matches(tmp_path: Path) -> None:
    """Secret-looking env values vanish from prompts, outputs and events; replay agrees."""
    toml = LOOP_TOML.replace("first build", "first build with sk-live-12345").replace(
        "Reverse the words", "Reverse the words (token hunter2-long)"
    )
    env = {
        "MY_API_KEY": "sk-live-12345",
        "db_password": "hunter2-long",
        "GH_TOKEN": "abc",
        "PLAIN": "Reverse",
    }
    path, _, _ = await record_session(tmp_path, toml=toml, environ=env)
    text = path.read_text(encoding="utf-8")
    assert "sk-live-12345" not in text
    assert "hunter2-long" not in text
    assert "[redacted:MY_API_KEY]" in text
    assert "[redacted:db_password]" in text
    assert "Reverse the words" in text  # PLAIN is not a secret-looking name
    build = next(d for d in lines(path) if d["kind"] == "iteration" and d["hat"] == "builder")
    assert build["events"][0]["payload"] == "first build with [redacted:MY_API_KEY]"
    assert lines(path)[0]["redacted"] is True
    result = await replay_recording(path)
    assert result.ok, result.divergence


async def test_no_redact_keeps_values(tmp_path: Path) -> None:
    """With redaction off, values are recorded as they were."""
    toml = LOOP_TOML.replace("first build", "first build with sk-live-12345")
    path, _, _ = await record_session(
        tmp_path, toml=toml, redact=False, environ={"MY_API_KEY": "sk-live-12345"}
    )
    assert "sk-live-12345" in path.read_text(encoding="utf-8")
    assert lines(path)[0]["redacted"] is False


async def test_size_cap_is_never_exceeded_and_the_loop_goes_on(tmp_path: Path) -> None:
    """For caps from tiny to ample: the file stays within the cap, a marker says so, the
    footer is written, and the loop still completes every iteration."""
    (tmp_path / "full").mkdir()
    full, _, _ = await record_session(tmp_path / "full")
    full_size = full.stat().st_size
    footer_size = len(full.read_bytes().splitlines(keepends=True)[-1])
    # Uncapped only if the last iteration still leaves room for the marker and the footer.
    threshold = full_size - footer_size + recorder_mod.MARKER_RESERVE + recorder_mod.FOOTER_RESERVE
    caps = list(range(MIN_MAX_BYTES, full_size + 1200, 700))
    for cap in caps:
        folder = tmp_path / f"cap{cap}"
        folder.mkdir()
        path, summary, rec = await record_session(folder, max_bytes=cap)
        assert_within_cap(path, cap)
        assert summary.reason == "completed"
        assert summary.iterations == 5
        data = lines(path)
        assert data[-1]["kind"] == "footer"
        capped = any(d.get("marker") == "cap_reached" for d in data)
        assert capped == rec.cap_reached == data[-1]["cap_reached"]
        assert capped == (cap < threshold), (cap, threshold)
        if capped:
            assert "cap reached" in rec.describe()
            assert [d["kind"] for d in data][-2:] == ["marker", "footer"]


def assert_within_cap(path: Path, cap: int) -> None:
    """The recording at ``path`` holds at most ``cap`` bytes; or its header alone left no
    room under the cap for the cap marker and the footer, and it holds those three."""
    raw = path.read_bytes().splitlines(keepends=True)
    reserve = recorder_mod.MARKER_RESERVE + recorder_mod.FOOTER_RESERVE
    if len(raw[0]) + reserve <= cap:
        assert path.stat().st_size <= cap, (cap, path.stat().st_size)
    else:
        assert [d["kind"] for d in lines(path)] == ["header", "marker", "footer"], cap


async def test_the_smallest_cap_still_records_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cap the header alone passes: the header is written all the same (it is what makes
    the file a recording), the cap is reached at once, and the file replays as a prefix of
    no iteration and is shown by `show`."""
    from loop.cli import main

    path, summary, rec = await record_session(tmp_path, max_bytes=MIN_MAX_BYTES)
    assert summary.iterations == 5
    data = lines(path)
    assert [d["kind"] for d in data] == ["header", "marker", "footer"]
    assert len(path.read_bytes().splitlines()[0]) > MIN_MAX_BYTES
    assert data[1]["marker"] == "cap_reached"
    assert "the header" in data[1]["message"]
    assert (data[2]["cap_reached"], data[2]["records"]) == (True, 2)
    assert rec.cap_reached
    assert rec.bytes == path.stat().st_size
    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert result.actual_iterations == 0
    assert result.partial is not None and "size cap" in result.partial
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cap_reached: recording stopped: the header" in out
    assert "3 records" in out


async def test_a_capped_recording_replays_its_prefix(tmp_path: Path) -> None:
    """A recording stopped by the cap replays the iterations it holds."""
    full, _, _ = await record_session(tmp_path)
    sizes = [len(line) for line in full.read_bytes().splitlines(keepends=True)]
    reserve = recorder_mod.MARKER_RESERVE + recorder_mod.FOOTER_RESERVE
    # header and two iterations, plus the reserve, plus half the third iteration as slack:
    # timings make the second run's lines a few bytes longer or shorter than the first's
    cap = sum(sizes[:3]) + reserve + sizes[3] // 2
    folder = tmp_path / "capped"
    folder.mkdir()
    path, _, _ = await record_session(folder, max_bytes=cap)
    assert [d["kind"] for d in lines(path)] == [
        "header",
        "iteration",
        "iteration",
        "marker",
        "footer",
    ]
    result = await replay_recording(path)
    assert result.ok, result.divergence
    assert result.partial is not None
    assert "size cap" in result.partial
    assert result.actual_iterations == 2


def fail_one_write(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """Make the recorder's ``nth`` write put half its bytes on disk, then fail (disk full)."""
    real = recorder_mod._write_all
    calls = {"n": 0}

    def flaky(fd: int, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            real(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(recorder_mod, "_write_all", flaky)


async def test_write_failure_mid_run_is_counted_and_the_loop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OSError on one write is counted, a marker tells what was lost, the file stays JSONL."""
    fail_one_write(monkeypatch, 3)  # the second iteration: half a line, then a full disk
    path, summary, rec = await record_session(tmp_path)
    assert summary.reason == "completed"
    assert rec.write_failures == 1
    assert "1 write failure(s)" in rec.describe()
    data = lines(path)  # the half line was cut off: every line parses
    lost = [d for d in data if d.get("marker") == "write_failed"]
    assert len(lost) == 1
    assert lost[0]["lost_records"] == 1
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 3, 4, 5]
    assert data[-1]["write_failures"] == 1
    assert rec.bytes == path.stat().st_size


async def test_a_full_disk_never_stops_the_loop(tmp_path: Path) -> None:
    """Writing to /dev/full (ENOSPC on every write) fails each record; the loop completes."""
    if not await anyio.Path("/dev/full").exists():
        pytest.skip("/dev/full is not available on this system")
    rec = Recorder(Path("/dev/full"), force=True)
    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    summary = await run_loop(
        config, RunOptions(workdir=tmp_path, progress=False, handle_signals=False), [rec]
    )
    assert summary.reason == "completed"
    assert rec.write_failures == 7  # header, five iterations, footer
    assert rec.records == 0


def test_an_unopenable_target_is_refused_at_construction(tmp_path: Path) -> None:
    """A target that cannot be opened (its parent is a file, a link) stops the run before
    it starts; the check leaves nothing behind."""
    (tmp_path / "not-a-dir").write_text("")
    with pytest.raises(InputError, match="cannot write the recording"):
        Recorder(tmp_path / "not-a-dir/rec.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "target.jsonl")
    with pytest.raises(InputError, match="symbolic link"):
        Recorder(tmp_path / "link.jsonl")
    Recorder(tmp_path / "new.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "not-a-dir"]


async def test_an_unopenable_file_is_counted_and_the_loop_goes_on(tmp_path: Path) -> None:
    """A target that became unopenable after the check (its parent is now a file) is
    reported, never fatal."""
    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    path = tmp_path / "not-a-dir/rec.jsonl"
    rec = Recorder(path)  # checked while the folder can be made (the check leaves none)
    assert not (tmp_path / "not-a-dir").exists()
    (tmp_path / "not-a-dir").write_text("")
    options = RunOptions(workdir=tmp_path, progress=False, handle_signals=False)
    summary = await run_loop(config, options, [rec])
    assert summary.reason == "completed"
    assert not path.exists()
    assert rec.write_failures >= 1
    assert "write failure" in rec.describe()


def test_markers_and_records_are_small_enough_for_the_reserve() -> None:
    """The cap marker (either reason) and the footer fit the room the recorder keeps."""
    for what in (
        "the next record (123456789012 bytes) would pass the cap",
        "the header (123456789012 bytes) leaves no room under the cap",
    ):
        marker = MarkerRecord(
            marker="cap_reached", max_bytes=10**12, ts=1e10, message=f"recording stopped: {what}"
        )
        assert len(recorder_mod._line(marker, None)) <= recorder_mod.MARKER_RESERVE
    footer = FooterRecord(
        reason="x" * 64,
        iterations=10**9,
        elapsed=1e9,
        exit_code=130,
        records=10**9,
        write_failures=10**9,
        cap_reached=True,
        ts=1e10,
    )
    assert len(recorder_mod._line(footer, None)) <= recorder_mod.FOOTER_RESERVE


def test_run_command_records_and_refuses_to_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`loop run --record-session` records; a second run on the same file exits 2."""
    from loop.cli import main

    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-q", "--record-session", "out.jsonl", "--log-format", "json"]) == 0
    out = capsys.readouterr().out
    assert "recording out.jsonl: 7 records" in out
    before = (tmp_path / "out.jsonl").read_bytes()
    assert main(["run", "-q", "--record-session", "out.jsonl", "--log-format", "json"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "out.jsonl").read_bytes() == before
    assert (
        main(
            [
                "run",
                "-q",
                "--record-session",
                "out.jsonl",
                "--force",
                "--record-max-bytes",
                "2048",
                "--log-format",
                "json",
            ]
        )
        == 0
    )
    assert_within_cap(tmp_path / "out.jsonl", 2048)


def test_of_two_runs_that_found_no_file_one_records_and_the_other_is_refused(
    tmp_path: Path,
) -> None:
    """Two runs both checked the file before either created it: the claim (an exclusive
    create, then a lock) lets one have it and refuses the other before its run starts,
    with or without --force, and a refused --force leaves the file as it was. A claim
    whose session never started takes its file away when closed."""
    path = tmp_path / "same.jsonl"
    first, second, forced = Recorder(path), Recorder(path), Recorder(path, force=True)
    first.claim()
    with path.open("ab") as fh:  # what the first run wrote so far
        fh.write(b'{"kind":"header"}\n')
    for late in (second, forced):
        with pytest.raises(InputError) as refused:
            late.claim()
        assert refused.value.message == (
            f"{path}: another run writes this recording; wait for it to end or choose another file"
        )
    with pytest.raises(InputError, match="another run writes this recording"):
        Recorder(path, force=True)  # one that comes later: refused by the check already
    assert path.read_bytes() == b'{"kind":"header"}\n'
    first.close()
    assert not path.exists()  # no session started: no file left to refuse the next run
    second.close()  # refused: nothing held, nothing removed
    third = Recorder(path, force=True)
    third.claim()
    third.close()


RACING_TOML = """
[loop]
prompt = "x"
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.slow]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "command", command = ["{python}", "{script}"] }}
"""
# the hat says it started, then waits for the test's go before it completes (never for
# more than 2 minutes: a test that failed before its go leaves no process behind)
RACING_AGENT = """\
import pathlib, sys, time
here = pathlib.Path(sys.argv[0]).parent
(here / "started").write_text("1")
deadline = time.monotonic() + 120
while not (here / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print('<event topic="LOOP_COMPLETE">done</event>')
"""


def test_a_second_run_on_a_recording_being_written_is_refused_before_it_starts(
    tmp_path: Path,
) -> None:
    """`run --record-session ../same.jsonl` from two folders at once, the second with or
    without --force: the second exits 2 before its run starts, naming the file and the
    other run, and the first records its session whole (one header, one footer)."""
    (tmp_path / "agent.py").write_text(RACING_AGENT, encoding="utf-8")
    toml = RACING_TOML.format(python=sys.executable, script=tmp_path / "agent.py")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "loop.toml").write_text(toml, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    command = [sys.executable, "-m", "loop", "run", "-q", "--record-session", "../same.jsonl"]
    first = subprocess.Popen(
        command,
        cwd=tmp_path / "a",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.02)
        for flags in ([], ["--force"]):
            second = subprocess.run(
                [*command, *flags],
                cwd=tmp_path / "b",
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert (second.returncode, second.stderr) == (
                2,
                "error: ../same.jsonl: another run writes this recording; wait for it to end "
                "or choose another file\n",
            )
        assert not (tmp_path / "b/.loop/sessions").exists() or not any(
            (tmp_path / "b/.loop/sessions").iterdir()
        )
        (tmp_path / "go").write_text("1")
        _, err = first.communicate(timeout=120)
    finally:
        (tmp_path / "go").write_text("1")  # the agent (in a group of its own) ends too
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    kinds = [d["kind"] for d in lines(tmp_path / "same.jsonl")]
    assert kinds == ["header", "iteration", "footer"], kinds


async def test_secrets_set_in_a_backend_env_table_are_redacted_too(tmp_path: Path) -> None:
    """A key written in a hat's backend env (not the process environment) is not recorded."""
    from loop.session.recorder import Recorder
    from loop.testing import make_config, run_hats, scripted, tag

    cfg = make_config(
        {
            "a": {
                "triggers": ["task.start"],
                "backend": {
                    "type": "command",
                    "command": ["true"],
                    "env": {"MY_API_KEY": "sk-live-123456"},
                },
            }
        },
        folder=tmp_path,
    )
    rec = Recorder(tmp_path / "rec.jsonl", environ={})
    await run_hats(
        cfg,
        {"a": scripted(tag("LOOP_COMPLETE", "used sk-live-123456"))},
        workdir=tmp_path,
        extra=[rec],
    )
    text = (tmp_path / "rec.jsonl").read_text()
    assert "sk-live-123456" not in text
    assert "[redacted:MY_API_KEY]" in text


class RichBackend(Backend):
    """Fails once, then emits through the file (a null payload) and completes, with costs."""

    kind = "rich"

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, request: BackendRequest) -> BackendResult:
        """First call: a failure with an exit code. Second: both channels and usage."""
        self.calls += 1
        if self.calls == 1:
            return BackendResult.failed("tool crashed", exit_code=3)
        request.events_file.parent.mkdir(parents=True, exist_ok=True)
        append_event(request.events_file, "side.note", None)
        return BackendResult(
            output='Done. <event topic="LOOP_COMPLETE">{"a": [1, 2.5, null], "é": true}</event>',
            cost_usd=0.25,
            input_tokens=10,
            output_tokens=5,
            turns=2,
            meta={"model": "m-1", "ids": [1, 2]},
        )


async def test_every_kind_of_iteration_line_matches_the_schema(tmp_path: Path) -> None:
    """Lines written from the engine's records (no model in between) validate and replay."""
    toml = """
[loop]
prompt = "p"
max_iterations = 5
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.worker]
triggers = ["task.start"]
publishes = ["side.note", "LOOP_COMPLETE"]
"""
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    path = tmp_path / "rich.jsonl"
    options = RunOptions(
        workdir=tmp_path, progress=False, handle_signals=False, backends={"worker": RichBackend()}
    )
    summary = await run_loop(config, options, [Recorder(path)])
    assert (summary.reason, summary.iterations) == ("completed", 2)
    data = lines(path)
    schema = recording_json_schema()
    for d in data:
        jsonschema.validate(d, schema)
    for line in path.read_bytes().splitlines():
        parse_line(line)
    failed, done = (
        parse_iteration(line)
        for line in path.read_bytes().splitlines()
        if json.loads(line)["kind"] == "iteration"
    )
    assert (failed.status, failed.backend_ok, failed.reason, failed.exit_code) == (
        "failed",
        False,
        "tool crashed",
        3,
    )
    assert failed.consumed == () and failed.events == ()
    assert done.backend_ok and done.status == "ok" and done.completed
    assert [(e.topic, e.payload) for e in done.emitted] == [("side.note", None)]  # null kept
    assert done.events[-1].payload == {"a": [1, 2.5, None], "é": True}
    assert (done.cost_usd, done.input_tokens, done.output_tokens, done.turns) == (0.25, 10, 5, 2)
    assert done.meta == {"model": "m-1", "ids": [1, 2]}
    assert done.timestamp.endswith("Z") and done.ts > 0
    result = await replay_recording(path)
    assert result.ok, result.divergence


PING_PONG = """
[loop]
prompt = "p"
max_iterations = {n}
stale_threshold = 100000
durable = false  # instant iterations: no sync to wait for between them
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false
[hats.ping]
triggers = ["task.start", "pong.x"]
publishes = ["ping.x"]
[hats.pong]
triggers = ["ping.x"]
publishes = ["pong.x"]
"""


def _ping_pong_backends(n: int) -> dict[str, Backend]:
    return {
        "ping": ScriptedBackend([f'<event topic="ping.x">{k}</event>' for k in range(n)]),
        "pong": ScriptedBackend([f'<event topic="pong.x">{k}</event>' for k in range(n)]),
    }


async def _record_ping_pong(
    tmp_path: Path,
    n: int,
    backends: dict[str, Backend],
    rec: Recorder,
    extra: list[Extension] | None = None,
) -> RunSummary:
    (tmp_path / "loop.toml").write_text(PING_PONG.format(n=n), encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    options = RunOptions(workdir=tmp_path, progress=False, handle_signals=False, backends=backends)
    return await run_loop(config, options, [rec, *(extra or [])])


async def test_instant_hats_are_recorded_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines of instant iterations share writes; every line is on disk at the end."""
    real = recorder_mod._write_all
    writes: list[int] = []

    def counting(fd: int, data: bytes) -> None:
        writes.append(data.count(b"\n"))
        real(fd, data)

    monkeypatch.setattr(recorder_mod, "_write_all", counting)
    path = tmp_path / "batch.jsonl"
    rec = Recorder(path)
    summary = await _record_ping_pong(tmp_path, 400, _ping_pong_backends(400), rec)
    assert summary.iterations == 400
    data = lines(path)
    assert [d["kind"] for d in data] == ["header"] + ["iteration"] * 400 + ["footer"]
    assert sum(writes) == len(data) == rec.records
    assert len(writes) < 100, writes  # far fewer writes than lines
    assert rec.bytes == path.stat().st_size
    result = await replay_recording(path)
    assert result.ok, result.divergence


class Peeking(Backend):
    """A backend that waits (not instant) and reads the recording before it answers."""

    kind = "peeking"

    def __init__(self, inner: Backend, path: Path, seen: list[int]) -> None:
        self.inner = inner
        self.path = path
        self.seen = seen

    async def run(self, request: BackendRequest) -> BackendResult:
        """Note how many iteration lines are on disk, then answer like the inner backend."""
        await anyio.lowlevel.checkpoint()
        text = await anyio.Path(self.path).read_text(encoding="utf-8")
        self.seen.append(text.count('"kind":"iteration"'))
        return await self.inner.run(request)


async def test_a_hat_that_waits_finds_every_earlier_line_on_disk(tmp_path: Path) -> None:
    """Before a hat that is not instant runs, the lines so far are written out."""
    path = tmp_path / "peek.jsonl"
    seen: list[int] = []
    backends: dict[str, Backend] = {
        name: Peeking(b, path, seen) for name, b in _ping_pong_backends(6).items()
    }
    await _record_ping_pong(tmp_path, 6, backends, Recorder(path))
    assert seen == [0, 1, 2, 3, 4, 5]


async def test_a_failed_batch_counts_each_record_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that cannot be written loses its records, counted; the file stays JSONL."""
    fail_one_write(monkeypatch, 1)  # the first batch (the header, the first iterations)
    monkeypatch.setattr(recorder_mod, "BATCH_BYTES", 4000)  # a few lines per batch
    path = tmp_path / "fail.jsonl"
    rec = Recorder(path)
    summary = await _record_ping_pong(tmp_path, 60, _ping_pong_backends(60), rec)
    assert summary.iterations == 60
    data = lines(path)  # every line parses: the partial batch was cut off
    lost = [d for d in data if d.get("marker") == "write_failed"]
    assert len(lost) == 1
    first = data[0]
    assert first["kind"] == "marker"  # the header went with the failed batch
    recorded = [d["iteration"] for d in data if d["kind"] == "iteration"]
    assert recorded == list(range(60 - len(recorded) + 1, 61))
    assert lost[0]["lost_records"] == 61 - len(recorded)  # the header and the missing ones
    assert data[-1]["write_failures"] == rec.write_failures == lost[0]["lost_records"]


async def test_batched_lines_respect_the_cap_exactly(tmp_path: Path) -> None:
    """Instant hats (batched lines): for any cap the file stays within it, whole lines, a
    cap marker and a footer, and the iterations it holds are the first ones, in order."""
    for cap in (MIN_MAX_BYTES, 5_000, 20_000, 70_000, 150_000):
        folder = tmp_path / f"cap{cap}"
        folder.mkdir()
        path = folder / "capped.jsonl"
        rec = Recorder(path, max_bytes=cap)
        summary = await _record_ping_pong(folder, 300, _ping_pong_backends(300), rec)
        assert summary.iterations == 300
        size = path.stat().st_size
        assert_within_cap(path, cap)
        assert rec.bytes == size
        data = lines(path)  # every line parses
        assert data[0]["kind"] == "header"  # always, even when it leaves no room (1 KB)
        assert data[-1]["kind"] == "footer" and data[-1]["cap_reached"]
        assert data[-2].get("marker") == "cap_reached"
        recorded = [d["iteration"] for d in data if d["kind"] == "iteration"]
        assert recorded == list(range(1, len(recorded) + 1))


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
_PAYLOAD = _TEXT | st.dictionaries(_TEXT, st.integers() | _TEXT, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    output=_TEXT,
    payloads=st.lists(_PAYLOAD, max_size=3),
    ok=st.booleans(),
    reason=st.none() | _TEXT | st.just("no events emitted"),
    meta=st.dictionaries(_TEXT, _TEXT, max_size=2),
    ts=st.floats(1e9, 4e9),
)
def test_an_iteration_line_is_its_journal_record_with_a_timestamp(
    *,
    output: str,
    payloads: list[Any],
    ok: bool,
    reason: str | None,
    meta: dict[str, str],
    ts: float,
) -> None:
    """The recording line of a committed iteration reads back as the journal record's
    fields, plus ``kind`` and the readable ``timestamp`` (any texts, payloads, status and
    meta); the journal line reads back as the record itself."""
    events = [Event(topic="a.b", payload=p, source="hat", ts=ts) for p in payloads]
    outcome = Outcome(status="ok" if ok else "failed", publish=events, consume=ok, reason=reason)
    rec = iteration_end(
        iteration=3,
        hat="hat",
        activation=1,
        backend="scripted",
        prompt=f"# prompt\n{output}",
        result=BackendResult(output=output, ok=ok, reason=reason, meta=meta),
        outcome=outcome,
        triggers=(Event(topic="t.x", payload=output, ts=ts),),
        trigger_seqs=(1,),
        events=events,
        emitted=events[:1],
        published=events,
        duration=0.001,
        elapsed=1.5,
        now=ts,
    )
    assert parse_record(encode_record(rec)) == rec
    line = _json.dumps_record_line(iteration_data(rec))
    recorded = parse_iteration(line)
    assert recorded.kind == "iteration" and recorded.timestamp == iso_time(ts)
    fields = {k: v for k, v in vars(recorded).items() if k not in ("kind", "timestamp")}
    assert fields == {k: v for k, v in vars(rec).items() if k != "kind"}
    assert recorded.backend_ok is ok  # the backend's own verdict, journaled


async def test_an_extension_sees_each_committed_record_and_may_fail(tmp_path: Path) -> None:
    """``committed`` gets each iteration's record as the journal holds it; an extension
    that raises there is logged and the loop goes on."""
    seen: list[IterationEnd] = []

    class Watcher(Extension):
        name = "watcher"

        def committed(self, record: IterationEnd) -> None:
            seen.append(record)

    class Broken(Extension):
        name = "broken"

        def committed(self, record: IterationEnd) -> None:
            raise RuntimeError("boom")

    summary = await _record_ping_pong(
        tmp_path, 6, _ping_pong_backends(6), Recorder(tmp_path / "r.jsonl"), [Broken(), Watcher()]
    )
    assert summary.iterations == 6
    assert [r.iteration for r in seen] == [1, 2, 3, 4, 5, 6]
    journal = read_journal(Path(summary.session_dir) / "journal.jsonl").records
    assert seen == [r for r in journal if isinstance(r, IterationEnd)]


async def test_secrets_that_match_keys_of_the_line_never_break_it(
    tmp_path: Path,
) -> None:
    """A secret equal to keys of the line is redacted in strings only: every line still
    parses, with its keys intact, and replay agrees."""
    env = {"A_TOKEN": "backend_ok", "B_TOKEN": "max_runtime_seconds"}
    path, summary, _ = await record_session(tmp_path, environ=env)
    data = lines(path)  # every line is JSON
    assert data[0]["config"]["loop"]["max_runtime_seconds"] == 3600
    iterations = [d for d in data if d["kind"] == "iteration"]
    assert len(iterations) == summary.iterations
    assert all("prompt" in d and d["backend_ok"] is True for d in iterations)
    assert data[0]["redacted"] is True
    result = await replay_recording(path)
    assert result.ok, result.divergence


def test_short_values_and_numbers_are_settings_not_secrets() -> None:
    """``TOKENIZERS_PARALLELISM=false``, ``MAX_OUTPUT_TOKENS=32000`` or a mock's
    ``API_KEY=test`` leave the text as it is; a value of 8 characters is a secret."""
    redactor = Redactor(
        {
            "TOKENIZERS_PARALLELISM": "false",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "32000000",
            "RATE_KEY": "-1.5",
            "GEMINI_API_KEY": "test",
            "DB_PASSWORD": "hunter22",
        }
    )
    text = "pytest says false: 32000000 tokens at -1.5, hunter22"
    assert (
        redactor.text(text) == "pytest says false: 32000000 tokens at -1.5, [redacted:DB_PASSWORD]"
    )
    assert [name for _, name in redactor.secrets] == ["DB_PASSWORD"]


def test_a_secret_with_characters_json_escapes_is_redacted_in_strings() -> None:
    """A quote or backslash in a secret: it is still found in the encoded line and the
    string holding it is redacted; other values keep their bytes."""
    redactor = Redactor({"K_TOKEN": 'sk-"q\\1-long'})
    line = recorder_mod._line({"kind": "x", "text": 'use sk-"q\\1-long now', "n": 1234}, redactor)
    assert json.loads(line) == {"kind": "x", "text": "use [redacted:K_TOKEN] now", "n": 1234}
    plain = recorder_mod._line({"kind": "x", "text": "nothing here"}, redactor)
    assert plain == b'{"kind":"x","text":"nothing here"}\n'


async def test_a_journal_that_fills_up_still_leaves_a_closed_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's disk fills at the second commit: the run stops with that error (not
    a second one from the end record), and the recording still gets every line it had
    and its footer."""
    journal = tmp_path / ".loop/sessions/full/journal.jsonl"
    real = os.write
    count = {"journal": 0}

    def write(fd: int, data: bytes) -> int:
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(journal.resolve()):
            count["journal"] += 1
            if count["journal"] >= 4:  # session.start, first marker, first commit, then full
                raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(SessionError, match="cannot append to the journal") as info:
        await record_session(tmp_path, session_id="full")
    assert not isinstance(info.value.__context__, SessionError)  # the first error, not a second
    data = lines(tmp_path / "rec.jsonl")
    assert [d["kind"] for d in data] == ["header", "iteration", "footer"]
    assert data[-1]["reason"] == "error"
    monkeypatch.undo()
    # an internal error is not reproduced by a replay: the iterations before it are compared
    result = await replay_recording(tmp_path / "rec.jsonl")
    assert result.ok, result.divergence and result.divergence.render()
    assert result.partial == "the recorded run ended by error"
    assert result.actual_iterations == 1


def refuse_journal_writes(
    monkeypatch: pytest.MonkeyPatch, journal: Path, refused: Callable[[int, bytes], bool]
) -> None:
    """Make the writes to ``journal`` for which ``refused(n, data)`` holds (``n``: the
    write's number, from 1) fail as a file grown past ``ulimit -f`` does (EFBIG)."""
    real = os.write
    count = {"n": 0}

    def write(fd: int, data: bytes) -> int:
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(journal.resolve()):
            count["n"] += 1
            if refused(count["n"], bytes(data)):
                raise OSError(errno.EFBIG, "File too large")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("refused", ["a commit", "the end"])
def test_a_journal_write_failure_fails_the_run_with_the_recorded_exit_code(
    refused: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The journal refuses a record while the session runs: the run prints one line and
    exits 1, the exit code the recording's footer says and status derives (failed); it
    exited 2, as for bad input, while the footer said 1."""
    from loop.cli import main

    (tmp_path / "loop.toml").write_text(LOOP_TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / ".loop/sessions/fs/journal.jsonl"
    if refused == "a commit":  # the second iteration's commit (its end record fits)
        commits: list[int] = []

        def second_commit(n: int, data: bytes) -> bool:
            if b'"iteration.end"' in data:
                commits.append(n)
            return len(commits) == 2 and commits[-1] == n

        refuse_journal_writes(monkeypatch, journal, second_commit)
    else:  # only the last record, the loop having completed
        refuse_journal_writes(monkeypatch, journal, lambda n, data: b'"session.end"' in data)
    run = ["run", "-q", "--log-format", "json", "--session-id", "fs"]
    code = main([*run, "--record-session", "rec.jsonl"])
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"error: {journal}: cannot append to the journal: File too large"
    footer = lines(tmp_path / "rec.jsonl")[-1]
    assert footer["kind"] == "footer"
    assert code == footer["exit_code"] == 1
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    if refused == "a commit":
        assert footer["reason"] == "error"
        assert main(["status", "fs", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "failed"
    else:
        assert footer["reason"] == "completed"  # the loop's own end, which the journal lacks


async def test_a_torn_line_longer_than_a_block_is_cut_alone(tmp_path: Path) -> None:
    """A crash in the middle of a 200 KB line: resuming cuts that line only; the header
    and the lines before it stay."""
    with anyio.CancelScope() as scope:
        await record_session(tmp_path, session_id="s1", extra=[StopAfter(2, scope)])
    path = tmp_path / "rec.jsonl"
    before = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"kind":"iteration","output":"' + b"x" * 200_000)  # torn, no newline
    _, summary, _ = await record_session(tmp_path, session_id="s1", resume=True, append=True)
    assert summary.reason == "completed"
    assert path.read_bytes().startswith(before)
    data = lines(path)
    assert data[0]["kind"] == "header"
    assert [d["iteration"] for d in data if d["kind"] == "iteration"] == [1, 2, 3, 4, 5]


@given(st.lists(st.floats(min_value=0, max_value=4e9, allow_nan=False), min_size=1, max_size=20))
def test_iso_time_is_the_millisecond_of_ts(stamps: list[float]) -> None:
    """The readable timestamp is ts truncated to the millisecond, in ISO 8601 UTC."""
    for ts in [*stamps, *stamps[:1]]:
        ms = int(ts * 1000)
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
        assert iso_time(ts) == moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


async def test_records_lost_at_the_end_are_said_before_the_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills after the header, until the run's end (every write fails but the
    footer's): the footer still comes after a write_failed marker that says how many
    records were lost, and the replay refuses the file for it."""
    real = recorder_mod._write_all

    def full_until_the_end(fd: int, data: bytes) -> None:
        alone = data.count(b"\n") == 1  # one line: the footer, or the marker before it
        last = alone and (b'"kind":"footer"' in data or b'"write_failed"' in data)
        if not (last or b'"kind":"header"' in data):  # the disk fills after the header
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(recorder_mod, "_write_all", full_until_the_end)
    path, summary, rec = await record_session(tmp_path)
    assert summary.reason == "completed"
    data = lines(path)
    assert data[0]["kind"] == "header" and [d["kind"] for d in data[-2:]] == ["marker", "footer"]
    assert data[-2]["marker"] == "write_failed"
    assert data[-2]["lost_records"] == data[-1]["write_failures"] == rec.write_failures > 0
    with pytest.raises(RecordingError, match="records were lost"):
        await replay_recording(path)
