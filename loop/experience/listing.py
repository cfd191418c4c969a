"""``list_experiences``: find finalized experiences and filter them by their manifest."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loop import _fs
from loop.errors import PathError, StoreError, ToolError
from loop.experience.layout import (
    BATCH_RE,
    DIR_PREFIX,
    MANIFEST,
    THOUGHTS,
    resolve_in_roots,
    trusted_root,
)
from loop.experience.models import DirectorySummary, ExperienceFilters, ListInput, ListOutput
from loop.experience.schemas import Manifest, parse_timestamp
from loop.tools.base import ToolContext

__all__ = ["list_experiences", "matches"]

_DATE_ONLY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # with fullmatch, ASCII digits


def _filter_date(value: str | None, name: str) -> datetime | None:
    """The instant a date filter names; a bare date in ``created_before`` means the end
    of that day (the filter is "on or before" it), anywhere else its start."""
    if value is None:
        return None
    try:
        instant = parse_timestamp(value)
    except ValueError as exc:
        raise ToolError(
            "invalid_input", f"filters.{name}: not an ISO 8601 date or date-time: {value!r}"
        ) from exc
    if name == "created_before" and _DATE_ONLY.fullmatch(value.strip()):
        instant += timedelta(days=1) - timedelta(microseconds=1)
    return instant


def matches(manifest: Manifest, filters: ExperienceFilters) -> bool:
    """Whether ``manifest`` passes every given filter (pure).

    Strings match as case-insensitive substrings; ``main_topics`` matches when any
    filter topic is a substring of any stored topic; the date filters include their
    bound ("on or after", "on or before"; a bare ``created_before`` date covers that
    whole day) and drop a manifest without ``created_at`` (it cannot be shown to
    match); the conversation counts are inclusive.
    """
    if filters.ai_name and filters.ai_name.casefold() not in manifest.ai_name.casefold():
        return False
    if filters.ai_context and filters.ai_context.casefold() not in manifest.ai_context.casefold():
        return False
    if filters.main_topics:
        wanted = [t.casefold() for t in filters.main_topics]
        stored = [t.casefold() for t in manifest.main_topics]
        if not any(w in s for w in wanted for s in stored):
            return False
    after = _filter_date(filters.created_after, "created_after")
    before = _filter_date(filters.created_before, "created_before")
    if after is not None or before is not None:
        if manifest.created_at is None:
            return False
        created = parse_timestamp(manifest.created_at)
        if after is not None and created < after:
            return False
        if before is not None and created > before:
            return False
    total = manifest.total_conversations
    if filters.min_conversations is not None and total < filters.min_conversations:
        return False
    return filters.max_conversations is None or total <= filters.max_conversations


def _file_count(directory: Path, root: Path) -> int:
    return sum(
        1
        for e in _fs.list_folder(directory, root=root)
        if e.kind == "file" and (e.name in (MANIFEST, THOUGHTS) or BATCH_RE.fullmatch(e.name))
    )


def list_experiences(ctx: ToolContext, inp: ListInput) -> ListOutput:
    """List the experiences under the base directory whose manifest is valid and matches."""
    if inp.base_directory:  # resolved and checked: its real path is trusted from here on
        base = resolve_in_roots(ctx, inp.base_directory, what="base_directory")
        root = base
    else:
        base, root = ctx.experiences_base, trusted_root(ctx)
    filters = inp.filters or ExperienceFilters()
    # Check the date filters once up front, so a bad one fails even with nothing to list.
    _filter_date(filters.created_after, "created_after")
    _filter_date(filters.created_before, "created_before")
    found: list[dict[str, Any]] = []
    summaries: list[DirectorySummary] = []
    warnings: list[str] = []
    if _fs.stat_nofollow(base, root=root) is None:
        return ListOutput(
            experience_directories=[],
            directory_summaries=[],
            warnings=[f"no experiences yet: {base} does not exist"],
        )
    # links are not folders here: an experience_* link is skipped, never followed
    names = [
        e.name
        for e in _fs.list_folder(base, root=root)
        if e.kind == "folder" and e.name.startswith(DIR_PREFIX)
    ]
    for name in names:
        directory = base / name
        try:
            raw = _fs.read_json(directory / MANIFEST, root=root)
            manifest = Manifest.model_validate(raw, strict=True)
        except StoreError as exc:
            if _fs.stat_nofollow(directory / MANIFEST, root=root) is None:
                warnings.append(f"{directory.name}: not finalized (no manifest.json)")
            else:
                warnings.append(f"{directory.name}: {exc.message}")
            continue
        except PathError as exc:
            warnings.append(f"{directory.name}: {exc.message}")
            continue
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            warnings.append(f"{directory.name}: manifest.json: {where}: {first['msg']}")
            continue
        if not matches(manifest, filters):
            continue
        found.append(
            {
                **manifest.model_dump(mode="json", exclude_none=True),
                "directory_path": str(directory),
            }
        )
        summaries.append(
            DirectorySummary(
                directory=str(directory),
                summary=f"{manifest.ai_name}: {manifest.experience_summary}",
                file_count=_file_count(directory, root),
            )
        )
    return ListOutput(
        experience_directories=found, directory_summaries=summaries, warnings=warnings
    )
