"""Helpers for the experience tests: call a tool, build conversations, run an export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loop.experience.tools import TOOLS
from loop.tools.base import ToolContext

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}

SUMMARY: dict[str, Any] = {
    "ai_name": "Claude(pragmatic design partner)",
    "ai_context": "Helps a solo developer shape a spec",
    "experience_summary": "Turned a vague idea into a small, testable spec.",
    "experience_flow": ["requirements", "design", "implementation"],
    "main_topics": ["avoiding over-design (dropped plugins)", "test-first (wrote tests)"],
}


def call(ctx: ToolContext, name: str, **args: Any) -> dict[str, Any]:
    """Call an experience tool with raw arguments; return its JSON output."""
    return TOOLS_BY_NAME[name].run(ctx, args).model_dump(mode="json")


def conversations(count: int, *, tag: str = "q") -> list[dict[str, Any]]:
    """``count`` distinct conversations."""
    return [
        {"user_input": f"{tag}{i}", "ai_response": f"a{i}", "reasoning": f"because {i}"}
        for i in range(count)
    ]


def start(ctx: ToolContext, session_id: str = "s1", **summary: Any) -> dict[str, Any]:
    """Init an export with the default summary (overridden by ``summary``)."""
    return call(
        ctx,
        "export_experience_init",
        session_id=session_id,
        metadata={"platform": "tests"},
        summary={**SUMMARY, **summary},
    )


def full_export(
    ctx: ToolContext,
    session_id: str = "s1",
    *,
    batches: int = 2,
    per_batch: int = 3,
    **summary: Any,
) -> Path:
    """Run a whole export; return the experience directory."""
    out = start(ctx, session_id, **summary)
    for n in range(1, batches + 1):
        call(
            ctx,
            "export_experience_conversations",
            session_id=session_id,
            batch_number=n,
            conversations_batch=conversations(per_batch, tag=f"b{n}q"),
        )
    call(
        ctx,
        "export_experience_thoughts",
        session_id=session_id,
        thoughts={"insights": [{"topic": "t", "insight": "i"}]},
    )
    call(ctx, "export_experience_finalize", session_id=session_id)
    return Path(out["directory_path"])
