"""export_session: a loop session's journal becomes a valid experience."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.errors import StoreError, ToolError
from loop.experience.export import export_conversations, export_init
from loop.experience.journal import read_journal
from loop.experience.models import ConversationInput, ConversationsInput
from loop.experience.session_export import export_session, format_duration, plan_export
from loop.tools.base import ToolContext
from tests.experience.helpers import call

HATS = {
    "planner": {
        "description": "Breaks the task into steps",
        "triggers": ["task.start"],
        "publishes": ["plan.ready"],
        "backend": "scripted",
    },
    "builder": {
        "description": "Builds each step",
        "triggers": ["plan.ready"],
        "publishes": ["build.done"],
        "backend": "scripted",
    },
}


def _end(
    n: int,
    hat: str,
    events: list[dict[str, Any]],
    *,
    status: str = "ok",
    reason: str | None = None,
    output: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": "iteration.end",
        "iteration": n,
        "hat": hat,
        "prompt": f"prompt {n}",
        "output": f"output {n}" if output is None else output,
        "status": status,
        "backend_ok": status == "ok",
        "reason": reason,
        "events": events,
        "published": events,
        "duration": 0.5,
        "backend": "scripted",
        "ts": 1_700_000_000.0 + n,
        "elapsed": 1.0 * n,
        "cost_usd": 0.01,
    }


def _ev(topic: str, payload: Any, source: str) -> dict[str, Any]:
    return {"topic": topic, "payload": payload, "source": source, "ts": 1_700_000_000.5}


def _write(session_dir: Path, records: list[dict[str, Any]], tail: str = "") -> Path:
    session_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records) + tail
    (session_dir / "journal.jsonl").write_text(text)
    return session_dir


def _start(session_id: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "session.start",
        "session_id": session_id,
        "started_at": "2025-01-01T12:00:00Z",
        "config_digest": "sha256:0",
        "starting_event": "task.start",
        "completion_event": "LOOP_COMPLETE",
        "hats": HATS,
        "config": config,
        "version": "0.1.0",
        "config_source": "loop.toml",
        "start_event": _ev("task.start", "Build the thing", "loop"),
        "ts": 1_700_000_000.0,
    }


def _session(
    tmp_path: Path, iterations: list[dict[str, Any]], *, tail: str = "", end: bool = True
) -> Path:
    records = [_start("20250101-120000-demo", {"loop": {"prompt": "Build the thing"}})]
    for record in iterations:
        records.append(
            {
                "kind": "iteration.start",
                "iteration": record["iteration"],
                "hat": record["hat"],
                "triggers": [],
                "ts": record["ts"] - 0.5,
            }
        )
        records.append(record)
    if end:
        records.append(
            {
                "kind": "session.end",
                "reason": "completed",
                "iterations": len(iterations),
                "elapsed": 12.5,
                "ts": 1_700_000_100.0,
            }
        )
    return _write(tmp_path / "sessions" / "demo", records, tail)


def _demo(tmp_path: Path, **kwargs: Any) -> Path:
    return _session(
        tmp_path,
        [
            _end(
                1,
                "planner",
                [
                    _ev("plan.ready", {"steps": 2}, "planner"),
                    _ev("experience.thought", "small steps help", "planner"),
                ],
            ),
            _end(2, "builder", [], status="failed", reason="timeout", output=""),
            _end(
                3,
                "builder",
                [
                    _ev("build.done", "done", "builder"),
                    _ev(
                        "experience.thought",
                        {"topic": "retries", "insight": "retry once"},
                        "builder",
                    ),
                ],
            ),
        ],
        **kwargs,
    )


def test_session_becomes_a_valid_experience(ctx: ToolContext, tmp_path: Path) -> None:
    """Iterations become conversations, thoughts come from experience.thought, it validates."""
    session = _demo(tmp_path, tail='{"kind": "iteration.start", "iter')  # torn last line
    result = export_session(ctx, session)
    assert result.session_id == "20250101-120000-demo"
    assert (result.conversations, result.batches, result.thoughts) == (3, 1, 2)
    assert result.warnings == ["the journal's last line was torn and skipped"]
    directory = Path(result.directory_path)
    batch = json.loads((directory / "conversations_001.json").read_text())
    first, failed, third = batch["conversations"]
    assert (first["user_input"], first["ai_response"]) == ("prompt 1", "output 1")
    assert 'plan.ready: {"steps": 2}' in first["reasoning"]
    assert "experience.thought" not in first["reasoning"]
    assert (first["hat"], first["iteration"], first["topics"]) == ("planner", 1, ["plan.ready"])
    assert first["timestamp"] == "2023-11-14T22:13:21Z"
    assert failed["ai_response"] == "(no output)"
    assert "failed: timeout" in failed["reasoning"] and failed["status"] == "failed"
    assert "build.done: done" in third["reasoning"]
    thoughts = json.loads((directory / "thoughts.json").read_text())
    assert [t["insight"] for t in thoughts["insights"]] == [
        "small steps help",
        {"topic": "retries", "insight": "retry once"},
    ]
    assert thoughts["insights"][0]["hat"] == "planner"
    assert thoughts["session"]["termination_reason"] == "completed"
    report = call(ctx, "validate_experience", directory_path=result.directory_path)
    assert report["valid"] is True, report["errors"]


def test_manifest_is_filled_from_the_session(ctx: ToolContext, tmp_path: Path) -> None:
    """ai_name from the hats, topics from events, model from the backend, duration, platform."""
    result = export_session(ctx, _demo(tmp_path))
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert manifest["ai_name"] == "planner + builder(a team of 2 hatloop hats)"
    assert "planner: Breaks the task into steps" in manifest["ai_context"]
    assert manifest["main_topics"] == ["plan.ready", "build.done"]
    assert manifest["ai_model"] == "scripted"
    assert manifest["duration"] == "12.5s"
    assert manifest["platform"] == "hatloop"
    assert manifest["total_conversations"] == 3
    assert "Build the thing" in manifest["experience_summary"]
    assert ": 3 iteration(s) by planner, builder" in manifest["experience_summary"]
    assert manifest["experience_flow"] == [
        "1. planner: plan.ready",
        "2. builder: - (failed)",
        "3. builder: build.done",
    ]
    assert manifest["custom_metadata"]["failed_iterations"] == [2]
    assert manifest["custom_metadata"]["cost_usd"] == 0.03


def test_single_hat_name_uses_its_description(ctx: ToolContext, tmp_path: Path) -> None:
    """A session run by one hat is named after it and its role; no end record is fine."""
    session = _session(
        tmp_path, [_end(1, "planner", [_ev("plan.ready", "p", "planner")])], end=False
    )
    manifest = json.loads(Path(export_session(ctx, session).manifest_path).read_text())
    assert manifest["ai_name"] == "planner(Breaks the task into steps)"
    assert manifest["duration"] == "1.0s"


def test_long_sessions_are_split_into_batches_of_fifty(ctx: ToolContext, tmp_path: Path) -> None:
    """120 iterations give batches of 50, 50 and 20 with running indices."""
    session = _session(tmp_path, [_end(n, "planner", []) for n in range(1, 121)])
    result = export_session(ctx, session, session_id="long-run")
    assert (result.conversations, result.batches) == (120, 3)
    directory = Path(result.directory_path)
    info = json.loads((directory / "conversations_003.json").read_text())["batch_info"]
    assert info == {"batch_number": 3, "count": 20, "start_index": 101, "end_index": 120}
    assert directory.name == "experience_long-run"


def test_export_again_is_idempotent(ctx: ToolContext, tmp_path: Path) -> None:
    """Exporting the same session twice reports it as already exported."""
    session = _demo(tmp_path)
    first = export_session(ctx, session)
    again = export_session(ctx, session)
    assert again.already_exported is True
    assert again.directory_path == first.directory_path


def test_interrupted_export_is_completed_by_a_rerun(ctx: ToolContext, tmp_path: Path) -> None:
    """A run that stopped after init and batch 1 is finished by exporting again."""
    session = _session(tmp_path, [_end(n, "planner", []) for n in range(1, 61)])
    sid = "20250101-120000-demo"
    plan = plan_export(read_journal(session), sid)
    export_init(ctx, plan.init)
    export_conversations(
        ctx,
        ConversationsInput(
            session_id=sid,
            batch_number=1,
            conversations_batch=[ConversationInput.model_validate(c) for c in plan.batches[0]],
        ),
    )
    assert call(ctx, "get_export_status", session_id=sid)["next_batch_number"] == 2
    result = export_session(ctx, session)
    assert (result.conversations, result.batches) == (60, 2)
    assert not result.already_exported
    assert call(ctx, "get_export_status", session_id=sid)["status"] == "completed"


def test_grown_session_is_not_silently_merged(ctx: ToolContext, tmp_path: Path) -> None:
    """A finalized export of fewer iterations than the session now has is refused."""
    export_session(ctx, _session(tmp_path, [_end(1, "planner", [])]))
    grown = _session(tmp_path, [_end(1, "planner", []), _end(2, "builder", [])])
    with pytest.raises(ToolError) as exc:
        export_session(ctx, grown)
    assert exc.value.code == "export_completed"


def test_repeated_iteration_after_resume_counts_once(tmp_path: Path) -> None:
    """An iteration journaled twice (around a resume) is read once, the last record winning."""
    session = _session(tmp_path, [_end(1, "planner", []), _end(2, "builder", [])])
    with (session / "journal.jsonl").open("a") as fh:
        resume = {"kind": "resume", "pid": 1, "iteration": 1, "in_flight": 2, "ts": 1.0}
        fh.write(json.dumps(resume) + "\n")
        fh.write(json.dumps(_end(2, "builder", [], output="second try")) + "\n")
    journal = read_journal(session)
    assert [it.iteration for it in journal.iterations] == [1, 2]
    assert journal.iterations[1].output == "second try"


def test_corrupt_line_before_the_end_is_an_error(ctx: ToolContext, tmp_path: Path) -> None:
    """Only the last line may be torn; a bad line earlier names the file and line."""
    session = _demo(tmp_path)
    lines = (session / "journal.jsonl").read_text().splitlines()
    lines[2] = "{broken"
    (session / "journal.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError) as exc:
        export_session(ctx, session)
    assert "line 3" in exc.value.message and "journal.jsonl" in exc.value.message


def test_session_without_iterations_or_journal(ctx: ToolContext, tmp_path: Path) -> None:
    """No finished iteration is no_conversations; no journal is a StoreError; nothing made."""
    with pytest.raises(ToolError) as exc:
        export_session(ctx, _session(tmp_path, []))
    assert exc.value.code == "no_conversations"
    with pytest.raises(StoreError):
        export_session(ctx, tmp_path / "nowhere")
    assert not ctx.experiences_base.exists()


def test_unsafe_session_id_from_the_journal_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    """A journal whose session id would escape the base is refused."""
    session = _write(
        tmp_path / "s",
        [
            _start("../../evil", {}),
            _end(1, "planner", []),
        ],
    )
    with pytest.raises(ToolError) as exc:
        export_session(ctx, session)
    assert exc.value.code == "invalid_session_id"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.016, "16ms"),
        (1.0, "1.0s"),
        (12.5, "12.5s"),
        (185, "3m 05s"),
        (3720, "1h 02m"),
    ],
)
def test_duration_is_human(seconds: float, text: str) -> None:
    """Durations read as ms, seconds, minutes or hours."""
    assert format_duration(seconds) == text


def test_completion_event_is_not_a_topic(ctx: ToolContext, tmp_path: Path) -> None:
    """The completion event stays in the flow but is not one of the main topics."""
    session = _session(
        tmp_path,
        [
            _end(
                1,
                "planner",
                [_ev("plan.ready", "p", "planner"), _ev("LOOP_COMPLETE", "", "planner")],
            )
        ],
    )
    manifest = json.loads(Path(export_session(ctx, session).manifest_path).read_text())
    assert manifest["main_topics"] == ["plan.ready"]
    assert manifest["experience_flow"] == ["1. planner: plan.ready, LOOP_COMPLETE"]


def test_real_loop_run_exports_and_validates(ctx: ToolContext, tmp_path: Path) -> None:
    """A session run by `python -m loop run` (default preset) exports to a valid experience."""
    project = tmp_path / "project"
    project.mkdir()
    for argv in (["init"], ["run", "--session-id", "real-run", "--quiet"]):
        done = subprocess.run(
            [sys.executable, "-m", "loop", *argv],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    result = export_session(ctx, project / ".loop" / "sessions" / "real-run")
    assert result.session_id == "real-run" and result.conversations >= 1
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert manifest["platform"] == "hatloop" and manifest["main_topics"]
    report = call(ctx, "validate_experience", directory_path=result.directory_path)
    assert report["valid"] is True, report["errors"]
