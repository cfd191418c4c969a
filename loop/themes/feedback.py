"""The feedbackbox: items for the agent, taken first by name and marked ``processed.``.

Items whose names start with ``interrupt.`` are taken by the loop at the next
heartbeat and turned into an interrupt event (see :mod:`loop.themes.extension`).
"""

from __future__ import annotations

from loop import _fs
from loop.errors import StoreError, ToolError
from loop.themes import naming
from loop.themes.lifecycle import repair
from loop.themes.models import FeedbackOutput
from loop.themes.ops import Operations
from loop.themes.workspace import Workspace

__all__ = ["INTERRUPT_PREFIX", "interrupt_name", "process_feedback"]

INTERRUPT_PREFIX = "interrupt."


def interrupt_name(name: str) -> str:
    """The item's name without ``interrupt.`` and ``.md`` (what an interrupt event shows)."""
    return name.removeprefix(INTERRUPT_PREFIX).removesuffix(".md")


def process_feedback(
    ws: Workspace, ops: Operations, kind: str, *, interrupts_only: bool = False
) -> FeedbackOutput:
    """Take the first unprocessed feedback item (or interrupt item) by name; mark it processed.

    A missing feedbackbox folder is created (so that it is there to drop items into),
    except for ``interrupts_only``, the loop's own check at each heartbeat.

    Raises:
        ToolError: ``unsupported_type`` for any type but ``feedbackbox``;
            ``mark_processed_failed`` when the rename fails.
        StoreError: the feedbackbox folder cannot be created.
    """
    if kind != "feedbackbox":
        raise ToolError(
            "unsupported_type",
            f'check_and_process_item only handles type "feedbackbox" (got {kind[:40]!r}); '
            "for themes use preview_next_theme, then start_theme and end_theme",
        )
    if not interrupts_only and ws.kind(ws.feedbackbox) is None:
        try:  # created without following a link, like every workspace folder
            _fs.make_folders(ws.feedbackbox, root=ws.trusted)
        except OSError as exc:
            raise StoreError(f"cannot create: {exc.strerror or exc}", file=ws.feedbackbox) from exc
        if not ws.exists(ws.intent_file):
            return FeedbackOutput(
                found=False,
                message="no feedback to process: created the empty feedbackbox folder",
            )
    if not ws.exists(ws.intent_file) and not naming.candidates(
        ws.list_md(ws.feedbackbox)
    ):  # nothing to do: answer without creating the lock file
        return FeedbackOutput(found=False, message="no feedback to process")
    with ws.locked():
        repaired = repair(ws, ops)
        names = naming.candidates(ws.list_md(ws.feedbackbox))
        if interrupts_only:
            names = [n for n in names if n.startswith(INTERRUPT_PREFIX)]
        if not names:
            return FeedbackOutput(found=False, repaired=repaired, message="no feedback to process")
        first = names[0]
        src = ws.feedbackbox / first
        dst = ws.feedbackbox / (naming.PROCESSED_PREFIX + first)
        content = ws.read_text(src)
        try:
            ops.mark_processed(src, dst)
        except OSError as exc:
            raise ToolError(
                "mark_processed_failed",
                f"could not rename feedbackbox/{first} to {dst.name}: {exc}; "
                "check the feedbackbox by hand",
            ) from exc
    more = len(names) - 1
    return FeedbackOutput(
        found=True,
        filename=first,
        processedFile=f"feedbackbox/{dst.name}",
        content=content,
        remaining=more,
        repaired=repaired,
        message=f"feedback item {first} (now {dst.name}); {more} more to process",
    )
