"""The tool catalog: how every tool is listed over MCP, and where its code lives.

Listing the tools needs their MCP definitions (names, descriptions, JSON schemas);
calling one needs only its own domain. Building the definitions imports every domain
and renders about fifty JSON schemas, most of ``python -m loop mcp``'s own start-up.
So :meth:`Catalog.load` keeps the rendered catalog in the user's cache folder
(``$XDG_CACHE_HOME/hatloop``, by default ``~/.cache/hatloop``): a server starts from it
without importing any domain, and imports a tool's domain module when that tool is
first called.

The key covers everything the definitions are made from: where the package is, every
``.py`` file of it (path, size, modification time), the registry's domain list, and
the versions of Python, pydantic and the MCP SDK. A changed file means a new key, so
the next start renders the catalog again (and drops the old one). A cache that cannot
be read is rebuilt; one that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import sys
import typing
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import mcp_types
import pydantic
import structlog
from mcp.types import Tool as MCPTool
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from loop._fs import write_json
from loop._version import __version__
from loop.tools import registry
from loop.tools.base import Tool

__all__ = ["Catalog", "catalog_key", "default_cache_dir", "tool_definition"]

log = structlog.get_logger(__name__)

PACKAGE = Path(__file__).resolve().parent.parent  # loop/
CACHE_PREFIX = "tool-catalog."


def _object_schema(
    model: type[BaseModel], mode: typing.Literal["validation", "serialization"]
) -> dict[str, Any]:
    """The model's JSON schema with an object at its root (a bare root ``$ref`` inlined)."""
    schema = model.model_json_schema(by_alias=True, mode=mode)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        definition = schema["$defs"][ref.removeprefix("#/$defs/")]
        schema = {**definition, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _annotations(tool: Tool) -> ToolAnnotations:
    # Every tool works on local files only: never the open world.
    title = re.sub(r"(?<=[a-z])(?=[A-Z])|_", " ", tool.name).strip().capitalize()
    return ToolAnnotations(title=title, read_only_hint=tool.read_only, open_world_hint=False)


def tool_definition(tool: Tool) -> MCPTool:
    """How ``tool`` is listed: name, description, input and output schemas, hints."""
    return MCPTool(
        name=tool.name,
        description=tool.description,
        input_schema=_object_schema(tool.input_model, "validation"),
        output_schema=_object_schema(tool.output_model, "serialization"),
        annotations=_annotations(tool),
    )


class Catalog:
    """The tools a server offers: their definitions, and each one's code on demand.

    Args:
        definitions: the MCP definitions, in listing order.
        modules: tool name -> the domain module whose ``TOOLS`` holds it.
        tools: tools already imported (the rest are imported when first asked for).
    """

    def __init__(
        self,
        definitions: list[MCPTool],
        modules: Mapping[str, str],
        tools: Mapping[str, Tool] | None = None,
    ) -> None:
        self.definitions = definitions
        self._modules = dict(modules)
        self._tools: dict[str, Tool] = dict(tools or {})

    @classmethod
    def of(cls, tools: Mapping[str, Tool]) -> Catalog:
        """A catalog of tools already imported (no cache)."""
        return cls([tool_definition(t) for t in tools.values()], {}, tools)

    @classmethod
    def build(cls) -> Catalog:
        """Import every domain and render every definition (what the cache holds)."""
        modules: dict[str, str] = {}
        for module_name in registry.DOMAIN_MODULES:
            for tool in importlib.import_module(module_name).TOOLS:
                modules[tool.name] = module_name
        tools = registry.all_tools()
        return cls([tool_definition(t) for t in tools.values()], modules, tools)

    @classmethod
    def load(cls, cache_dir: Path | None = None) -> Catalog:
        """The cached catalog when it is current, else a built one (then cached).

        Args:
            cache_dir: where the cache lives (default: :func:`cache_dir`).
        """
        key = catalog_key()
        try:
            folder = cache_dir or default_cache_dir()
        except RuntimeError:  # no home folder to cache in
            return cls.build()
        path = folder / f"{CACHE_PREFIX}{key}.json"
        cached = _read(path, key)
        if cached is not None:
            return cached
        built = cls.build()
        _write(path, key, built)
        return built

    def without(self, domains: Collection[str]) -> Catalog:
        """This catalog without the tools of ``domains`` (``tasks``: those of the domains
        ``loop.toml`` turns off, which a session does not serve)."""
        if not domains:
            return self
        modules = {registry.domain_module(d) for d in domains}
        gone = {name for name, module in self._modules.items() if module in modules}
        gone |= {name for name, tool in self._tools.items() if tool.domain in domains}
        return Catalog(
            [d for d in self.definitions if d.name not in gone],
            {n: m for n, m in self._modules.items() if n not in gone},
            {n: t for n, t in self._tools.items() if n not in gone},
        )

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._tools

    def __len__(self) -> int:
        return len(self.definitions)

    def names(self) -> list[str]:
        """The tool names, in listing order."""
        return [d.name for d in self.definitions]

    def tool(self, name: str) -> Tool:
        """The tool ``name``, its domain imported on first use (thread-safe: imports are).

        Raises:
            KeyError: no tool of this catalog has that name.
        """
        tool = self._tools.get(name)
        if tool is None:
            module = importlib.import_module(self._modules[name])
            tool = next(t for t in module.TOOLS if t.name == name)
            self._tools[name] = tool
        return tool


def catalog_key() -> str:
    """What the rendered definitions depend on, as a short hash (see the module docs)."""
    digest = hashlib.sha256()
    versions = (__version__, sys.version, pydantic.VERSION, _stamp(Path(mcp_types.__file__)))
    digest.update(json.dumps([str(PACKAGE), versions, list(registry.DOMAIN_MODULES)]).encode())
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(f"{path.relative_to(PACKAGE)}:{_stamp(path)}\n".encode())
    return digest.hexdigest()[:24]


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/hatloop``, or ``~/.cache/hatloop``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hatloop"


def _read(path: Path, key: str) -> Catalog | None:
    try:
        data = json.loads(path.read_bytes())
        if data["key"] != key:
            return None
        entries: list[dict[str, Any]] = data["tools"]
        definitions = [MCPTool.model_validate(e["definition"]) for e in entries]
        modules = {d.name: str(e["module"]) for d, e in zip(definitions, entries, strict=True)}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreadable: rebuilt
        log.debug("tool catalog cache ignored", path=str(path), error=str(exc))
        return None
    return Catalog(definitions, modules)


def _write(path: Path, key: str, catalog: Catalog) -> None:
    entries = [
        {
            "module": catalog._modules[d.name],
            "definition": d.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for d in catalog.definitions
    ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"key": key, "tools": entries}, durable=False)
    except OSError as exc:  # a read-only install: start-up just stays slower
        log.debug("tool catalog not cached", path=str(path), error=str(exc))
        return
    for old in _others(path):
        with contextlib.suppress(OSError):
            old.unlink()


def _others(path: Path) -> Iterator[Path]:
    return (p for p in path.parent.glob(f"{CACHE_PREFIX}*.json") if p != path)
