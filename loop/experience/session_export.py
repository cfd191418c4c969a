"""Export a loop session as an experience, through the same functions as the tools.

Each finished iteration becomes a conversation (prompt -> ``user_input``, output ->
``ai_response``, the hat's own events -> ``reasoning``); the hats' ``experience.thought``
events become ``thoughts.json``; the manifest is filled from the session. The plan is
built by pure functions (:func:`plan_export`); :func:`export_session` only runs it, and
running it again after a crash resumes where the files say it stopped.

It runs the plan as calls of the experience tools (``get_export_status``,
``export_experience_init``, ``..._conversations``, ``..._thoughts``, ``..._finalize``),
made through :meth:`~loop.tools.base.Tool.run` as the tool commands make theirs: an
``export`` an agent runs inside an iteration is those calls of its iteration (journaled,
recorded), and a replay makes them again, so the experience it wrote is there again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from loop._fs import read_json
from loop.errors import ToolError
from loop.events import Event
from loop.experience.export import encode
from loop.experience.journal import SessionJournal, read_journal
from loop.experience.layout import (
    CONVERSATION_BATCH_LIMIT,
    MANIFEST,
    check_session_id,
    scan,
    trusted_root,
)
from loop.experience.models import (
    FinalizeOutput,
    InitInput,
    StatusOutput,
)
from loop.experience.schemas import ExperienceSummary
from loop.experience.tools import TOOLS
from loop.records import IterationEnd
from loop.tools.base import ToolContext
from loop.topics import DEFAULT_COMPLETION_EVENT

__all__ = [
    "THOUGHT_TOPIC",
    "ExportPlan",
    "SessionExportResult",
    "export_session",
    "format_duration",
    "plan_export",
]

THOUGHT_TOPIC = "experience.thought"
PLATFORM = "hatloop"
# Keep every batch file well under the 10 MB limit, and one huge output from blocking it.
BATCH_BYTE_BUDGET = 8 * 1024 * 1024
MAX_FIELD_CHARS = 500_000


class SessionExportResult(BaseModel):
    """What :func:`export_session` did."""

    session_id: str
    directory_path: str
    manifest_path: str
    conversations: int
    batches: int
    thoughts: int = Field(description="experience.thought events exported")
    total_size: int
    already_exported: bool = False
    warnings: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class ExportPlan:
    """Everything to write, decided before anything is written."""

    init: InitInput
    batches: list[list[dict[str, Any]]]
    thoughts: dict[str, Any]
    thought_count: int


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _text(payload: Any) -> str:
    return (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, ensure_ascii=False, sort_keys=True)
    )


def _clip(text: str) -> str:
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f"\n[... {len(text) - MAX_FIELD_CHARS} characters cut]"


def _own_events(it: IterationEnd) -> list[Event]:
    return [e for e in it.events if e.topic != THOUGHT_TOPIC]


def _reasoning(it: IterationEnd) -> str:
    lines = []
    for event in _own_events(it):
        target = f" (to {event.target})" if event.target else ""
        lines.append(f"- {event.topic}{target}: {_text(event.payload)}".rstrip())
    if it.status != "ok":
        lines.append(f"- the iteration failed: {it.reason or 'no reason given'}")
    if not lines:
        return f"{it.hat} published no events."
    return f"{it.hat} published:\n" + "\n".join(lines)


def _conversation(it: IterationEnd) -> dict[str, Any]:
    conv: dict[str, Any] = {
        "user_input": _clip(it.prompt) or "(empty prompt)",
        "ai_response": _clip(it.output) or "(no output)",
        "reasoning": _clip(_reasoning(it)),
        "iteration": it.iteration,
        "hat": it.hat,
        "status": it.status,
        "topics": [e.topic for e in _own_events(it)],
    }
    extras = {
        "timestamp": _iso(it.ts),
        "duration_seconds": it.duration,
        "backend": it.backend,
        "cost_usd": it.cost_usd,
    }
    conv.update({k: v for k, v in extras.items() if v is not None})
    return conv


def _batches(conversations: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split into batches of at most 50 conversations and about 8 MB each."""
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for conv in conversations:
        conv_size = len(encode(conv))
        if current and (
            len(current) >= CONVERSATION_BATCH_LIMIT or size + conv_size > BATCH_BYTE_BUDGET
        ):
            batches.append(current)
            current, size = [], 0
        current.append(conv)
        size += conv_size
    if current:
        batches.append(current)
    return batches


def format_duration(seconds: float) -> str:
    """A short human duration: 16ms, 12.5s, 3m 05s, 1h 02m."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _summary(journal: SessionJournal, session_id: str) -> ExperienceSummary:
    its = journal.iterations
    ran = _unique([it.hat for it in its]) or list(journal.hats)
    describe = {name: hat.description if (hat := journal.hats.get(name)) else "" for name in ran}
    if len(ran) == 1:
        role = describe[ran[0]][:60] or "hatloop hat"
        ai_name = f"{ran[0]}({role})"
    else:
        ai_name = f"{' + '.join(ran)}(a team of {len(ran)} hatloop hats)"
    context = "; ".join(f"{n}: {d}" if d else n for n, d in describe.items())
    loop_cfg = journal.config.get("loop")
    prompt = journal.config.get("prompt") or (
        loop_cfg.get("prompt") if isinstance(loop_cfg, dict) else None
    )
    reason = journal.end.reason if journal.end else "no recorded end"
    task = f" on the task {_text(prompt)[:300]!r}" if prompt else ""
    failed = sum(1 for it in its if it.status != "ok")
    control = {journal.completion_event, DEFAULT_COMPLETION_EVENT}  # loop control, not a subject
    topics = _unique([e.topic for it in its for e in _own_events(it) if e.topic not in control])
    backends = _unique([it.backend for it in its if it.backend]) or _unique(
        [h.backend for h in journal.hats.values()]
    )
    elapsed = journal.end.elapsed if journal.end else its[-1].elapsed if its else None
    return ExperienceSummary(
        ai_name=ai_name,
        ai_context=f"hatloop hats: {context}" if context else "hats of a hatloop session",
        experience_summary=(
            f"hatloop session {session_id}: {len(its)} iteration(s) by {', '.join(ran)}{task}"
            f" ({failed} failed); it ended with: {reason}."
        ),
        experience_flow=[
            f"{it.iteration}. {it.hat}: {', '.join(e.topic for e in _own_events(it)) or '-'}"
            + ("" if it.status == "ok" else " (failed)")
            for it in its
        ],
        main_topics=topics or ran,
        ai_model=", ".join(backends) or None,
        duration=format_duration(elapsed) if elapsed is not None else None,
        platform=PLATFORM,
    )


def plan_export(journal: SessionJournal, session_id: str) -> ExportPlan:
    """Decide the summary, the batches and the thoughts of a session's export (pure)."""
    its = journal.iterations
    thoughts = [
        {
            "hat": it.hat,
            "iteration": it.iteration,
            "timestamp": _iso(e.ts or it.ts),
            "insight": e.payload,
        }
        for it in its
        for e in it.events
        if e.topic == THOUGHT_TOPIC
    ]
    costs = [it.cost_usd for it in its if it.cost_usd is not None]
    metadata: dict[str, Any] = {
        "platform": PLATFORM,
        "loop_session_id": journal.session_id,
        "started_at": journal.started_at,
        "termination_reason": journal.end.reason if journal.end else None,
        "iterations": len(its),
        "failed_iterations": [it.iteration for it in its if it.status != "ok"],
        "hats": sorted(journal.hats),
    }
    if costs:
        metadata["cost_usd"] = round(sum(costs), 6)
    metadata = {k: v for k, v in metadata.items() if v is not None}
    session_facts = {
        **metadata,
        "hat_descriptions": {name: hat.description for name, hat in journal.hats.items()},
    }
    return ExportPlan(
        init=InitInput(
            session_id=session_id, metadata=metadata, summary=_summary(journal, session_id)
        ),
        batches=_batches([_conversation(it) for it in its]),
        thoughts={"insights": thoughts, "session": session_facts},
        thought_count=len(thoughts),
    )


_TOOLS = {tool.name: tool for tool in TOOLS}


def _call(ctx: ToolContext, name: str, args: dict[str, Any]) -> BaseModel:
    """Call the experience tool ``name`` as its command would: a call of the iteration
    ``ctx`` is in, if any (journaled there); its error is raised as the tool's."""
    return _TOOLS[name].run(ctx, args)


def export_session(
    ctx: ToolContext, session_dir: Path, *, session_id: str | None = None
) -> SessionExportResult:
    """Export the loop session in ``session_dir`` as ``experience_<session_id>``.

    Args:
        ctx: where the experiences live.
        session_dir: the loop session's folder (holding ``journal.jsonl``).
        session_id: the experience's id; by default the loop session's id.

    Raises:
        StoreError: the journal is missing or corrupt.
        ToolError: no finished iteration, an invalid id, or a different finalized export.
    """
    journal = read_journal(session_dir)
    sid = check_session_id(session_id or journal.session_id or session_dir.name)
    if not journal.iterations:
        raise ToolError("no_conversations", f"session {sid!r} has no finished iteration to export")
    plan = plan_export(journal, sid)
    total = sum(len(b) for b in plan.batches)
    status = _call(ctx, "get_export_status", {"session_id": sid})
    assert isinstance(status, StatusOutput)
    if status.status == "completed":
        manifest = read_json(Path(status.directory_path) / MANIFEST, root=trusted_root(ctx))
        done = manifest.get("total_conversations") if isinstance(manifest, dict) else None
        if done != total:
            raise ToolError(
                "export_completed",
                f"experience {sid!r} was already exported with {done} conversations; the "
                f"session now has {total}: export it under another session_id",
            )
        directory = Path(status.directory_path)
        return SessionExportResult(
            session_id=sid,
            directory_path=str(directory),
            manifest_path=str(directory / MANIFEST),
            conversations=total,
            batches=len(plan.batches),
            thoughts=plan.thought_count,
            total_size=scan(directory, root=trusted_root(ctx)).total_bytes,
            already_exported=True,
        )
    _call(ctx, "export_experience_init", plan.init.model_dump(mode="json"))
    for number, batch in enumerate(plan.batches, 1):
        _call(
            ctx,
            "export_experience_conversations",
            {"session_id": sid, "batch_number": number, "conversations_batch": batch},
        )
    _call(ctx, "export_experience_thoughts", {"session_id": sid, "thoughts": plan.thoughts})
    final = _call(ctx, "export_experience_finalize", {"session_id": sid})
    assert isinstance(final, FinalizeOutput)
    return SessionExportResult(
        session_id=sid,
        directory_path=final.directory_path,
        manifest_path=final.manifest_path,
        conversations=final.total_conversations,
        batches=len(plan.batches),
        thoughts=plan.thought_count,
        total_size=final.total_size,
        warnings=(["the journal's last line was torn and skipped"] if journal.torn_tail else []),
    )
