"""``loop init``: write a commented loop.toml and hat files to start from (never overwrite)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from loop._fs import write_new_file
from loop.config import preset_dir, preset_names
from loop.errors import UsageError

__all__ = ["plan_files", "register"]

_BACKEND_TABLE = re.compile(r"^\[hats\.[^\]]+\.backend\]\s*$", re.MULTILINE)


def _strip_backend_tables(text: str) -> str:
    # Preset hat files keep their per-hat backend table last: cut from it to the end.
    match = _BACKEND_TABLE.search(text)
    return text[: match.start()].rstrip() + "\n" if match else text


def plan_files(preset: str, backend: str | None) -> dict[Path, str]:
    """Relative path → content for ``init`` (pure apart from reading the preset)."""
    root = preset_dir(preset)
    files: dict[Path, str] = {}
    for src in sorted(root.rglob("*")):
        rel = src.relative_to(root)
        if src.is_dir() or any(part.startswith((".", "__")) for part in rel.parts):
            continue
        text = src.read_text(encoding="utf-8")
        if backend is not None:
            if rel.name == "loop.toml":
                text = re.sub(r'(?m)^type = "\w+"(.*)$', f'type = "{backend}"\\1', text, count=1)
            elif rel.suffix == ".toml":
                text = _strip_backend_tables(text)
        files[rel] = text
    return files


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``init``."""
    p = sub.add_parser("init", help="write a loop.toml and hat files to start from")
    p.add_argument("--preset", default="default", help=f"one of: {', '.join(preset_names())}")
    p.add_argument(
        "--backend",
        choices=["scripted", "claude", "gemini", "codex"],
        help="the default backend for every hat (drops per-hat backends)",
    )
    p.add_argument("--dir", default=".", help="where to write (default: here)")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    files = plan_files(args.preset, args.backend if args.backend != "scripted" else None)
    existing = [str(target / rel) for rel in files if (target / rel).exists()]
    if existing:
        raise UsageError("init never overwrites; these files exist already: " + ", ".join(existing))
    for rel, text in files.items():
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:  # whole or not at all, and never over a file that appeared meanwhile
            write_new_file(dest, text)
        except FileExistsError:
            raise UsageError(f"init never overwrites; {dest} exists already") from None
        print(f"wrote {dest}")
    print(f"next: python -m loop hats validate && python -m loop run   (preset {args.preset})")
    return 0
