"""Sessions on disk: locks, resume rules, corrupt journals, status from files alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop.config import LoadedConfig
from loop.engine.journal import read_journal
from loop.engine.records import session_start
from loop.engine.session_dir import SessionLock, SessionPaths
from loop.errors import InputError, PathError, SessionError
from loop.records import IterationEnd, IterationStart, Resume, encode_record
from loop.session.store import session_status, validate_session_id
from loop.testing import make_config, run_hats, scripted, tag

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}


def _cfg(tmp_path: Path, **loop: object) -> LoadedConfig:
    return make_config({"a": {"triggers": ["task.start", "a.more"]}}, folder=tmp_path, **loop)


async def test_a_second_run_on_a_running_session_is_refused(tmp_path: Path) -> None:
    """While a live process holds the session's lock, another run of it is refused."""
    cfg = _cfg(tmp_path)
    paths = SessionPaths(tmp_path / ".loop/sessions", "busy")
    paths.dir.mkdir(parents=True)
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | "
            "os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'4242'); print('held', "
            "flush=True); sys.stdin.read()",
            str(paths.lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert session_status(paths.sessions_dir, "busy").status == "not_found"
        start = session_start(cfg, "busy", 1.0)
        paths.journal.write_bytes(encode_record(start))
        assert session_status(paths.sessions_dir, "busy").status == "running"
        (pending,) = session_status(paths.sessions_dir, "busy").pending
        assert (pending.topic, pending.taken_by) == ("task.start", None)
        started = IterationStart(iteration=1, hat="a", triggers=(1,), ts=2.0)
        paths.journal.write_bytes(encode_record(start) + encode_record(started))
        status = session_status(paths.sessions_dir, "busy")  # pending, and being run on
        assert [(p.topic, p.taken_by) for p in status.pending] == [("task.start", 1)]
        with pytest.raises(SessionError, match="already running"):
            await run_hats(
                cfg,
                {"a": scripted(tag("LOOP_COMPLETE"))},
                workdir=tmp_path,
                session_id="busy",
                resume=True,
            )
        holder.kill()
    lock = SessionLock(paths.lock)  # the dead holder holds nothing
    lock.acquire()
    lock.release()


async def test_resume_rules_new_ids_completed_sessions_and_limits(tmp_path: Path) -> None:
    """A used id is refused for a new run; a completed session cannot resume; a limit can."""
    cfg = _cfg(tmp_path, max_iterations=1)
    backend = scripted(tag("a.more", "1"), tag("LOOP_COMPLETE"))
    first, _ = await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="s")
    assert first.reason == "max_iterations"
    assert session_status(tmp_path / ".loop/sessions", "s").status == "limit_reached"
    with pytest.raises(SessionError, match="already exists; use --resume"):
        await run_hats(cfg, {"a": backend}, workdir=tmp_path, session_id="s")
    more = _cfg(tmp_path / "b", max_iterations=5)
    more.root = tmp_path  # same working folder, a higher limit: resume and finish
    done, _ = await run_hats(more, {"a": backend}, workdir=tmp_path, session_id="s", resume=True)
    assert done.reason == "completed" and done.iterations == 2 and done.resumed
    st = session_status(tmp_path / ".loop/sessions", "s")
    assert (st.status, st.iterations, st.resumes) == ("completed", 2, 1)
    with pytest.raises(SessionError, match="already completed"):
        await run_hats(more, {"a": backend}, workdir=tmp_path, session_id="s", resume=True)


async def test_a_corrupt_line_in_the_middle_is_an_error_naming_it(tmp_path: Path) -> None:
    """Only the last line may be torn; a bad line before it stops resume and status."""
    cfg = _cfg(tmp_path, max_iterations=1)
    await run_hats(cfg, {"a": scripted(tag("a.more"))}, workdir=tmp_path, session_id="c")
    journal = tmp_path / ".loop/sessions/c/journal.jsonl"
    lines = journal.read_text().splitlines()
    lines[1] = lines[1][:10]
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionError, match=r"journal\.jsonl:2: corrupt journal line"):
        session_status(tmp_path / ".loop/sessions", "c")
    res = subprocess.run(
        [sys.executable, "-m", "loop", "run", "--no-preflight", "--resume", "c"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2 and "journal.jsonl:2: corrupt journal line" in res.stderr
    assert journal.read_text().splitlines()[1] == lines[1]  # nothing rewritten


def test_a_torn_last_line_is_dropped_deterministically(tmp_path: Path) -> None:
    """A final line without its newline (or not JSON) is ignored and reported as torn."""
    journal = tmp_path / "journal.jsonl"
    good = encode_record(Resume(pid=1, iteration=0, ts=1.0))
    for tail in (b'{"kind": "iteration.e', b'{"kind": "iteration.end"}'):
        journal.write_bytes(good + tail)
        contents = read_journal(journal)
        assert [r.kind for r in contents.records] == ["resume"]
        assert contents.torn and contents.good_size == len(good)


@pytest.mark.parametrize("bad", ["", "..", "a/b", "/abs", "x\x00y", "latest", "-dash", "a" * 129])
def test_session_ids_are_plain_names(bad: str) -> None:
    """Traversal, separators, NUL, reserved and odd names are refused."""
    with pytest.raises(PathError):
        validate_session_id(bad)


async def test_resuming_an_unknown_session_creates_nothing(tmp_path: Path) -> None:
    """--resume of an id with no journal is refused as status refuses it (an unknown
    session, exit 2), before any folder is made."""
    cfg = _cfg(tmp_path)
    with pytest.raises(InputError, match=r"^unknown session 'ghost' in .*sessions$") as err:
        await run_hats(
            cfg,
            {"a": scripted(tag("LOOP_COMPLETE"))},
            workdir=tmp_path,
            session_id="ghost",
            resume=True,
        )
    assert err.value.exit_code == 2
    assert not (tmp_path / ".loop/sessions/ghost").exists()


async def test_a_full_disk_stops_the_run_and_leaves_only_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal write that fails half-way is cut back; the run stops with one line; resume."""
    cfg = _cfg(tmp_path, max_iterations=10)
    journal = tmp_path / ".loop/sessions/full/journal.jsonl"
    real = os.write
    state = {"writes": 0, "full": True}

    def write(fd: int, data: bytes) -> int:
        if state["full"] and os.path.realpath(f"/proc/self/fd/{fd}") == str(journal.resolve()):
            state["writes"] += 1
            # session.start, two markers and a commit, then the second commit: half of it
            # lands, then ENOSPC
            if state["writes"] >= 5:
                real(fd, data[: len(data) // 2])
                raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    outputs = [tag("a.more", str(k)) for k in range(10)]
    with pytest.raises(SessionError, match="cannot append to the journal: No space left") as info:
        await run_hats(cfg, {"a": scripted(*outputs)}, workdir=tmp_path, session_id="full")
    assert "\n" not in str(info.value)
    contents = read_journal(journal)
    assert not contents.torn  # the half line was cut off
    ends = [r.iteration for r in contents.records if isinstance(r, IterationEnd)]
    assert ends == [1]
    state["full"] = False  # space again: the session resumes where the disk filled up
    done, _ = await run_hats(
        cfg, {"a": scripted(*outputs)}, workdir=tmp_path, session_id="full", resume=True
    )
    assert (done.reason, done.iterations) == ("max_iterations", 10)
