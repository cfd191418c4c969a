"""The export tools: status, init, conversations, thoughts, finalize (seeds 000 and 002).

Each call is complete in itself: it derives the state from the directory, decides,
and writes one file atomically under the directory's lock (``.export.lock``). A
killed export leaves only whole files, and :func:`export_status` says where to go on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loop import _fs
from loop._fs import json_text
from loop._log import get_logger
from loop.errors import StoreError, ToolError
from loop.experience.layout import (
    CONVERSATION_BATCH_LIMIT,
    MANIFEST,
    MAX_DIRECTORY_BYTES,
    MAX_FILE_BYTES,
    SUMMARY,
    THOUGHTS,
    DirState,
    batch_file_name,
    check_session_id,
    derive_status,
    experience_dir,
    scan,
    trusted_root,
)
from loop.experience.models import (
    ConversationsInput,
    ConversationsOutput,
    FinalizeOutput,
    InitInput,
    InitOutput,
    SessionInput,
    StatusOutput,
    ThoughtsInput,
    ThoughtsOutput,
)
from loop.experience.schemas import (
    MCP_VERSION,
    ConversationBatch,
    Manifest,
    ManifestFiles,
    SummaryFile,
)
from loop.tools.base import ToolContext

__all__ = [
    "encode",
    "export_conversations",
    "export_finalize",
    "export_init",
    "export_status",
    "export_thoughts",
]

log = get_logger(__name__)

EXPECTED_FILES = ["conversations_001.json", THOUGHTS, MANIFEST]


def encode(value: Any) -> bytes:
    """The bytes written for a JSON file (pretty, UTF-8, trailing newline)."""
    return json_text(value).encode("utf-8")


def _now(ctx: ToolContext) -> str:
    """The call's time (a replay gives the same), as the files write it."""
    return ctx.now().isoformat(timespec="seconds").replace("+00:00", "Z")


def _new_session_id(ctx: ToolContext, summary: Any, metadata: Any) -> str:
    """The id of a new export: derived from the call inside a session (so a replay, or
    the re-run of an interrupted iteration, finds the same one), random outside.

    A derived id already taken by another export gives way to the next candidate; one
    taken by the same init is the same export (a repeat).
    """
    root = trusted_root(ctx)
    for attempt in range(_ID_ATTEMPTS):
        session_id = ctx.new_id("experience", attempt)
        directory = experience_dir(ctx, session_id)
        state = scan(directory, root=root)
        if not state.files:
            return session_id
        if SUMMARY in state.files:
            existing = _read(directory / SUMMARY, root)
            if (
                isinstance(existing, dict)
                and existing.get("summary") == summary
                and existing.get("metadata") == metadata
            ):
                return session_id
    raise ToolError("session_exists", "no free export session id: give a session_id")


_ID_ATTEMPTS = 100


@contextmanager
def _locked(directory: Path, root: Path) -> Iterator[DirState]:
    """Hold the directory's lock and yield a listing taken inside it."""
    with _fs.file_lock(directory / ".export", root=root):
        yield scan(directory, root=root)


def _read(path: Path, root: Path) -> Any:
    """A JSON file of the export (no link followed; anything wrong names the file)."""
    return _fs.read_json(path, root=root)


def _existing_dir(ctx: ToolContext, session_id: str) -> Path:
    directory = experience_dir(ctx, session_id)
    if not scan(directory, root=trusted_root(ctx)).exists:
        raise ToolError(
            "session_not_found",
            f"no export session {session_id!r} in {ctx.experiences_base}: "
            "call export_experience_init first",
        )
    return directory


def _refuse_completed(state: DirState, session_id: str) -> None:
    if MANIFEST in state.files:
        raise ToolError(
            "export_completed",
            f"session {session_id!r} is already finalized (manifest.json exists); "
            "start a new export with another session_id",
        )


def _check_sizes(state: DirState, name: str, data: bytes, *, freed: int = 0) -> None:
    """Refuse a write over 10 MB, or one that takes the directory over 100 MB."""
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(
            "file_too_large",
            f"{name} would be {len(data)} bytes; the limit is {MAX_FILE_BYTES} bytes (10 MB) "
            "per file: send fewer or shorter items",
            details={"file": name, "size": len(data), "limit": MAX_FILE_BYTES},
        )
    total = state.total_bytes - state.size_of(name) - freed + len(data)
    if total > MAX_DIRECTORY_BYTES:
        raise ToolError(
            "directory_too_large",
            f"writing {name} would bring the experience to {total} bytes; the limit is "
            f"{MAX_DIRECTORY_BYTES} bytes (100 MB) per directory",
            details={"file": name, "directory_size": total, "limit": MAX_DIRECTORY_BYTES},
        )


def _write(path: Path, data: bytes, root: Path) -> None:
    """Replace ``path`` atomically; an OS failure (disk full...) is a ``write_failed``.

    Called under the directory's lock, so the temp file has one fixed name: a killed
    write leaves at most one, which the next write (or finalize) removes.
    """
    try:
        _fs.atomic_write(path, data, root=root, single_writer=True)
    except OSError as exc:
        raise ToolError(
            "write_failed",
            f"cannot write {path.name}: {exc.strerror or exc}",
            details={"file": path.name},
        ) from exc


def export_status(ctx: ToolContext, inp: SessionInput) -> StatusOutput:
    """``get_export_status``: derive the export's state from its files."""
    directory = experience_dir(ctx, inp.session_id)
    state = scan(directory, root=trusted_root(ctx))
    status, next_batch = derive_status(state)
    return StatusOutput(
        status=status,
        session_id=inp.session_id,
        directory_path=str(directory),
        created_files=list(state.files),
        next_batch_number=next_batch,
    )


def export_init(ctx: ToolContext, inp: InitInput) -> InitOutput:
    """``export_experience_init``: create the directory and record summary.json.

    Repeating the same init is accepted (a safe retry); a different init for an
    existing session is refused, and so is any init of a finalized one.
    """
    summary = inp.summary.model_dump(mode="json", exclude_none=True)
    session_id = (
        check_session_id(inp.session_id)
        if inp.session_id is not None
        else _new_session_id(ctx, summary, inp.metadata)
    )
    directory = experience_dir(ctx, session_id)
    root = trusted_root(ctx)
    record = {
        "summary": summary,
        "metadata": inp.metadata,
        "session_id": session_id,
        "created_at": _now(ctx),
    }
    data = encode(record)
    _check_sizes(DirState(exists=False), SUMMARY, data)
    try:
        _fs.make_folders(directory, root=root)
    except (OSError, StoreError) as exc:
        reason = exc.message if isinstance(exc, StoreError) else exc.strerror or exc
        raise ToolError("write_failed", f"cannot create {directory}: {reason}") from exc
    out = InitOutput(
        session_id=session_id, directory_path=str(directory), expected_files=EXPECTED_FILES
    )
    with _locked(directory, root) as state:
        _refuse_completed(state, session_id)
        differs = "a different summary"
        if SUMMARY in state.files:
            existing = _read(directory / SUMMARY, root)
            if isinstance(existing, dict):
                fields = [
                    key
                    for key, value in (("summary", summary), ("metadata", inp.metadata))
                    if existing.get(key) != value
                ]
                if not fields:
                    return out.model_copy(update={"resumed": True})
                differs = f"a different {' and '.join(fields)}"
        if state.files:
            status, next_batch = derive_status(state)
            raise ToolError(
                "session_exists",
                f"session {session_id!r} already exists ({status}, next batch {next_batch}) "
                f"with {differs}; resume it (get_export_status) or use another session_id",
            )
        _check_sizes(state, SUMMARY, data)
        _write(directory / SUMMARY, data, root)
    log.info("experience export started", session_id=session_id, directory=str(directory))
    return out


def _batch_length(path: Path, root: Path) -> int:
    raw = _read(path, root)
    conversations = raw.get("conversations") if isinstance(raw, dict) else None
    if not isinstance(conversations, list):
        raise ToolError(
            "invalid_batch",
            f"{path.name}: conversations: not a list",
            details={"file": path.name, "field": "conversations"},
        )
    return len(conversations)


def export_conversations(ctx: ToolContext, inp: ConversationsInput) -> ConversationsOutput:
    """``export_experience_conversations``: write one batch; numbers run 1, 2, 3...

    Resending an existing batch with the same content changes nothing
    (``already_existed``); with different content it replaces the file atomically
    (``overwritten``), as the export guide says. Later batches keep their indices.
    """
    directory = _existing_dir(ctx, inp.session_id)
    count = len(inp.conversations_batch)
    number = inp.batch_number
    if count > CONVERSATION_BATCH_LIMIT:
        raise ToolError(
            "batch_too_large",
            f"batch {number} has {count} conversations; at most {CONVERSATION_BATCH_LIMIT} "
            "per batch: split it",
            details={"count": count, "limit": CONVERSATION_BATCH_LIMIT},
        )
    name = batch_file_name(number)
    root = trusted_root(ctx)
    with _locked(directory, root) as state:
        _refuse_completed(state, inp.session_id)
        batches = state.batches
        expected = max(batches) + 1 if batches else 1
        if number not in batches and number != expected:
            raise ToolError(
                "batch_not_consecutive",
                f"batch_number {number} is out of order: the next batch is {expected}",
                details={"batch_number": number, "next_batch_number": expected},
            )
        start = 1 + sum(
            _batch_length(directory / n, root) for b, n in batches.items() if b < number
        )
        content = {
            "batch_info": {
                "batch_number": number,
                "count": count,
                "start_index": start,
                "end_index": start + count - 1,
            },
            "conversations": [c.model_dump(mode="json") for c in inp.conversations_batch],
        }
        data = encode(content)
        path = directory / name
        overwritten = number in batches
        if overwritten and _same_json(path, content, root):
            return ConversationsOutput(
                file_path=str(path),
                processed_count=count,
                batch_file_size=state.size_of(name),
                next_batch_number=expected,
                already_existed=True,
            )
        _check_sizes(state, name, data)
        _write(path, data, root)  # atomic: a reader sees the old batch or the new one
    if overwritten:
        log.info("experience batch overwritten", session_id=inp.session_id, file=name)
    return ConversationsOutput(
        file_path=str(path),
        processed_count=count,
        batch_file_size=len(data),
        next_batch_number=expected if overwritten else number + 1,
        overwritten=overwritten,
    )


def _same_json(path: Path, content: dict[str, Any], root: Path) -> bool:
    """Whether ``path`` already holds ``content`` (a file that does not parse does not)."""
    try:
        return bool(_read(path, root) == content)
    except StoreError:
        return False


def export_thoughts(ctx: ToolContext, inp: ThoughtsInput) -> ThoughtsOutput:
    """``export_experience_thoughts``: write thoughts.json (free form; the last one wins)."""
    directory = _existing_dir(ctx, inp.session_id)
    data = encode(inp.thoughts)
    root = trusted_root(ctx)
    with _locked(directory, root) as state:
        _refuse_completed(state, inp.session_id)
        _check_sizes(state, THOUGHTS, data)
        _write(directory / THOUGHTS, data, root)
    return ThoughtsOutput(file_path=str(directory / THOUGHTS), replaced=THOUGHTS in state.files)


def _file_error(code: str, name: str, exc: ValidationError) -> ToolError:
    """A tool error naming the file and the first invalid field."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    return ToolError(
        code, f"{name}: {where}: {first['msg']}", details={"file": name, "field": where}
    )


def _load_summary(directory: Path, root: Path) -> SummaryFile:
    try:
        return SummaryFile.model_validate(_read(directory / SUMMARY, root))
    except ValidationError as exc:
        raise _file_error("invalid_summary", SUMMARY, exc) from exc


def _count_batches(directory: Path, batches: dict[int, str], root: Path) -> int:
    numbers = list(batches)
    if numbers != list(range(1, len(numbers) + 1)):
        raise ToolError(
            "batch_not_consecutive",
            f"conversation batches are not 1..{len(numbers)}: found {numbers}",
        )
    total = 0
    for name in batches.values():
        try:
            batch = ConversationBatch.model_validate(_read(directory / name, root), strict=True)
        except ValidationError as exc:
            raise _file_error("invalid_batch", name, exc) from exc
        total += len(batch.conversations)
    return total


def _check_manifest(directory: Path, root: Path, total: int) -> list[str]:
    """Refuse to call a corrupt manifest finalized; return its warnings.

    A manifest that does not parse or does not match the schema is an error naming
    what is wrong; a ``total_conversations`` that is not the batches' sum is a warning,
    as validation reports it.
    """
    try:
        manifest = Manifest.model_validate(_read(directory / MANIFEST, root), strict=True)
    except StoreError as exc:
        raise ToolError(
            "invalid_manifest",
            f"{MANIFEST} exists but is corrupt: {exc.message}",
            details={"file": MANIFEST},
        ) from exc
    except ValidationError as exc:
        err = _file_error("invalid_manifest", MANIFEST, exc)
        raise ToolError(
            err.code, f"{MANIFEST} exists but is corrupt: {err.message}", err.details
        ) from exc
    if manifest.total_conversations != total:
        return [
            f"{MANIFEST}: total_conversations says {manifest.total_conversations} but the "
            f"batches hold {total}"
        ]
    return []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _build_manifest(
    loaded: SummaryFile, batches: dict[int, str], thoughts: str, total: int
) -> dict[str, Any]:
    summary, meta = loaded.summary, loaded.metadata
    manifest = Manifest(
        mcp_version=MCP_VERSION,
        ai_name=summary.ai_name,
        ai_context=summary.ai_context,
        experience_summary=summary.experience_summary,
        experience_flow=summary.experience_flow,
        files=ManifestFiles(conversations=list(batches.values()), thoughts=thoughts),
        main_topics=summary.main_topics,
        total_conversations=total,
        session_id=loaded.session_id,
        created_at=loaded.created_at,
        ai_model=summary.ai_model or _text(meta.get("ai_model")) or _text(meta.get("model")),
        duration=summary.duration
        or _text(meta.get("duration"))
        or _text(meta.get("session_duration")),
        platform=summary.platform or _text(meta.get("platform")),
        custom_metadata=meta,
    )
    return manifest.model_dump(mode="json", exclude_none=True)


def export_finalize(ctx: ToolContext, inp: SessionInput) -> FinalizeOutput:
    """``export_experience_finalize``: write manifest.json, then remove summary.json.

    Finalizing a finalized export again is accepted (it completes a finalize that was
    killed between the two steps).
    """
    directory = _existing_dir(ctx, inp.session_id)
    root = trusted_root(ctx)
    warnings: list[str] = []
    with _locked(directory, root) as state:
        if MANIFEST in state.files:
            total = _count_batches(directory, state.batches, root)
            warnings += _check_manifest(directory, root, total)
            warnings.append("already finalized")
        else:
            if SUMMARY not in state.files:
                raise ToolError(
                    "summary_missing", f"{SUMMARY} is missing: call export_experience_init first"
                )
            loaded = _load_summary(directory, root)
            if not state.batches:
                raise ToolError(
                    "no_conversations",
                    "no conversation batch yet: send batch 1 with "
                    "export_experience_conversations before finalizing",
                )
            total = _count_batches(directory, state.batches, root)
            thoughts = THOUGHTS if THOUGHTS in state.files else ""
            if not thoughts:
                warnings.append("no thoughts.json: the importer's most valuable file is missing")
            data = encode(_build_manifest(loaded, state.batches, thoughts, total))
            _check_sizes(state, MANIFEST, data, freed=state.size_of(SUMMARY))
            _write(directory / MANIFEST, data, root)
        _fs.remove_file(directory / SUMMARY, root=root, missing_ok=True, durable=False)
        for stale in _fs.list_folder(directory, root=root):  # left by a writer killed mid-write
            if stale.name.startswith(".") and stale.name.endswith(".tmp"):
                _fs.remove_file(directory / stale.name, root=root, missing_ok=True, durable=False)
        _fs.fsync_dir(directory)
    final = scan(directory, root=root)
    log.info("experience export finalized", session_id=inp.session_id, conversations=total)
    return FinalizeOutput(
        directory_path=str(directory),
        manifest_path=str(directory / MANIFEST),
        total_files=len(final.files),
        total_size=final.total_bytes,
        file_list=list(final.files),
        total_conversations=total,
        warnings=warnings,
    )
