"""Pure naming rules of the theme workspace: IDs, sanitising, file names, history text.

Nothing here touches the disk, so every rule is tested on plain values. The layout
follows the original ai-heartbeat tools (see ``docs/themes-guide.md``):

* start history: ``artifacts/theme_histories/<THEME_START_ID>_start_<part>.md``
* end history: ``artifacts/theme_histories/<THEME_END_ID>_end_<part>.md``
* theme directory: ``artifacts/<THEME_START_ID>_<part>/`` or, for a subtheme,
  ``artifacts/<PARENT_ID>_<parent part>/subthemes/<THEME_START_ID>_<part>/``
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loop._names import check_name

__all__ = [
    "DRAFT_PREFIX",
    "HISTORY_NAME",
    "ID_PATTERN",
    "PROCESSED_PREFIX",
    "HistoryEntry",
    "candidates",
    "end_history_name",
    "is_heartbeat_id",
    "is_history_name",
    "parse_history",
    "render_end_history",
    "render_start_history",
    "sanitize_part",
    "start_history_name",
    "theme_dir_parts",
]

# For pydantic's ``pattern`` (Rust regex: ``$`` is the end of the text, never before a
# final newline). ASCII digits only: ``\d`` would take other scripts' digits too.
ID_PATTERN = r"^[0-9]{14}$"
_ID = re.compile(r"[0-9]{14}")
DRAFT_PREFIX = "draft."
PROCESSED_PREFIX = "processed."
HISTORY_NAME = re.compile(r"(?P<id>[0-9]{14})_(?P<kind>start|end)_(?P<part>[a-z0-9_]+)\.md")

_NOT_ALLOWED = re.compile(r"[^a-z0-9_]+")
_UNDERSCORES = re.compile(r"_+")
_FIELD = re.compile(r"^\*\*(?P<key>[A-Z_]+)\*\*: (?P<value>.*)$", re.MULTILINE)
_TITLE = re.compile(r"^# (?P<sub>Sub)?[Tt]heme (?:start|end): (?P<name>.*)$", re.MULTILINE)


def is_heartbeat_id(text: str) -> bool:
    """Whether ``text`` is exactly 14 ASCII digits (a heartbeat or theme start ID)."""
    return _ID.fullmatch(text) is not None


def is_history_name(name: str) -> bool:
    """Whether ``name`` is a start or end history file name."""
    return HISTORY_NAME.fullmatch(name) is not None


def sanitize_part(raw: str, what: str = "themeDirectoryPart") -> str:
    """Check ``raw`` is a plain name, then map it to ``[a-z0-9_]`` as the original did.

    Lowercase; each run of other characters becomes one ``_``; repeated ``_`` collapse.
    Leading and trailing ``_`` stay (an all-Japanese name becomes ``_``).

    Raises:
        PathError: empty, ``.``/``..``, a separator or NUL (traversal is refused, not
            silently reduced to a basename).
    """
    check_name(raw, what)
    return _UNDERSCORES.sub("_", _NOT_ALLOWED.sub("_", raw.lower()))


def start_history_name(start_id: str, part: str) -> str:
    """The start history file name."""
    return f"{start_id}_start_{part}.md"


def end_history_name(end_id: str, part: str) -> str:
    """The end history file name."""
    return f"{end_id}_end_{part}.md"


def theme_dir_parts(
    start_id: str, part: str, parent_id: str | None = None, parent_part: str | None = None
) -> tuple[str, ...]:
    """Path components of the theme directory below ``artifacts/``."""
    own = f"{start_id}_{part}"
    if parent_id is None or parent_part is None:
        return (own,)
    return (f"{parent_id}_{parent_part}", "subthemes", own)


def candidates(names: Iterable[str]) -> list[str]:
    """Unprocessed ``.md`` names (no ``draft.``/``processed.`` prefix), sorted by name."""
    return sorted(
        n for n in names if n.endswith(".md") and not n.startswith((DRAFT_PREFIX, PROCESSED_PREFIX))
    )


def _one_line(text: str) -> str:
    # A name is rendered in a heading; a newline in it would forge header fields.
    return " ".join(text.split())


def _block(items: Sequence[str] | None, placeholder: str) -> str:
    if not items:
        return placeholder
    if len(items) == 1:
        return items[0]
    return "\n".join(f"- {item}" for item in items)


def _header(
    kind: str, name: str, parent: tuple[str, str] | None, fields: list[tuple[str, str]]
) -> list[str]:
    title = f"# {'Subtheme' if parent else 'Theme'} {kind}: {_one_line(name)}"
    lines = [title, ""]
    if parent:
        lines.append(f"**PARENT_THEME_START_ID**: {parent[0]}")
        lines.append(f"**PARENT_THEME_DIRECTORY**: {parent[1]}")
    lines.extend(f"**{key}**: {value}" for key, value in fields)
    return lines


def render_start_history(
    *,
    name: str,
    start_id: str,
    part: str,
    directory: str,
    reason: str,
    activity: Sequence[str] | None,
    parent: tuple[str, str] | None,
) -> str:
    """The start history Markdown; ``parent`` is (parent start id, parent part)."""
    parent_dir = None if parent is None else (parent[0], f"{parent[0]}_{parent[1]}")
    lines = _header(
        "start",
        name,
        parent_dir,
        [
            ("THEME_START_ID", start_id),
            ("THEME_DIRECTORY_PART", part),
            ("THEME_DIRECTORY", f"`{directory}/`"),
        ],
    )
    lines += ["", "## Reason", "", reason.strip(), "", "## Activity content", ""]
    lines.append(_block(activity, "(what this theme will do)"))
    return "\n".join(lines) + "\n"


def render_end_history(
    *,
    name: str,
    start_id: str,
    end_id: str,
    part: str,
    directory: str,
    reason: str,
    achievements: Sequence[str] | None,
    parent: tuple[str, str] | None,
) -> str:
    """The end history Markdown; ``parent`` is (parent start id, parent part)."""
    parent_dir = None if parent is None else (parent[0], f"{parent[0]}_{parent[1]}")
    lines = _header(
        "end",
        name,
        parent_dir,
        [
            ("THEME_START_ID", start_id),
            ("THEME_END_ID", end_id),
            ("THEME_DIRECTORY_PART", part),
            ("THEME_DIRECTORY", f"`{directory}/`"),
        ],
    )
    lines += ["", "## Reason", "", reason.strip(), "", "## Main achievements", ""]
    lines.append(_block(achievements, "N/A"))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One history file, parsed: its name fields plus the header fields inside it."""

    file: str
    kind: str
    heartbeat_id: str
    part: str
    name: str
    start_id: str | None
    parent_id: str | None
    parent_dir: str | None
    directory: str | None


def parse_history(file: str, text: str) -> HistoryEntry | None:
    """Parse a history file; ``None`` when the name is not a history name.

    Only the first occurrence of each header field counts: the header comes before the
    free-text blocks, so a reason that contains ``**THEME_START_ID**: ...`` cannot forge it.
    """
    m = HISTORY_NAME.fullmatch(file)
    if m is None:
        return None
    fields: dict[str, str] = {}
    for fm in _FIELD.finditer(text):
        fields.setdefault(fm.group("key"), fm.group("value").strip())
    title = _TITLE.search(text)
    start_id = fields.get("THEME_START_ID")
    if m.group("kind") == "start":
        start_id = m.group("id")
    elif start_id is not None and not is_heartbeat_id(start_id):
        start_id = None
    directory = fields.get("THEME_DIRECTORY")
    return HistoryEntry(
        file=file,
        kind=m.group("kind"),
        heartbeat_id=m.group("id"),
        part=m.group("part"),
        name=title.group("name") if title else m.group("part"),
        start_id=start_id,
        parent_id=fields.get("PARENT_THEME_START_ID"),
        parent_dir=fields.get("PARENT_THEME_DIRECTORY"),
        directory=directory.strip("`").rstrip("/") if directory else None,
    )
