"""The feedbackbox: items for the agent, taken first by name and marked ``processed.``.

Items whose names start with ``interrupt.`` are taken by the loop at the next
heartbeat and turned into an interrupt event (see :mod:`loop.themes.extension`).
"""

from __future__ import annotations

from loop import _fs
from loop._log import get_logger
from loop.errors import StoreError, ToolError
from loop.themes import naming
from loop.themes.lifecycle import repair
from loop.themes.models import FeedbackOutput, SkippedItem
from loop.themes.ops import Operations
from loop.themes.workspace import Workspace

__all__ = ["INTERRUPT_PREFIX", "interrupt_name", "process_feedback"]

INTERRUPT_PREFIX = "interrupt."
_BOX = "feedbackbox"

log = get_logger(__name__)


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
    if ws.exists(ws.intent_file) or _pending(ws, interrupts_only, warn=False)[0]:
        with ws.locked():
            repaired = repair(ws, ops)
            names, skipped = _pending(ws, interrupts_only)
            if names:
                return _take(ws, ops, names, skipped, repaired)
    else:  # nothing to take: answer without creating the lock file
        repaired = []
        names, skipped = _pending(ws, interrupts_only)
    return FeedbackOutput(
        found=False,
        repaired=repaired,
        skipped=skipped,
        message="\n".join(["no feedback to process", *_notes(skipped)]),
    )


def _pending(
    ws: Workspace, interrupts_only: bool, *, warn: bool = True
) -> tuple[list[str], list[SkippedItem]]:
    """The items to take, first by name, and those skipped (logged when ``warn``)."""
    if warn:
        names, skipped = ws.items(ws.feedbackbox)
    else:
        names, skipped = naming.sort_out(ws.list_md(ws.feedbackbox))[0], []
    if interrupts_only:
        names = [n for n in names if n.startswith(INTERRUPT_PREFIX)]
        skipped = [s for s in skipped if s.file.startswith(f"{_BOX}/{INTERRUPT_PREFIX}")]
    return names, skipped


def _notes(skipped: list[SkippedItem]) -> list[str]:
    return [f"skipped {item.file}: {item.reason}" for item in skipped]


def _take(
    ws: Workspace,
    ops: Operations,
    names: list[str],
    skipped: list[SkippedItem],
    repaired: list[str],
) -> FeedbackOutput:
    """Mark the first item processed and return it (the lock is held)."""
    first = names[0]
    src = ws.feedbackbox / first
    # Never replacing an earlier item's processed file: see naming.processed_names.
    processed = next(n for n in naming.processed_names(first) if not ws.exists(ws.feedbackbox / n))
    dst = ws.feedbackbox / processed
    content = ws.read_text(src)
    try:
        ops.mark_processed(src, dst)
    except OSError as exc:
        raise ToolError(
            "mark_processed_failed",
            f"could not rename feedbackbox/{first} to {dst.name}: {exc}; "
            "check the feedbackbox by hand",
        ) from exc
    warnings = []
    if processed != naming.PROCESSED_PREFIX + first:
        warnings.append(naming.reused_note(_BOX, first, processed))
        log.warning("feedback name reused", item=first, processed=processed)
    more = len(names) - 1
    return FeedbackOutput(
        found=True,
        filename=first,
        processedFile=f"{_BOX}/{dst.name}",
        content=content,
        remaining=more,
        repaired=repaired,
        skipped=skipped,
        warnings=warnings,
        message="\n".join(
            [
                f"feedback item {first} (now {dst.name}); {more} more to process",
                *(f"warning: {w}" for w in warnings),
                *_notes(skipped),
            ]
        ),
    )
