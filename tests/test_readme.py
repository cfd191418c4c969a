"""The README is assembled from docs/ and documents what the CLI really has."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from loop.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def _assemble() -> str:
    spec = importlib.util.spec_from_file_location("readme", ROOT / "scripts/readme.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.assemble())


def test_readme_is_up_to_date_with_its_parts() -> None:
    """README.md equals what scripts/readme.py assembles (run it after editing docs/)."""
    assert (ROOT / "README.md").read_text(encoding="utf-8") == _assemble()


def test_readme_names_every_command_and_the_two_newcomer_commands() -> None:
    """Every CLI command appears in the README, and so do the run and test commands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"`{name}" in text or f" {name} " in text, name
    assert ".venv/bin/python -m loop run" in text
    assert "./scripts/check" in text
    assert (ROOT / ".ci/run").read_text().strip().endswith("exec ./scripts/check")
