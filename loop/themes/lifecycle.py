"""``start_theme`` as all or nothing: a plan, an intent file, stages, and a rollback.

The plan is made under the workspace lock and lists only paths that do not exist
yet. It is written to ``stats/start_theme.intent.json`` before anything else is
created and removed only when the start succeeded or was fully undone. A start
that was killed (``kill -9``) leaves the intent behind; the next theme call finds
it and rolls back, in reverse order, whatever of the plan is on disk. Because the
plan only names paths that were absent, a rollback never touches what existed before.

The intent is a pointer read from disk, so it is checked like input: every path in it
must be a plain relative path inside the workspace, and each step reaches it without
following links. Where a link (or a file) now stands in the way, nothing this start
created can be there, so the step has nothing to undo. A name that cannot exist (too
long) is absent too: no intent left by a crash blocks the theme tools for good.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from loop._fs import read_json, remove_file
from loop._log import get_logger
from loop._names import COMPONENT_MAX_BYTES, check_name
from loop.errors import InputError, PathError, StoreError, ToolError
from loop.themes.naming import is_processed_name_of
from loop.themes.ops import Operations
from loop.themes.workspace import Workspace

__all__ = ["StartPlan", "execute_start", "repair", "rollback"]

log = get_logger(__name__)

# Created before the history file (stage 3); the other planned directories are stage 4.
_HISTORY_DIRS = frozenset({"artifacts", "artifacts/theme_histories"})  # HISTORIES
STAGES = {
    1: "target",
    2: "cooldown",
    3: "history file",
    4: "theme directory",
    5: "mark processed",
}
HISTORIES = "artifacts/theme_histories"
_HISTORY = re.compile(HISTORIES + r"/(?P<id>[0-9]{14})_start_(?P<part>[a-z0-9_]+)\.md")
_THEME_DIR = re.compile(
    r"artifacts/(?:(?P<parent>[0-9]{14}_[a-z0-9_]+)/subthemes/)?(?P<own>[0-9]{14}_[a-z0-9_]+)"
)


class StartPlan(BaseModel):
    """What one ``start_theme`` will create; also the intent file's schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    heartbeatId: str
    target: str | None = None
    processed: str | None = None
    historyFile: str
    historyTemp: str
    themeDirectory: str
    createDirs: list[str]

    @field_validator("target", "processed")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return None if value is None else _plain(value, "a themebox name")

    @field_validator("historyFile", "historyTemp", "themeDirectory")
    @classmethod
    def _relative(cls, value: str) -> str:
        return _check_rel(value)

    @field_validator("createDirs")
    @classmethod
    def _all_relative(cls, value: list[str]) -> list[str]:
        return [_check_rel(v) for v in value]

    @model_validator(mode="after")
    def _what_a_start_creates(self) -> StartPlan:
        """Only what a start at ``heartbeatId`` creates: a forged intent cannot point the
        rollback at another file (it removes nothing but that start's own paths)."""
        history = _HISTORY.fullmatch(self.historyFile)
        if history is None or history["id"] != self.heartbeatId:
            raise ValueError(f"historyFile is not this start's history: {self.historyFile!r}")
        name = self.historyFile.rsplit("/", 1)[1]
        if self.historyTemp != f"{HISTORIES}/.{name}.tmp":
            raise ValueError(f"historyTemp is not the history's temp file: {self.historyTemp!r}")
        own = f"{self.heartbeatId}_{history['part']}"
        theme = _THEME_DIR.fullmatch(self.themeDirectory)
        if theme is None or theme["own"] != own:
            raise ValueError(f"themeDirectory is not this start's: {self.themeDirectory!r}")
        allowed = {"artifacts", HISTORIES, self.themeDirectory, f"{self.themeDirectory}/histories"}
        if theme["parent"]:
            allowed.add(f"artifacts/{theme['parent']}/subthemes")
        if not set(self.createDirs) <= allowed:
            raise ValueError(f"createDirs names folders a start never creates: {self.createDirs}")
        if (self.target is None) != (self.processed is None) or (
            self.target is not None
            and self.processed is not None
            and not is_processed_name_of(self.target, self.processed)
        ):
            raise ValueError(f"processed is not the target's processed name: {self.processed!r}")
        return self


def _check_rel(rel: str) -> str:
    """A path of the plan: plain names joined by ``/``, inside the workspace."""
    for part in rel.split("/"):
        _plain(part, "a path")
    return rel


def _plain(name: str, what: str) -> str:
    """A name of the plan. The plan's names are made from input names (at most 200
    bytes, checked on input) with the start's prefixes and suffixes (``processed.``, a
    heartbeat id, ``.tmp``), so they are held to what a file system takes."""
    try:
        return check_name(name, what, max_bytes=COMPONENT_MAX_BYTES)
    except PathError as exc:  # pydantic reports a ValueError as an invalid field
        raise ValueError(exc.message) from exc


def _path(ws: Workspace, rel: str) -> Path:
    return ws.root.joinpath(*_check_rel(rel).split("/"))


def _kind(ws: Workspace, path: Path, failures: list[str]) -> str | None:
    """What is at ``path``, for a clean-up step: ``None`` when nothing of this start is.

    A link on the way means nothing this start created is reachable there. An error
    that says nothing about the path (EIO...) is a failure: the intent is kept.
    """
    try:
        return ws.kind(path)
    except PathError:
        log.warning("theme clean-up: a link is in the way, nothing to undo", path=str(path))
        return None
    except (OSError, StoreError) as exc:
        failures.append(f"check {ws.rel(path)} ({exc})")
        return None


def _step(
    failures: list[str], what: str, path: Path, ws: Workspace, action: Callable[[], None]
) -> None:
    try:
        action()
    except OSError as exc:
        failures.append(f"{what} {ws.rel(path)} ({exc.strerror or exc})")
        log.warning("theme clean-up step failed", step=what, path=str(path), error=str(exc))


def _remove_dirs(ws: Workspace, rels: list[str], ops: Operations, failures: list[str]) -> None:
    for rel in reversed(rels):
        d = _path(ws, rel)
        if _kind(ws, d, failures) == "folder":
            _step(failures, "remove directory", d, ws, functools.partial(ops.remove_dir, d))


def rollback(
    ws: Workspace, plan: StartPlan, ops: Operations, *, keep_history: bool = False
) -> list[str]:
    """Undo whatever of ``plan`` is on disk, in reverse order; return what failed.

    The intent file is removed only when every step succeeded, so a failed clean-up is
    retried by the next theme call.
    """
    failures: list[str] = []
    if plan.target and plan.processed:
        src = _path(ws, f"themebox/{plan.target}")
        dst = _path(ws, f"themebox/{plan.processed}")
        if _kind(ws, dst, failures) is not None and _kind(ws, src, failures) is None:
            _step(failures, "rename back", dst, ws, lambda: ops.unmark_processed(dst, src))
    # Reverse of creation: theme directories, then the history file, then the folders
    # that hold the history (created before it in stage 3).
    theme_dirs = [r for r in plan.createDirs if r not in _HISTORY_DIRS]
    history_dirs = [r for r in plan.createDirs if r in _HISTORY_DIRS]
    _remove_dirs(ws, theme_dirs, ops, failures)
    history = _path(ws, plan.historyFile)
    if _kind(ws, history, failures) is not None and not keep_history:
        _step(failures, "remove history file", history, ws, lambda: ops.remove_history(history))
    temp = _path(ws, plan.historyTemp)
    if _kind(ws, temp, failures) is not None:
        _step(failures, "remove temp file", temp, ws, lambda: ops.remove_history_temp(temp))
    _remove_dirs(ws, history_dirs, ops, failures)
    if not failures and _kind(ws, ws.intent_file, failures) is not None:
        _step(
            failures,
            "remove intent file",
            ws.intent_file,
            ws,
            lambda: ops.remove_intent(ws.intent_file),
        )
    elif failures:
        failures.append(
            f"the intent file {ws.rel(ws.intent_file)} is kept so the next "
            "theme call retries the clean-up"
        )
    return failures


def _stage_error(
    stage: int, code: str, what: str, exc: BaseException, failures: list[str], *, created: bool
) -> ToolError:
    head = f"stage {stage}/5 ({STAGES[stage]}) failed: {what}: {exc}."
    if failures:
        tail = " Clean-up failed; check by hand: " + "; ".join(failures) + "."
        code = "cleanup_failed"
    elif created:
        tail = " Everything this call created was removed; the workspace is as before."
    else:
        tail = " Nothing was changed; you can retry."
    return ToolError(
        code,
        head + tail,
        details={
            "stage": stage,
            "stageName": STAGES[stage],
            "cause": str(exc),
            "manualCheck": failures,
        },
    )


def execute_start(ws: Workspace, plan: StartPlan, history_text: str, ops: Operations) -> None:
    """Run stages 3-5 of a planned start; on any failure undo everything and raise.

    Raises:
        ToolError: names the stage and the cause; ``cleanup_failed`` lists what to check.
    """
    try:
        ops.write_intent(ws.intent_file, plan.model_dump())
    except OSError as exc:
        with contextlib.suppress(OSError, PathError, StoreError):
            remove_file(ws.intent_file, root=ws.trusted, missing_ok=True)
        raise _stage_error(
            3, "history_write_failed", "could not record the start intent", exc, [], created=False
        ) from exc
    history = _path(ws, plan.historyFile)
    stage = 3
    try:
        for rel in plan.createDirs:
            if rel in _HISTORY_DIRS:
                ops.make_dir(_path(ws, rel))
        try:
            ops.write_history(history, history_text)
        except FileExistsError as exc:
            failures = rollback(ws, plan, ops, keep_history=True)
            raise _stage_error(
                3,
                "history_write_failed",
                f"{plan.historyFile} already exists",
                exc,
                failures,
                created=True,
            ) from exc
        stage = 4
        for rel in plan.createDirs:
            if rel not in _HISTORY_DIRS:
                ops.make_dir(_path(ws, rel))
        stage = 5
        if plan.target and plan.processed:
            ops.mark_processed(
                _path(ws, f"themebox/{plan.target}"), _path(ws, f"themebox/{plan.processed}")
            )
    except (OSError, InputError) as exc:  # an I/O error, or a link put in the way meanwhile
        failures = rollback(ws, plan, ops)
        what = {
            3: f"could not create the theme history file {plan.historyFile}",
            4: f"could not create the theme directory {plan.themeDirectory}",
            5: f"could not rename themebox/{plan.target} to {plan.processed}",
        }[stage]
        code = {3: "history_write_failed", 4: "theme_directory_failed", 5: "mark_processed_failed"}[
            stage
        ]
        raise _stage_error(stage, code, what, exc, failures, created=True) from exc
    try:
        ops.remove_intent(ws.intent_file)
    except OSError as exc:  # the start is complete; only the marker is left over
        log.warning("could not remove the start intent", error=str(exc))
        raise ToolError(
            "cleanup_failed",
            f"the theme was started but {ws.rel(ws.intent_file)} could not be removed "
            f"({exc}); remove it by hand, or the next theme call will undo this start",
        ) from exc


def repair(ws: Workspace, ops: Operations) -> list[str]:
    """Undo a start that was killed half-way; return what was repaired (empty if none).

    Call with the workspace lock held.

    Raises:
        StoreError: the intent file cannot be parsed (it names the file).
        ToolError: ``cleanup_failed`` when part of the repair failed.
    """
    if not ws.exists(ws.intent_file):
        return []
    try:
        plan = StartPlan.model_validate(read_json(ws.intent_file, root=ws.trusted))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        reason = first["msg"].removeprefix("Value error, ")
        raise StoreError(
            f"not a start intent ({f'{where}: ' if where else ''}{reason}); "
            "hatloop did not write it: check it and remove it",
            file=ws.intent_file,
        ) from exc
    present = [
        rel
        for rel in [plan.historyFile, *plan.createDirs]
        if _kind(ws, _path(ws, rel), []) is not None
    ]
    failures = rollback(ws, plan, ops)
    if failures:
        raise ToolError(
            "cleanup_failed",
            "an interrupted start_theme could not be fully undone; check by hand: "
            + "; ".join(failures),
            details={"manualCheck": failures},
        )
    note = f"repaired an interrupted start_theme at heartbeat {plan.heartbeatId}: removed " + (
        ", ".join(present) if present else "nothing but its intent file"
    )
    if plan.target and plan.processed:
        note += f"; themebox/{plan.target} is unprocessed again"
    log.info("theme start repaired", heartbeat_id=plan.heartbeatId, removed=present)
    return [note]
