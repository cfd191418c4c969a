"""The tool catalog: cached definitions equal built ones; domains imported on first call."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loop.tools import catalog as catalog_mod
from loop.tools.catalog import Catalog, catalog_key
from loop.tools.registry import all_tools


def _dump(c: Catalog) -> list[dict[str, object]]:
    return [d.model_dump(mode="json", by_alias=True, exclude_none=True) for d in c.definitions]


def test_a_cached_catalog_lists_what_a_built_one_does(tmp_path: Path) -> None:
    """The first load renders and writes the catalog; the next reads the same definitions."""
    first = Catalog.load(tmp_path)
    files = list(tmp_path.glob("tool-catalog.*.json"))
    assert [f.name for f in files] == [f"tool-catalog.{catalog_key()}.json"]
    second = Catalog.load(tmp_path)
    assert _dump(second) == _dump(first) == _dump(Catalog.build())
    assert second.names() == list(all_tools())
    assert "createTask" in second and "nope" not in second
    assert second.tool("createTask") is all_tools()["createTask"]


def test_an_unreadable_cache_is_rebuilt(tmp_path: Path) -> None:
    """A cache file that is not a catalog is ignored and written again."""
    path = tmp_path / f"tool-catalog.{catalog_key()}.json"
    path.write_text('{"key": "x", "tools": 3')
    assert Catalog.load(tmp_path).names() == list(all_tools())
    assert json.loads(path.read_text())["key"] == catalog_key()


def test_a_changed_source_file_gets_a_new_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any change to a package file changes the key; the old cache file is dropped."""
    package = tmp_path / "pkg"
    package.mkdir()
    source = package / "tools.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(catalog_mod, "PACKAGE", package)
    cache = tmp_path / "cache"
    before = catalog_key()
    Catalog.load(cache)
    source.write_text("A = 22\n")
    after = catalog_key()
    assert after != before
    Catalog.load(cache)
    assert [p.name for p in cache.iterdir()] == [f"tool-catalog.{after}.json"]


def test_a_server_from_the_cache_imports_a_domain_only_when_its_tool_is_called(
    tmp_path: Path,
) -> None:
    """Started from the cache, no domain is imported; a call imports that tool's own."""
    Catalog.load(tmp_path)
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from loop.tools.catalog import Catalog
        from loop.tools.base import ToolContext
        catalog = Catalog.load(Path({str(tmp_path)!r}))
        domains = ("loop.tasks.tools", "loop.themes.tools", "loop.experience.tools")
        before = [m for m in domains if m in sys.modules]
        ctx = ToolContext(root=Path({str(tmp_path)!r}), tasks_file=Path("tasks.json"))
        out = catalog.tool("createTask").run(ctx, {{"name": "lazy"}})
        after = [m for m in domains if m in sys.modules]
        print(before, after, out.model_dump()["task"]["name"])
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.split("\n")[0] == "[] ['loop.tasks.tools'] lazy"
