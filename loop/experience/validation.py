"""``validate_experience``: check an experience directory at four levels (seed 002).

* syntax: every JSON file parses (UTF-8, valid JSON);
* schema: manifest.json and conversations_NNN.json match their models (strict types),
  thoughts.json is a JSON object;
* semantic: each batch agrees with itself and its file name, batches run 1..N,
  the size limits hold;
* cross-file: the manifest names files that exist; a ``total_conversations`` that is
  not the sum of the batches is a warning (the directory stays valid).

Every error names the file and the field (a dotted path such as
``conversations.3.reasoning``); the flat ``errors`` list reads ``file: field: message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from loop import _fs, _json
from loop.errors import InputError, ToolError
from loop.experience.layout import (
    BATCH_RE,
    CONVERSATION_BATCH_LIMIT,
    DIR_PREFIX,
    MANIFEST,
    MAX_DIRECTORY_BYTES,
    MAX_FILE_BYTES,
    SUMMARY,
    THOUGHTS,
    DirState,
    scan,
)
from loop.experience.models import DirectoryValidationResult, FieldIssue, FileValidation, Level
from loop.experience.schemas import ConversationBatch, Manifest

__all__ = ["validate_directory"]

_MISSING = object()


@dataclass
class _Check:
    """What the validation found so far."""

    files: dict[str, FileValidation] = field(default_factory=dict)
    dir_errors: list[tuple[Level, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def file(self, name: str) -> FileValidation:
        if name not in self.files:
            self.files[name] = FileValidation(file=name, valid=True)
        return self.files[name]

    def error(self, name: str, level: Level, where: str, message: str, value: Any = None) -> None:
        fv = self.file(name)
        fv.errors.append(FieldIssue(field=where, message=message, value=value, level=level))
        fv.valid = False

    def warn(self, name: str, message: str) -> None:
        self.file(name).warnings.append(message)

    def levels(self, *, only: set[str] | None = None, skip: set[str] | None = None) -> set[str]:
        out: set[str] = set()
        for name, fv in self.files.items():
            if (only is None or name in only) and (skip is None or name not in skip):
                out.update(e.level for e in fv.errors)
        return out


def _load(directory: Path, name: str, check: _Check) -> Any:
    """Parse one file; a syntax error is recorded and yields ``_MISSING``."""
    check.file(name)
    path = directory / name
    try:  # from the directory itself: a link put in a file's place is never read
        raw = _fs.read_bytes(path, root=directory)
    except (OSError, InputError) as exc:
        reason = exc.message if isinstance(exc, InputError) else exc.strerror or str(exc)
        check.error(name, "syntax", "(file)", f"cannot read: {reason}")
        return _MISSING
    size = len(raw)
    if size > MAX_FILE_BYTES:
        check.error(
            name,
            "limits",
            "(file)",
            f"{size} bytes is over the {MAX_FILE_BYTES}-byte (10 MB) file limit",
            size,
        )
    try:
        return _json.loads(raw.decode("utf-8"), max_depth=_json.MAX_DEPTH)
    except UnicodeDecodeError as exc:
        check.error(name, "syntax", "(file)", f"not UTF-8 text ({exc.reason})")
    except ValueError as exc:
        check.error(name, "syntax", "(file)", f"invalid JSON: {_json.error_text(exc)}")
    return _MISSING


def _schema(name: str, model: type[BaseModel], data: Any, check: _Check) -> BaseModel | None:
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "(root)"
            value = err.get("input") if err["type"] != "missing" else None
            if isinstance(value, dict | list):  # keep the report small: name, do not copy
                value = None
            check.error(name, "schema", where, err["msg"], value)
        return None


def _check_batch(
    name: str, number: int, batch: ConversationBatch, start: int, check: _Check
) -> None:
    info, count = batch.batch_info, len(batch.conversations)
    if info.batch_number != number:
        check.error(
            name,
            "semantic",
            "batch_info.batch_number",
            f"says batch {info.batch_number} but the file is batch {number}",
            info.batch_number,
        )
    if count > CONVERSATION_BATCH_LIMIT:
        check.error(
            name,
            "limits",
            "conversations",
            f"{count} conversations; at most {CONVERSATION_BATCH_LIMIT} per batch",
            count,
        )
    if info.count != count:
        check.warn(name, f"batch_info.count is {info.count} but there are {count} conversations")
    if info.start_index is not None and info.start_index != start:
        check.warn(name, f"batch_info.start_index is {info.start_index}; expected {start}")
    if info.end_index is not None and count and info.end_index != start + count - 1:
        check.warn(name, f"batch_info.end_index is {info.end_index}; expected {start + count - 1}")
    for i, conv in enumerate(batch.conversations):
        for key in ("user_input", "ai_response", "reasoning"):
            if not getattr(conv, key).strip():
                check.warn(name, f"conversations.{i}.{key} is empty")


def _check_batches(directory: Path, state: DirState, check: _Check) -> dict[str, int]:
    """Validate every batch on disk; return the conversation count of each valid one."""
    counts: dict[str, int] = {}
    start = 1
    numbers = list(state.batches)
    if numbers != list(range(1, len(numbers) + 1)):
        gaps = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
        check.dir_errors.append(
            (
                "semantic",
                "conversation batches are not consecutive: "
                f"missing {', '.join(f'conversations_{n:03d}.json' for n in gaps)}",
            )
        )
    for number, name in state.batches.items():
        data = _load(directory, name, check)
        if data is _MISSING:
            continue
        batch = _schema(name, ConversationBatch, data, check)
        if isinstance(batch, ConversationBatch):
            _check_batch(name, number, batch, start, check)
            counts[name] = len(batch.conversations)
            start += len(batch.conversations)
    return counts


def _check_thoughts(directory: Path, check: _Check) -> None:
    data = _load(directory, THOUGHTS, check)
    if data is _MISSING:
        return
    if data is None:
        check.error(THOUGHTS, "schema", "(root)", "thoughts.json is null")
    elif not isinstance(data, dict):
        check.error(
            THOUGHTS, "schema", "(root)", f"must be a JSON object, not {type(data).__name__}"
        )
    elif not data:
        check.warn(THOUGHTS, "thoughts.json is an empty object")


def _check_cross(
    manifest: Manifest, state: DirState, counts: dict[str, int], directory: Path, check: _Check
) -> None:
    listed = manifest.files.conversations
    for i, name in enumerate(listed):
        if not BATCH_RE.fullmatch(name):
            check.error(
                MANIFEST,
                "cross_file",
                f"files.conversations.{i}",
                "not a conversations_NNN.json file name",
                name,
            )
        elif name not in state.files:
            check.missing.append(name)
    if manifest.files.thoughts:
        if manifest.files.thoughts != THOUGHTS:
            check.error(
                MANIFEST,
                "cross_file",
                "files.thoughts",
                f"must be {THOUGHTS!r} or empty",
                manifest.files.thoughts,
            )
        elif THOUGHTS not in state.files:
            check.missing.append(THOUGHTS)
    else:
        check.warn(MANIFEST, "files.thoughts is empty: the experience has no thoughts.json")
        if THOUGHTS in state.files:
            check.warn(MANIFEST, "thoughts.json exists but files.thoughts does not name it")
    for name in state.batches.values():
        if name not in listed:
            check.warn(MANIFEST, f"{name} is in the directory but not in files.conversations")
    if all(name in counts for name in listed):
        total = sum(counts[name] for name in listed)
        if total != manifest.total_conversations:  # a warning, as in the original
            check.warn(
                MANIFEST,
                f"total_conversations says {manifest.total_conversations} but the batches "
                f"hold {total}",
            )
    expected_dir = DIR_PREFIX + manifest.session_id if manifest.session_id else None
    if expected_dir and directory.name.startswith(DIR_PREFIX) and directory.name != expected_dir:
        check.warn(
            MANIFEST,
            f"session_id {manifest.session_id!r} does not match the "
            f"directory name {directory.name!r}",
        )


def validate_directory(directory: Path) -> DirectoryValidationResult:
    """Validate one experience directory at every level.

    Raises:
        ToolError: ``directory_not_found`` when ``directory`` is not a directory.
    """
    if not directory.is_dir():  # resolved by the caller: no link is left in it
        raise ToolError("directory_not_found", f"not a directory: {directory}")
    state, check = scan(directory, root=directory), _Check()
    if state.total_bytes > MAX_DIRECTORY_BYTES:
        check.dir_errors.append(
            (
                "limits",
                f"the directory holds {state.total_bytes} bytes; "
                f"the limit is {MAX_DIRECTORY_BYTES} (100 MB)",
            )
        )
    manifest: Manifest | None = None
    if MANIFEST in state.files:
        data = _load(directory, MANIFEST, check)
        if data is not _MISSING:
            loaded = _schema(MANIFEST, Manifest, data, check)
            manifest = loaded if isinstance(loaded, Manifest) else None
    else:
        check.missing.append(MANIFEST)
    counts = _check_batches(directory, state, check)
    if THOUGHTS in state.files:
        _check_thoughts(directory, check)
    if manifest is not None:
        _check_cross(manifest, state, counts, directory, check)
        if SUMMARY in state.files:
            check.warnings.append(f"{SUMMARY} is still present: finalize again to remove it")
    known = {MANIFEST, THOUGHTS, SUMMARY, *state.batches.values()}
    for name in state.files:
        if name not in known:
            check.warnings.append(f"unexpected file {name}")
    return _result(directory, check)


def _result(directory: Path, check: _Check) -> DirectoryValidationResult:
    manifest_levels = (
        {e.level for e in check.file(MANIFEST).errors} if MANIFEST in check.files else set()
    )
    other_levels = check.levels(skip={MANIFEST})
    dir_levels = {level for level, _ in check.dir_errors}
    manifest_valid = MANIFEST not in check.missing and not (manifest_levels - {"cross_file"})
    semantic_valid = not other_levels and not dir_levels
    cross_file_valid = "cross_file" not in manifest_levels and not check.missing
    errors = [
        f"{fv.file}: {e.field}: {e.message}" for fv in check.files.values() for e in fv.errors
    ]
    errors += [message for _, message in check.dir_errors]
    errors += [f"{name}: missing" for name in check.missing]
    warnings = [f"{fv.file}: {w}" for fv in check.files.values() for w in fv.warnings]
    warnings += check.warnings
    return DirectoryValidationResult(
        valid=not errors,
        directory_path=str(directory),
        manifest_valid=manifest_valid,
        semantic_valid=semantic_valid,
        cross_file_valid=cross_file_valid,
        file_validations=list(check.files.values()),
        missing_files=check.missing,
        errors=errors,
        warnings=warnings,
    )
