"""Which themes are active: derived from the history files alone (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from loop.themes.models import ThemeInfo
from loop.themes.naming import HistoryEntry

__all__ = ["active_themes", "is_ended", "parent_of", "render_active"]


def is_ended(start: HistoryEntry, ends: Iterable[HistoryEntry]) -> bool:
    """Whether some end history belongs to ``start``.

    An end names its THEME_START_ID; an end without a readable one (written by hand)
    matches the latest start of the same part that came before it.
    """
    for end in ends:
        if end.part != start.part:
            continue
        if end.start_id == start.heartbeat_id:
            return True
        if end.start_id is None and end.heartbeat_id >= start.heartbeat_id:
            return True
    return False


def _parent_part(entry: HistoryEntry) -> str | None:
    if entry.parent_id is None or entry.parent_dir is None:
        return None
    prefix = f"{entry.parent_id}_"
    return entry.parent_dir[len(prefix) :] if entry.parent_dir.startswith(prefix) else None


def parent_of(start: HistoryEntry) -> tuple[str, str] | None:
    """The parent (start ID, directory part) a start history names; ``None``: a main theme."""
    part = _parent_part(start)
    return None if start.parent_id is None or part is None else (start.parent_id, part)


def active_themes(entries: Iterable[HistoryEntry]) -> list[ThemeInfo]:
    """Started and not yet ended themes and subthemes, oldest first."""
    items = list(entries)
    ends = [e for e in items if e.kind == "end"]
    starts = sorted((e for e in items if e.kind == "start"), key=lambda e: e.heartbeat_id)
    return [
        ThemeInfo(
            themeStartId=s.heartbeat_id,
            themeDirectoryPart=s.part,
            themeName=s.name,
            themeDirectory=s.directory,
            historyFile=f"artifacts/theme_histories/{s.file}",
            parentThemeStartId=s.parent_id,
            parentThemeDirectoryPart=_parent_part(s),
        )
        for s in starts
        if not is_ended(s, ends)
    ]


def render_active(themes: list[ThemeInfo]) -> str:
    """Themes as an indented list: subthemes under their parents."""
    if not themes:
        return "no active theme"
    by_parent: dict[tuple[str | None, str | None], list[ThemeInfo]] = {}
    for t in themes:
        by_parent.setdefault((t.parentThemeStartId, t.parentThemeDirectoryPart), []).append(t)
    lines: list[str] = []

    def walk(theme: ThemeInfo, depth: int) -> None:
        lines.append(
            f"{'  ' * depth}- {theme.themeName} (themeStartId {theme.themeStartId}, "
            f"themeDirectoryPart {theme.themeDirectoryPart}, {theme.themeDirectory}/)"
        )
        for child in by_parent.get((theme.themeStartId, theme.themeDirectoryPart), []):
            walk(child, depth + 1)

    known = {(t.themeStartId, t.themeDirectoryPart) for t in themes}
    for t in themes:
        parent = (t.parentThemeStartId, t.parentThemeDirectoryPart)
        if t.parentThemeStartId is None or parent not in known:
            walk(t, 0)
    return "\n".join(lines)
