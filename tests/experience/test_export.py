"""The export tools: the flow, derived status, retries, limits and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.errors import ToolError
from loop.experience.layout import MAX_DIRECTORY_BYTES, MAX_FILE_BYTES, DirState, derive_status
from loop.tools.base import ToolContext
from tests.experience.helpers import SUMMARY, call, conversations, full_export, start


def _status(ctx: ToolContext, session_id: str = "s1") -> dict[str, object]:
    return call(ctx, "get_export_status", session_id=session_id)


def _send(
    ctx: ToolContext, number: int, items: list[dict[str, object]], session_id: str = "s1"
) -> dict[str, object]:
    return call(
        ctx,
        "export_experience_conversations",
        session_id=session_id,
        batch_number=number,
        conversations_batch=items,
    )


def _code(exc: pytest.ExceptionInfo[ToolError]) -> str:
    return exc.value.code


def test_full_flow_status_at_each_step(ctx: ToolContext) -> None:
    """Status goes not_found -> in_progress (summary.json is a file) -> completed."""
    assert _status(ctx) == {
        "status": "not_found",
        "session_id": "s1",
        "created_files": [],
        "next_batch_number": 1,
        "directory_path": str(ctx.experiences_base / "experience_s1"),
    }
    start(ctx)
    st = _status(ctx)
    assert (st["status"], st["created_files"], st["next_batch_number"]) == (
        "in_progress",
        ["summary.json"],
        1,
    )
    _send(ctx, 1, conversations(3))
    st = _status(ctx)
    assert (st["status"], st["next_batch_number"]) == ("in_progress", 2)
    _send(ctx, 2, conversations(2))
    call(ctx, "export_experience_thoughts", session_id="s1", thoughts={"insights": ["x"]})
    fin = call(ctx, "export_experience_finalize", session_id="s1")
    assert fin["total_conversations"] == 5
    assert fin["file_list"] == [
        "conversations_001.json",
        "conversations_002.json",
        "manifest.json",
        "thoughts.json",
    ]
    assert fin["total_size"] == sum(
        (Path(fin["directory_path"]) / n).stat().st_size for n in fin["file_list"]
    )
    st = _status(ctx)
    assert (st["status"], st["next_batch_number"]) == ("completed", -1)
    assert "summary.json" not in st["created_files"]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (DirState(exists=False), ("not_found", 1)),
        (DirState(exists=True), ("initializing", 1)),
        (DirState(exists=True, files={"summary.json": 10}), ("in_progress", 1)),
        (DirState(exists=True, files={"thoughts.json": 2}), ("in_progress", 1)),
        (
            DirState(exists=True, files={"conversations_001.json": 5, "summary.json": 9}),
            ("in_progress", 2),
        ),
        (
            DirState(exists=True, files={"conversations_001.json": 5, "manifest.json": 9}),
            ("completed", -1),
        ),
    ],
)
def test_derive_status_follows_the_files(state: DirState, expected: tuple[str, int]) -> None:
    """Any file means in_progress (summary.json too); only an empty directory is
    initializing; a completed export has next batch -1 (pure)."""
    assert derive_status(state) == expected


def test_manifest_is_filled_from_summary_and_metadata(ctx: ToolContext) -> None:
    """The manifest holds the summary, the file list, the totals and the metadata's platform."""
    directory = full_export(ctx, batches=2, per_batch=3)
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["mcp_version"] == "1.0.0"
    assert manifest["ai_name"] == "Claude(pragmatic design partner)"
    assert manifest["files"] == {
        "conversations": ["conversations_001.json", "conversations_002.json"],
        "thoughts": "thoughts.json",
    }
    assert manifest["total_conversations"] == 6
    assert manifest["session_id"] == "s1"
    assert manifest["platform"] == "tests"
    assert manifest["custom_metadata"] == {"platform": "tests"}
    assert manifest["created_at"].endswith("Z")


def test_thoughts_only_makes_it_in_progress(ctx: ToolContext) -> None:
    """thoughts.json alone moves an initialized export to in_progress with next batch 1."""
    start(ctx)
    call(ctx, "export_experience_thoughts", session_id="s1", thoughts={"a": 1})
    st = _status(ctx)
    assert (st["status"], st["next_batch_number"]) == ("in_progress", 1)


def test_batch_indices_follow_previous_batches(ctx: ToolContext) -> None:
    """start_index/end_index count from the real sizes of earlier batches, and extras stay."""
    start(ctx)
    _send(ctx, 1, conversations(3))
    items = [{**c, "timestamp": "2025-01-01T00:00:00Z"} for c in conversations(2)]
    out = _send(ctx, 2, items)
    batch = json.loads(Path(str(out["file_path"])).read_text())
    assert batch["batch_info"] == {"batch_number": 2, "count": 2, "start_index": 4, "end_index": 5}
    assert batch["conversations"][0]["timestamp"] == "2025-01-01T00:00:00Z"


def test_identical_batch_resend_is_accepted(ctx: ToolContext) -> None:
    """Re-sending a written batch unchanged succeeds without rewriting it."""
    start(ctx)
    first = _send(ctx, 1, conversations(3))
    path = Path(str(first["file_path"]))
    before = path.stat()
    again = _send(ctx, 1, conversations(3))
    assert again["already_existed"] is True
    assert again["next_batch_number"] == 2
    after = path.stat()  # a rewrite goes through a temp file and a rename: a new inode
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_different_batch_resend_overwrites_it(ctx: ToolContext) -> None:
    """Re-sending a written batch with other content replaces the file and says so."""
    start(ctx)
    first = _send(ctx, 1, conversations(3))
    _send(ctx, 2, conversations(2))
    again = _send(ctx, 1, conversations(4, tag="other"))
    assert (again["overwritten"], again["already_existed"]) == (True, False)
    assert (again["processed_count"], again["next_batch_number"]) == (4, 3)
    written = json.loads(Path(str(first["file_path"])).read_text())
    assert [c["user_input"] for c in written["conversations"]] == [f"other{i}" for i in range(4)]
    assert written["batch_info"] == {
        "batch_number": 1,
        "count": 4,
        "start_index": 1,
        "end_index": 4,
    }
    assert sorted(p.name for p in Path(str(first["file_path"])).parent.iterdir()) == [
        ".export.lock",
        "conversations_001.json",
        "conversations_002.json",
        "summary.json",
    ]  # replaced in place: no temp file left behind


def test_overwrite_is_atomic_when_the_write_fails(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed overwrite leaves the old batch whole and is a write_failed error."""
    start(ctx)
    first = _send(ctx, 1, conversations(3))
    original = Path(str(first["file_path"])).read_bytes()

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("loop._fs.os.fsync", full_disk)
    with pytest.raises(ToolError) as exc:
        _send(ctx, 1, conversations(3, tag="other"))
    assert _code(exc) == "write_failed"
    assert "No space left on device" in exc.value.message
    assert Path(str(first["file_path"])).read_bytes() == original
    assert not list(Path(str(first["file_path"])).parent.glob(".*.tmp"))


@pytest.mark.parametrize("number", [2, 3])
def test_batches_must_be_consecutive(ctx: ToolContext, number: int) -> None:
    """A batch number that skips ahead is refused and names the expected one."""
    start(ctx)
    if number == 3:
        _send(ctx, 1, conversations(1))
    with pytest.raises(ToolError) as exc:
        _send(ctx, number, conversations(1))
    assert _code(exc) == "batch_not_consecutive"
    assert exc.value.details["next_batch_number"] == number - 1


def test_batch_of_fifty_passes_and_fifty_one_is_refused(ctx: ToolContext) -> None:
    """At most 50 conversations per batch."""
    start(ctx)
    assert _send(ctx, 1, conversations(50))["processed_count"] == 50
    with pytest.raises(ToolError) as exc:
        _send(ctx, 2, conversations(51))
    assert _code(exc) == "batch_too_large"
    assert not (ctx.experiences_base / "experience_s1" / "conversations_002.json").exists()


def test_empty_batch_and_empty_reasoning_are_invalid_input(ctx: ToolContext) -> None:
    """A batch needs at least one conversation, and each needs non-empty reasoning."""
    start(ctx)
    with pytest.raises(ToolError) as exc:
        _send(ctx, 1, [])
    assert _code(exc) == "invalid_input"
    with pytest.raises(ToolError) as exc:
        _send(ctx, 1, [{"user_input": "q", "ai_response": "a", "reasoning": ""}])
    assert _code(exc) == "invalid_input"
    assert "conversations_batch.0.reasoning" in exc.value.message


def test_file_over_ten_megabytes_is_refused(ctx: ToolContext) -> None:
    """A batch file over 10 MB is refused and nothing is written."""
    start(ctx)
    big = [{"user_input": "q", "ai_response": "x" * MAX_FILE_BYTES, "reasoning": "r"}]
    with pytest.raises(ToolError) as exc:
        _send(ctx, 1, big)
    assert _code(exc) == "file_too_large"
    assert _status(ctx)["created_files"] == ["summary.json"]
    with pytest.raises(ToolError) as exc:
        call(
            ctx, "export_experience_thoughts", session_id="s1", thoughts={"t": "y" * MAX_FILE_BYTES}
        )
    assert _code(exc) == "file_too_large"


def test_directory_over_one_hundred_megabytes_is_refused(ctx: ToolContext) -> None:
    """A write that takes the directory past 100 MB is refused."""
    start(ctx)
    directory = ctx.experiences_base / "experience_s1"
    with (directory / "filler.bin").open("wb") as fh:  # sparse: costs no disk
        fh.truncate(MAX_DIRECTORY_BYTES - 1000)
    _send(ctx, 1, conversations(1))  # small enough to fit
    with pytest.raises(ToolError) as exc:
        _send(ctx, 2, [{"user_input": "q", "ai_response": "x" * 2000, "reasoning": "r"}])
    assert _code(exc) == "directory_too_large"
    assert not (directory / "conversations_002.json").exists()


def test_init_retry_is_accepted_and_a_different_init_refused(ctx: ToolContext) -> None:
    """The same init twice is a resume; another summary for the same id is refused."""
    start(ctx)
    assert start(ctx)["resumed"] is True
    with pytest.raises(ToolError) as exc:
        start(ctx, ai_name="Someone else(role)")
    assert _code(exc) == "session_exists"
    assert "with a different summary;" in exc.value.message


def test_a_refused_init_names_what_differs(ctx: ToolContext) -> None:
    """The same summary with other metadata is refused as the metadata's difference (an
    agent that checks its summary after a crash would find nothing wrong there)."""
    start(ctx)
    with pytest.raises(ToolError) as exc:
        call(ctx, "export_experience_init", session_id="s1", summary=SUMMARY)
    assert _code(exc) == "session_exists"
    assert "with a different metadata;" in exc.value.message
    with pytest.raises(ToolError) as exc:
        call(
            ctx,
            "export_experience_init",
            session_id="s1",
            summary={**SUMMARY, "ai_name": "Someone else(role)"},
            metadata={"platform": "other"},
        )
    assert "with a different summary and metadata;" in exc.value.message


def test_init_without_session_id_generates_one(ctx: ToolContext) -> None:
    """An omitted session_id becomes a UUID naming the directory."""
    out = call(
        ctx,
        "export_experience_init",
        summary={
            "ai_name": "A(b)",
            "ai_context": "c",
            "experience_summary": "s",
            "experience_flow": [],
            "main_topics": [],
        },
    )
    assert len(out["session_id"]) == 36
    assert Path(out["directory_path"]).name == f"experience_{out['session_id']}"


def test_writes_after_finalize_are_refused(ctx: ToolContext) -> None:
    """A finalized export takes no more batches, thoughts or init; finalize again is safe."""
    full_export(ctx)
    with pytest.raises(ToolError) as exc:
        _send(ctx, 3, conversations(1))
    assert _code(exc) == "export_completed"
    with pytest.raises(ToolError) as exc:
        call(ctx, "export_experience_thoughts", session_id="s1", thoughts={"a": 1})
    assert _code(exc) == "export_completed"
    with pytest.raises(ToolError) as exc:
        start(ctx)
    assert _code(exc) == "export_completed"
    again = call(ctx, "export_experience_finalize", session_id="s1")
    assert again["warnings"] == ["already finalized"]
    assert again["total_conversations"] == 6


def test_finalize_preconditions(ctx: ToolContext) -> None:
    """Finalize needs the session, then at least one batch; it warns without thoughts."""
    with pytest.raises(ToolError) as exc:
        call(ctx, "export_experience_finalize", session_id="s1")
    assert _code(exc) == "session_not_found"
    start(ctx)
    with pytest.raises(ToolError) as exc:
        call(ctx, "export_experience_finalize", session_id="s1")
    assert _code(exc) == "no_conversations"
    _send(ctx, 1, conversations(1))
    out = call(ctx, "export_experience_finalize", session_id="s1")
    assert out["warnings"] and "thoughts.json" in out["warnings"][0]
    manifest = json.loads(Path(str(out["manifest_path"])).read_text())
    assert manifest["files"]["thoughts"] == ""


def test_finalize_completes_an_interrupted_finalize(ctx: ToolContext) -> None:
    """A manifest written but summary.json left behind: finalize again removes it."""
    directory = full_export(ctx)
    (directory / "summary.json").write_text("{}")
    (directory / ".conversations_003.json.abc.tmp").write_text("partial")
    call(ctx, "export_experience_finalize", session_id="s1")
    assert not (directory / "summary.json").exists()
    assert not list(directory.glob(".*.tmp"))


def test_writes_need_an_initialized_session(ctx: ToolContext) -> None:
    """Batches and thoughts for an unknown session are refused without creating it."""
    with pytest.raises(ToolError) as exc:
        _send(ctx, 1, conversations(1), session_id="ghost")
    assert _code(exc) == "session_not_found"
    with pytest.raises(ToolError) as exc:
        call(ctx, "export_experience_thoughts", session_id="ghost", thoughts={})
    assert _code(exc) == "session_not_found"
    assert not (ctx.experiences_base / "experience_ghost").exists()


@pytest.mark.parametrize(
    "bad",
    [
        "../escape",
        "a/b",
        "a\\b",
        "..",
        ".hidden",
        "a..b",
        "",
        "x" * 101,
        "a\x00b",
        "sp ace",
        "/abs",
    ],
)
def test_unsafe_session_ids_are_refused(ctx: ToolContext, bad: str) -> None:
    """Traversal, separators, NUL, odd characters and over-long ids are refused everywhere."""
    for name, args in (
        ("get_export_status", {"session_id": bad}),
        ("export_experience_finalize", {"session_id": bad}),
        ("export_experience_thoughts", {"session_id": bad, "thoughts": {}}),
    ):
        with pytest.raises(ToolError) as exc:
            call(ctx, name, **args)
        assert _code(exc) == "invalid_session_id"
    with pytest.raises(ToolError) as exc:
        start(ctx, bad)
    assert _code(exc) == "invalid_session_id"
    assert list(ctx.root.iterdir()) == []


def test_longest_allowed_session_id_works(ctx: ToolContext) -> None:
    """A 100-character id of the allowed characters is accepted."""
    sid = "20250101-120000-" + "a" * 84
    assert start(ctx, sid)["session_id"] == sid


def test_symlinked_session_directory_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    """An experience_<id> symlink pointing outside the base is not followed."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    ctx.experiences_base.mkdir(parents=True)
    (ctx.experiences_base / "experience_evil").symlink_to(outside)
    with pytest.raises(ToolError) as exc:
        call(ctx, "get_export_status", session_id="evil")
    assert _code(exc) == "invalid_session_id"


def test_unwritable_directory_is_a_tool_error(ctx: ToolContext) -> None:
    """A file in the way of the session directory gives write_failed, not a traceback."""
    ctx.experiences_base.mkdir(parents=True)
    (ctx.experiences_base / "experience_s1").write_text("in the way")
    with pytest.raises(ToolError) as exc:
        start(ctx)
    assert _code(exc) == "write_failed"
