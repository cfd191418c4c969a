"""The theme service: preview, start, end, feedback and status over one workspace.

Every mutating call takes the workspace lock, first undoes a start that was killed
half-way (see :mod:`loop.themes.lifecycle`) and says so in ``repaired``. Preview and
status only read: calling them changes nothing on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from loop import _fs
from loop._log import get_logger
from loop._names import check_name
from loop.errors import LoopError, PathError, ToolError
from loop.themes import naming
from loop.themes.feedback import process_feedback
from loop.themes.heartbeat import read_heartbeat_id, write_heartbeat
from loop.themes.lifecycle import STAGES, StartPlan, execute_start, repair
from loop.themes.models import (
    EndThemeInput,
    EndThemeOutput,
    FeedbackOutput,
    PreviewOutput,
    SkippedItem,
    StartThemeInput,
    StartThemeOutput,
    StatusOutput,
)
from loop.themes.ops import Operations
from loop.themes.status import active_themes, is_ended, parent_of, render_active
from loop.themes.workspace import Workspace

__all__ = ["ThemeService"]

log = get_logger(__name__)


class ThemeService:
    """The theme lifecycle over the workspace at ``root``; ``ops`` is the fault seam.

    ``trusted_root`` is the folder below which no link is followed (the project folder
    when the workspace lies in it); ``None`` trusts ``root`` itself.
    """

    def __init__(
        self, root: Path, ops: Operations | None = None, *, trusted_root: Path | None = None
    ) -> None:
        self.ws = Workspace(root, trusted_root)
        self.ops = ops or Operations()
        self.ops.root = self.ws.trusted

    # --- heartbeat ------------------------------------------------------------------

    def heartbeat(self, now: datetime | None = None, call: str | None = None) -> str:
        """Write the next heartbeat ID (every loop iteration is one heartbeat); ``now``:
        the time it is made from (local, aware or naive), else the clock's; ``call``: the
        session call making it (the same call again gets the same ID from the same time)."""
        return write_heartbeat(self.ws, now, call)

    def repair(self) -> list[str]:
        """Undo an interrupted start now, under the lock; return what was repaired."""
        if not self.ws.exists(self.ws.intent_file):
            return []
        with self.ws.locked():
            return repair(self.ws, self.ops)

    # --- reads ------------------------------------------------------------------------

    def preview(self) -> PreviewOutput:
        """The first theme candidate by name; read-only (takes no lock, creates nothing)."""
        pending = self.ws.exists(self.ws.intent_file)
        names, skipped = self.ws.items(self.ws.themebox)
        notes = _skipped_lines(skipped)
        if not names:
            return PreviewOutput(
                found=False,
                pendingRepair=pending,
                skipped=skipped,
                message="\n".join(["no theme to process: themebox has no candidate", *notes]),
            )
        first = names[0]
        content = self.ws.read_text(self.ws.themebox / first)
        more = len(names) - 1
        return PreviewOutput(
            found=True,
            filename=first,
            content=content,
            remaining=more,
            pendingRepair=pending,
            skipped=skipped,
            message="\n".join(
                [
                    f"next theme candidate: {first} ({more} more). Nothing was changed; call "
                    f'start_theme with target_filename "{first}" to start it.',
                    *notes,
                ]
            ),
        )

    def _entries(self) -> list[naming.HistoryEntry]:
        entries = []
        for name in sorted(self.ws.list_md(self.ws.histories)):
            if naming.is_history_name(name):
                entry = naming.parse_history(name, self.ws.read_text(self.ws.histories / name))
                if entry is not None:
                    entries.append(entry)
        return entries

    def _cooldown_file(self, heartbeat_id: str) -> str | None:
        same = sorted(
            n
            for n in self.ws.list_md(self.ws.histories)
            if n.startswith(f"{heartbeat_id}_") and naming.is_history_name(n)
        )
        return same[0] if same else None

    def status(self) -> StatusOutput:
        """Active themes and subthemes, counts and the heartbeat, from the files."""
        try:
            hb: str | None = read_heartbeat_id(self.ws)
        except ToolError:
            hb = None
        active = active_themes(self._entries())
        theme_names, skipped_themes = self.ws.items(self.ws.themebox)
        feedback_names, skipped_feedback = self.ws.items(self.ws.feedbackbox)
        themes, feedback = len(theme_names), len(feedback_names)
        skipped = skipped_themes + skipped_feedback
        pending = self.ws.exists(self.ws.intent_file)
        cooldown = hb is not None and self._cooldown_file(hb) is not None
        lines = [
            f"heartbeat: {hb or 'none (no heartbeat is running)'}",
            render_active(active),
            f"theme candidates: {themes}; unprocessed feedback items: {feedback}",
        ]
        if cooldown:
            lines.append(
                "a theme was started or ended at this heartbeat: the next theme "
                "operation must wait for a later heartbeat"
            )
        if pending:
            lines.append("an interrupted start_theme will be undone by the next theme call")
        lines += _skipped_lines(skipped)
        return StatusOutput(
            heartbeatId=hb,
            activeThemes=active,
            themeCandidates=themes,
            unprocessedFeedback=feedback,
            pendingRepair=pending,
            cooldown=cooldown,
            message="\n".join(lines),
            skipped=skipped,
        )

    # --- start ------------------------------------------------------------------------

    def _check_cooldown(self, heartbeat_id: str, stage: str) -> None:
        existing = self._cooldown_file(heartbeat_id)
        if existing is not None:
            raise ToolError(
                "cooldown",
                f"{stage}a theme was already started or ended at heartbeat "
                f"{heartbeat_id} (artifacts/theme_histories/{existing}); finish this turn "
                "and try again at a later heartbeat",
                details={"heartbeatId": heartbeat_id, "existing": existing},
            )

    def _check_parent_not_ended(self, parent: tuple[str, str]) -> None:
        """A subtheme never starts under a theme that has ended (whose end history would
        then contradict an active subtheme). A parent folder with no start history (made
        before the histories, or by hand) is taken, as its folder alone."""
        entries = self._entries()
        ends = [e for e in entries if e.kind == "end"]
        start = next(
            (e for e in entries if e.kind == "start" and (e.heartbeat_id, e.part) == parent),
            None,
        )
        if start is not None and is_ended(start, ends):
            raise ToolError(
                "parent_theme_not_found",
                f"stage 4/5 (theme directory) failed: the parent theme {parent[0]}_{parent[1]} "
                "has ended; a subtheme starts under an active theme (`theme status` lists "
                "them). Nothing was changed.",
            )

    def _plan(
        self, inp: StartThemeInput, hb: str, part: str, parent: tuple[str, str] | None
    ) -> StartPlan:
        ws = self.ws
        dir_parts = naming.theme_dir_parts(hb, part, *(parent or (None, None)))
        theme_dir = ws.artifacts.joinpath(*dir_parts)
        if parent is not None:
            parent_dir = ws.artifacts / dir_parts[0]
            if ws.kind(parent_dir) != "folder":
                raise ToolError(
                    "parent_theme_not_found",
                    f"stage 4/5 (theme directory) failed: the parent theme directory "
                    f"{ws.rel(parent_dir)} does not exist; check parentThemeStartId and "
                    "parentThemeDirectoryPart (`theme status` lists the active themes). "
                    "Nothing was changed.",
                )
        if ws.exists(theme_dir):
            raise ToolError(
                "theme_directory_exists",
                f"stage 4/5 (theme directory) failed: {ws.rel(theme_dir)} already exists and "
                "was left untouched; choose another themeDirectoryPart or check it by hand. "
                "Nothing was changed.",
            )
        wanted = [ws.artifacts, ws.histories]
        if parent is not None:
            wanted.append(theme_dir.parent)
        wanted += [theme_dir, theme_dir / "histories"]
        history = ws.histories / naming.start_history_name(hb, part)
        return StartPlan(
            heartbeatId=hb,
            target=inp.target_filename,
            processed=None
            if inp.target_filename is None
            else self._free_processed_name(inp.target_filename),
            historyFile=ws.rel(history),
            historyTemp=ws.rel(history.with_name(f".{history.name}.tmp")),
            themeDirectory=ws.rel(theme_dir),
            createDirs=[ws.rel(d) for d in wanted if not ws.exists(d)],
        )

    def _free_processed_name(self, name: str) -> str:
        """The first of :func:`naming.processed_names` not taken in themebox (the lock is
        held, so it is still free at stage 5)."""
        return next(
            n for n in naming.processed_names(name) if not self.ws.exists(self.ws.themebox / n)
        )

    def _check_target(self, name: str) -> None:
        path = self.ws.join(self.ws.themebox, name, "target_filename")
        if name.startswith(naming.PROCESSED_PREFIX):
            raise ToolError(
                "theme_already_processed",
                f"stage 1/5 (target) failed: themebox/{name} is already processed; call "
                "preview_next_theme for the next candidate. Nothing was changed.",
            )
        kind = self.ws.kind(path)
        if kind == "link":
            raise _fs.link_error(path)
        if kind != "file":
            raise ToolError(
                "theme_file_not_found",
                f"stage 1/5 (target) failed: themebox/{name} was not found (or was already "
                "processed); call preview_next_theme for the next candidate. Nothing was "
                "changed.",
            )

    def start(self, inp: StartThemeInput) -> StartThemeOutput:
        """Start a theme: the seed's five stages, all or nothing."""
        part, parent, warnings = _names(inp)
        if inp.target_filename is not None:
            self.ws.join(self.ws.themebox, inp.target_filename, "target_filename")
        read_heartbeat_id(self.ws)  # fail fast, before the lock creates anything
        with self.ws.locked():
            repaired = repair(self.ws, self.ops)
            hb = read_heartbeat_id(self.ws)
            if inp.target_filename is not None:
                with _stage(1):
                    self._check_target(inp.target_filename)
            with _stage(2):
                self._check_cooldown(hb, "stage 2/5 (cooldown) failed: ")
            with _stage(4):  # its checks; stages 3-5 run in execute_start
                if parent is not None:
                    self._check_parent_not_ended(parent)
                plan = self._plan(inp, hb, part, parent)
            text = naming.render_start_history(
                name=inp.themeName,
                start_id=hb,
                part=part,
                directory=plan.themeDirectory,
                reason=inp.reason,
                activity=inp.activityContent,
                parent=parent,
            )
            execute_start(self.ws, plan, text, self.ops)
        kind = "subtheme" if parent else "theme"
        log.info("theme started", theme_start_id=hb, part=part, subtheme=parent is not None)
        msg = [
            f"Started {kind} {inp.themeName!r}: THEME_START_ID {hb}.",
            f"History: {plan.historyFile}",
            f"Theme directory: {plan.themeDirectory}/",
        ]
        if parent:
            msg.append(f"Parent theme: {parent[0]}_{parent[1]}")
        if plan.processed:
            msg.append(f"themebox/{plan.target} is now themebox/{plan.processed}")
            if plan.target and plan.processed != naming.PROCESSED_PREFIX + plan.target:
                warnings.append(naming.reused_note("themebox", plan.target, plan.processed))
                log.warning("theme name reused", target=plan.target, processed=plan.processed)
        msg.extend(f"warning: {w}" for w in warnings)
        return StartThemeOutput(
            message="\n".join(msg),
            repaired=repaired,
            themeStartId=hb,
            themeDirectoryPart=part,
            historyFile=plan.historyFile,
            themeDirectory=plan.themeDirectory,
            parentThemeStartId=parent[0] if parent else None,
            processedFile=f"themebox/{plan.processed}" if plan.processed else None,
            warnings=warnings,
        )

    # --- end --------------------------------------------------------------------------

    def end(self, inp: EndThemeInput) -> EndThemeOutput:
        """End a started theme: one end history file, refused in the start's heartbeat."""
        part, parent, warnings = _names(inp)
        read_heartbeat_id(self.ws)  # fail fast, before the lock creates anything
        with self.ws.locked():
            repaired = repair(self.ws, self.ops)
            hb = read_heartbeat_id(self.ws)
            self._check_cooldown(hb, "")
            entries = self._entries()
            start_name = naming.start_history_name(inp.themeStartId, part)
            start = next((e for e in entries if e.file == start_name), None)
            if start is None:
                raise ToolError(
                    "theme_not_started",
                    f"no start history artifacts/theme_histories/{start_name}: check "
                    "themeStartId and themeDirectoryPart (`theme status` lists active themes)",
                )
            active = active_themes(entries)
            if not any(
                t.themeStartId == inp.themeStartId and t.themeDirectoryPart == part for t in active
            ):
                raise ToolError(
                    "theme_already_ended", f"the theme {inp.themeStartId}_{part} has already ended"
                )
            parent = _recorded_parent(f"{inp.themeStartId}_{part}", parent_of(start), parent)
            open_subs = [
                t
                for t in active
                if t.parentThemeStartId == inp.themeStartId and t.parentThemeDirectoryPart == part
            ]
            if open_subs:
                names = ", ".join(f"{t.themeStartId}_{t.themeDirectoryPart}" for t in open_subs)
                raise ToolError(
                    "subthemes_active",
                    f"end the active subthemes first ({names}), one per heartbeat",
                )
            directory = start.directory or "/".join(
                ("artifacts", *naming.theme_dir_parts(inp.themeStartId, part, *(parent or ())))
            )
            if not self._is_theme_dir(directory):
                warnings.append(f"the theme directory {directory}/ does not exist")
            history = self.ws.histories / naming.end_history_name(hb, part)
            text = naming.render_end_history(
                name=inp.themeName,
                start_id=inp.themeStartId,
                end_id=hb,
                part=part,
                directory=directory,
                reason=inp.reason,
                achievements=inp.achievements,
                parent=parent,
            )
            try:
                _fs.write_new_file(history, text, root=self.ws.trusted)
            except OSError as exc:
                raise ToolError(
                    "history_write_failed",
                    f"could not create the end history file {self.ws.rel(history)}: "
                    f"{exc}. Nothing was changed; you can retry.",
                ) from exc
        log.info("theme ended", theme_start_id=inp.themeStartId, theme_end_id=hb, part=part)
        msg = [
            f"Ended {'subtheme' if parent else 'theme'} {inp.themeName!r}: "
            f"{inp.themeStartId} -> {hb}.",
            f"History: {self.ws.rel(history)}",
        ]
        if parent:
            msg.append(f"Returning to the parent theme {parent[0]}_{parent[1]}.")
        msg.append(
            "Write the log of this activity and finish this turn. A new theme may start "
            f"only at a later heartbeat (after {hb})."
        )
        msg.extend(f"warning: {w}" for w in warnings)
        return EndThemeOutput(
            message="\n".join(msg),
            repaired=repaired,
            themeStartId=inp.themeStartId,
            themeEndId=hb,
            themeDirectoryPart=part,
            historyFile=self.ws.rel(history),
            parentThemeStartId=parent[0] if parent else None,
            warnings=warnings,
        )

    def _is_theme_dir(self, directory: str) -> bool:
        """Whether the directory a start history names is a folder of this workspace.

        The name comes from a file an agent can edit: it is checked like input, and
        anything that is not a plain relative path inside the workspace is not one.
        """
        parts = directory.split("/")
        try:
            for part in parts:
                check_name(part, "THEME_DIRECTORY")
            return self.ws.kind(self.ws.root.joinpath(*parts)) == "folder"
        except PathError:
            return False

    # --- feedbackbox ------------------------------------------------------------------

    def process_feedback(self, kind: str, *, interrupts_only: bool = False) -> FeedbackOutput:
        """Take the first unprocessed feedback item by name and mark it ``processed.``."""
        return process_feedback(self.ws, self.ops, kind, interrupts_only=interrupts_only)


@contextmanager
def _stage(number: int) -> Iterator[None]:
    """An error raised inside is one of start stage ``number``: its message starts with
    the stage (``stage 2/5 (cooldown) failed: ``) as the stages' own errors do, and its
    ``details`` get the ``stage`` and ``stageName`` (other keys kept)."""
    try:
        yield
    except LoopError as exc:
        said = f"stage {number}/5 ({STAGES[number]}) failed: "
        if not exc.message.startswith(f"stage {number}/5"):  # a store's error, say
            exc.message = said + exc.message
            exc.args = (exc.message,)
        where = {"stage": number, "stageName": STAGES[number]}
        if exc.details is None:
            exc.details = where
        elif isinstance(exc.details, dict):
            exc.details = {**where, **exc.details}
        raise


def _skipped_lines(skipped: list[SkippedItem]) -> list[str]:
    return [f"skipped {item.file}: {item.reason}" for item in skipped]


def _sanitize_warnings(
    raw: str, part: str, raw_parent: str | None, parent: tuple[str, str] | None
) -> list[str]:
    out = []
    if raw != part:
        out.append(f"themeDirectoryPart {raw!r} was changed to {part!r} (use [a-z0-9_])")
    if parent is not None and raw_parent is not None and raw_parent != parent[1]:
        out.append(f"parentThemeDirectoryPart {raw_parent!r} was changed to {parent[1]!r}")
    return out


def _recorded_parent(
    theme: str, recorded: tuple[str, str] | None, given: tuple[str, str] | None
) -> tuple[str, str] | None:
    """The parent an end history names: the one the start history recorded. Left out,
    it is taken from there; given, it must be that one (an end never contradicts its
    start: a main theme ended as a subtheme, or a subtheme under another parent)."""
    if given is None or given == recorded:
        return recorded
    if recorded is None:
        why = f"the theme {theme} is a main theme (its start history names no parent)"
        fix = "end it without parentThemeStartId and parentThemeDirectoryPart"
    else:
        why = f"the theme {theme} is a subtheme of {recorded[0]}_{recorded[1]} (its start history)"
        fix = (
            f"give parentThemeStartId {recorded[0]} and parentThemeDirectoryPart "
            f"{recorded[1]}, or leave both out"
        )
    message = f"{why}, not of {given[0]}_{given[1]}: {fix}"
    raise ToolError(
        "invalid_input", message, details=[{"field": "parentThemeStartId", "message": message}]
    )


def _names(
    inp: StartThemeInput | EndThemeInput,
) -> tuple[str, tuple[str, str] | None, list[str]]:
    """The sanitised directory part, the parent (start ID, part) of a subtheme, and the
    warnings for any name that sanitising changed."""
    part = naming.sanitize_part(inp.themeDirectoryPart)
    parent = None
    if inp.parentThemeStartId is not None and inp.parentThemeDirectoryPart is not None:
        parent = (
            inp.parentThemeStartId,
            naming.sanitize_part(inp.parentThemeDirectoryPart, "parentThemeDirectoryPart"),
        )
    warnings = _sanitize_warnings(
        inp.themeDirectoryPart, part, inp.parentThemeDirectoryPart, parent
    )
    return part, parent, warnings
