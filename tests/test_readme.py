"""The README is a short front door whose links all lead somewhere, and the docs' links too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loop.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def _links(path: Path) -> list[str]:
    return _LINK.findall(_FENCE.sub("", path.read_text(encoding="utf-8")))


def test_readme_names_every_command_and_the_two_newcomer_commands() -> None:
    """Every CLI command appears in the README, and so do the run and test commands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"`{name}" in text or f" {name} " in text, name
    assert ".venv/bin/python -m loop run" in text
    assert "./scripts/check" in text
    assert (ROOT / ".ci/run").read_text().strip().endswith("exec ./scripts/check")


def test_readme_is_short() -> None:
    """The README is a front door (what it is, two commands, a first loop, links)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 220, f"README.md has {lines} lines: move topics to docs/"


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    """Each relative link names a file that exists, and an anchor that its page has."""
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        dest = (page.parent / target).resolve() if target else page
        missing_anchor = anchor and dest.suffix == ".md" and anchor not in _anchors(dest)
        if not dest.exists() or missing_anchor:
            broken.append(link)
    assert not broken, f"{page.name}: broken links {broken}"


def test_every_docs_page_is_in_the_index() -> None:
    """docs/README.md lists every page of the guide."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in DOCS if p.name != "README.md" and f"({p.name})" not in index]
    assert not missing, f"pages missing from docs/README.md: {missing}"
