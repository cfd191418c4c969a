"""Names and paths that come from input, checked before any file system call.

A theme's directory part, a file name or a session id must be one plain path component;
a path from input must be one a system call can take; a path that must stay inside a
root is resolved and checked. Each refusal is a :class:`~loop.errors.PathError` of one
line. Opening what they name, without following links, is :mod:`loop._fs`'s part.
"""

from __future__ import annotations

from pathlib import Path

from loop.errors import PathError

__all__ = [
    "COMPONENT_MAX_BYTES",
    "NAME_MAX_BYTES",
    "PATH_MAX_BYTES",
    "check_name",
    "check_path",
    "inside_root",
    "path_problem",
    "safe_join",
]

# Longest name accepted from input: a file system allows 255 bytes, and hatloop adds
# prefixes and suffixes (``processed.``, ``.tmp``, heartbeat ids) to some names.
NAME_MAX_BYTES = 200
# Longest path accepted from input (Linux's PATH_MAX is 4096 bytes with the NUL).
PATH_MAX_BYTES = 4095
# Longest path component a file system takes (what hatloop derives from an input name).
COMPONENT_MAX_BYTES = 255


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_name(part: str, what: str = "name", *, max_bytes: int = NAME_MAX_BYTES) -> str:
    """Refuse anything but a plain single path component; return it unchanged.

    The one checker of names that come from input (theme directory parts, file names,
    session ids). Refused: empty, ``.``, ``..``, ``/`` or ``\\`` separators, NUL, and
    names longer than ``max_bytes`` bytes of UTF-8.

    Raises:
        PathError: one line saying what is wrong (the name shown with ``repr``, so a
            newline in it cannot break the line).
    """
    if not isinstance(part, str) or part == "":
        raise PathError(f"{what} must be a non-empty name")
    if "\x00" in part:
        raise PathError(f"{what} must not contain NUL: {part[:60]!r}")
    if "/" in part or "\\" in part:
        raise PathError(f"{what} must be a plain name without path separators: {part[:60]!r}")
    if part in (".", ".."):
        raise PathError(f"{what} must not be {part!r}")
    size = _size(part)
    if size > max_bytes:
        raise PathError(f"{what} is too long: {size} bytes, at most {max_bytes} ({part[:40]!r}...)")
    return part


def check_path(raw: str, what: str = "path") -> str:
    """Refuse a path from input that no file system call could take; return it unchanged.

    Refused: empty, NUL, a component over 255 bytes, more than 4095 bytes in all (see
    :func:`path_problem`).

    Raises:
        PathError: one line saying what is wrong, naming ``what``.
    """
    problem = path_problem(raw)
    if problem is not None:
        raise PathError(f"{what} {problem}")
    return raw


def path_problem(raw: str) -> str | None:
    """What makes ``raw`` a path no file system call could take, in words that follow
    its name (``must not contain NUL``), or ``None``: the one rule of :func:`check_path`,
    for a caller that names the path its own way (a ``loop.toml`` setting)."""
    if not isinstance(raw, str) or raw == "":
        return "must not be empty"
    if "\x00" in raw:
        return "must not contain NUL"
    if _size(raw) > PATH_MAX_BYTES:
        return f"is too long: {_size(raw)} bytes, at most {PATH_MAX_BYTES}"
    for part in raw.split("/"):
        if _size(part) > COMPONENT_MAX_BYTES:
            return (
                f"has a name of {_size(part)} bytes ({part[:40]!r}...); "
                f"at most {COMPONENT_MAX_BYTES}"
            )
    return None


def safe_join(root: Path, *parts: str, what: str = "name") -> Path:
    """Join plain name components under ``root`` (each checked by :func:`check_name`)."""
    for part in parts:
        check_name(part, what)
    return root.joinpath(*parts)


def inside_root(root: Path, path: Path | str, *, what: str = "path") -> Path:
    """Check that a user-supplied (possibly relative) path stays inside ``root``.

    Relative paths are taken relative to ``root``; absolute ones must already lie in it.
    Links are resolved, so the result is where the path really leads.
    """
    raw = check_path(str(path), what)
    p = Path(raw)
    candidate = p if p.is_absolute() else root / p
    resolved_root = root.resolve()
    resolved = candidate.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise PathError(f"{what} must stay inside {root}: {raw!r}")
    return resolved
