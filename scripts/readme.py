"""Assemble README.md from docs/parts/*.md and the per-area sections in docs/readme-*.md.

The README is long; its parts are kept where each area's owner edits them. Run
`python scripts/readme.py` after editing a part; `tests/test_readme.py` checks that
README.md is up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = [
    "docs/parts/00-intro.md",
    "docs/parts/10-config.md",
    "docs/readme-recording.md",
    "docs/readme-tasks.md",
    "docs/readme-themes.md",
    "docs/readme-experience.md",
    "docs/readme-mcp.md",
    "docs/readme-claude.md",
    "docs/readme-bench.md",
    "docs/parts/90-dev.md",
]


def assemble() -> str:
    """The README text."""
    parts = [(ROOT / name).read_text(encoding="utf-8").strip() for name in ORDER]
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    target = ROOT / "README.md"
    target.write_text(assemble(), encoding="utf-8")
    sys.stdout.write(f"wrote {target.relative_to(ROOT)}\n")
