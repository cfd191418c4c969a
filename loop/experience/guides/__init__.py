"""The two guides for agents, as package data: export (source AI) and import (main AI)."""

from __future__ import annotations

from importlib import resources
from typing import Literal

__all__ = ["GuideKind", "GuideLang", "load_guide"]

GuideKind = Literal["export", "import"]
GuideLang = Literal["en", "ja"]


def load_guide(kind: GuideKind, lang: GuideLang = "en") -> str:
    """The Markdown text of the ``kind`` guide in ``lang`` (``export.en.md`` and so on)."""
    return resources.files(__name__).joinpath(f"{kind}.{lang}.md").read_text(encoding="utf-8")
