"""Pure naming rules of the theme workspace: IDs, sanitising, file names, history text.

Nothing here touches the disk, so every rule is tested on plain values. The layout
follows the original ai-heartbeat tools (see ``docs/themes-guide.md``):

* start history: ``artifacts/theme_histories/<THEME_START_ID>_start_<part>.md``
* end history: ``artifacts/theme_histories/<THEME_END_ID>_end_<part>.md``
* theme directory: ``artifacts/<THEME_START_ID>_<part>/`` or, for a subtheme,
  ``artifacts/<PARENT_ID>_<parent part>/subthemes/<THEME_START_ID>_<part>/``
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from loop._names import NAME_MAX_BYTES, check_name

__all__ = [
    "DRAFT_PREFIX",
    "HISTORY_NAME",
    "ID_PATTERN",
    "PROCESSED_PREFIX",
    "HistoryEntry",
    "Unfit",
    "candidates",
    "end_history_name",
    "is_heartbeat_id",
    "is_history_name",
    "is_processed_name_of",
    "parse_history",
    "processed_names",
    "render_end_history",
    "render_start_history",
    "reused_note",
    "sanitize_part",
    "sort_out",
    "start_history_name",
    "theme_dir_parts",
    "unfit_reason",
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
_SECTION = re.compile(r"^## ", re.MULTILINE)  # the first free-text section ends the header
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


def _unprocessed(names: Iterable[str]) -> list[str]:
    return sorted(
        n for n in names if n.endswith(".md") and not n.startswith((DRAFT_PREFIX, PROCESSED_PREFIX))
    )


@dataclass(frozen=True, slots=True)
class Unfit:
    """An unprocessed item the tools cannot take, and why (it is skipped, never offered)."""

    name: str
    reason: str


def unfit_reason(name: str) -> str | None:
    """Why the tools cannot take an item of this name; ``None`` when they can.

    A candidate is offered by name and taken by name: ``start_theme`` refuses a
    ``target_filename`` over :data:`~loop._names.NAME_MAX_BYTES` (``invalid_path``), and
    a name that is not UTF-8 cannot even be sent back. Offered anyway, such an item
    would stand first for good and hide every item behind it, so it is skipped. Both
    boxes use the one limit, which also leaves room for the ``processed.`` name.
    """
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "its name is not valid UTF-8; rename it"
    if size > NAME_MAX_BYTES:
        return f"its name is {size} bytes, over the {NAME_MAX_BYTES} the tools take; rename it"
    return None


def sort_out(names: Iterable[str]) -> tuple[list[str], list[Unfit]]:
    """The unprocessed ``.md`` names the tools can take, sorted by name, and the ones
    they cannot (see :func:`unfit_reason`), in name order."""
    fit: list[str] = []
    unfit: list[Unfit] = []
    for name in _unprocessed(names):
        reason = unfit_reason(name)
        if reason is None:
            fit.append(name)
        else:
            unfit.append(Unfit(name, reason))
    return fit, unfit


def candidates(names: Iterable[str]) -> list[str]:
    """Unprocessed ``.md`` names (no ``draft.``/``processed.`` prefix) the tools can take,
    sorted by name."""
    return sort_out(names)[0]


def processed_names(name: str) -> Iterator[str]:
    """The names an item may take once processed, in the order they are tried.

    ``processed.<name>`` first, as the seed and the original have it. When that name is
    taken (an earlier item had the same name) the original's rename replaced the older
    file; here the item gets the first free ``processed.<stem>.<n>.md`` (n = 2, 3, ...)
    instead, so neither file is lost and the box never stops at this item. A name of at
    most 200 bytes leaves room for these (the file system takes 255).
    """
    yield PROCESSED_PREFIX + name
    stem = name.removesuffix(".md")
    for n in itertools.count(2):
        yield f"{PROCESSED_PREFIX}{stem}.{n}.md"


def reused_note(box: str, name: str, processed: str) -> str:
    """The warning for an item that took a numbered processed name."""
    return (
        f"{box}/{PROCESSED_PREFIX}{name} already exists (an earlier item of the same name), "
        f"so {box}/{name} became {box}/{processed}; both are kept"
    )


_NUMBERED = re.compile(r"\.[1-9][0-9]*\.md")


def is_processed_name_of(name: str, processed: str) -> bool:
    """Whether ``processed`` is one of :func:`processed_names` of ``name``."""
    if processed == PROCESSED_PREFIX + name:
        return True
    stem = PROCESSED_PREFIX + name.removesuffix(".md")
    rest = processed.removeprefix(stem)
    return rest != processed and _NUMBERED.fullmatch(rest) is not None and rest != ".1.md"


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

    Only the header counts (the title and the field lines before the first ``## ``
    section), and the first occurrence of each field in it: the free-text sections (the
    reason, the activity, the achievements) come after it, so a reason that contains
    ``**THEME_START_ID**: ...`` or ``**PARENT_THEME_START_ID**: ...`` cannot forge one.
    """
    m = HISTORY_NAME.fullmatch(file)
    if m is None:
        return None
    header = _SECTION.split(text, maxsplit=1)[0]
    fields: dict[str, str] = {}
    for fm in _FIELD.finditer(header):
        fields.setdefault(fm.group("key"), fm.group("value").strip())
    title = _TITLE.search(header)
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
