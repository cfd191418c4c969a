"""The tool registry: each tool is written once and served three ways.

The command line (:mod:`loop.commands.tools`), the MCP server
(:mod:`loop.tools.mcp_server`) and the bus (:mod:`loop.tools.bus`) all call
:meth:`~loop.tools.base.Tool.run` (:func:`call_tool` by name), so no rule exists twice.
"""

from __future__ import annotations

import importlib
from typing import Any

from loop.errors import ToolError
from loop.tools.base import Tool, ToolContext

__all__ = ["DOMAIN_MODULES", "all_tools", "call_tool", "domain_module", "get_tool", "known_tools"]

# Each domain module exposes ``TOOLS: list[Tool]`` (served over the CLI, MCP and the bus),
# and may expose ``OWN_TOOLS``: the ones the loop and the CLI call but no agent is served
# (the theme heartbeat). Imported by name, on first use: a command that serves one
# domain's tools starts without the others.
DOMAIN_MODULES: tuple[str, ...] = (
    "loop.tasks.tools",
    "loop.themes.tools",
    "loop.experience.tools",
    "loop.session.tools",
)


def domain_module(domain: str) -> str:
    """The module of the domain named as its ``loop.toml`` section and its tools'
    ``domain`` (``tasks`` → ``loop.tasks.tools``).

    Raises:
        ValueError: no such domain.
    """
    module = f"loop.{domain}.tools"
    if module not in DOMAIN_MODULES:
        raise ValueError(f"no tool domain {domain!r}")
    return module


_cache: dict[str, Tool] | None = None
_known: dict[str, Tool] | None = None


def all_tools() -> dict[str, Tool]:
    """Every registered tool by name, in domain order (imports the domains once)."""
    global _cache  # noqa: PLW0603 - a process-wide, import-once registry cache
    if _cache is None:
        tools: dict[str, Tool] = {}
        for module_name in DOMAIN_MODULES:
            module = importlib.import_module(module_name)
            for tool in module.TOOLS:
                if tool.name in tools:
                    raise RuntimeError(f"tool {tool.name!r} registered twice")
                tools[tool.name] = tool
        _cache = tools
    return _cache


def known_tools() -> dict[str, Tool]:
    """Every tool a journaled call may name: :func:`all_tools`, then the domains' own
    (``OWN_TOOLS``), which a replay makes again when an agent's command called one."""
    global _known  # noqa: PLW0603 - a process-wide, import-once registry cache
    if _known is None:
        tools = dict(all_tools())
        for module_name in DOMAIN_MODULES:
            for tool in getattr(importlib.import_module(module_name), "OWN_TOOLS", ()):
                if tool.name in tools:
                    raise RuntimeError(f"tool {tool.name!r} registered twice")
                tools[tool.name] = tool
        _known = tools
    return _known


def get_tool(name: str) -> Tool:
    """The tool called ``name``; an unknown name is a ``ToolError``."""
    tools = all_tools()
    if name not in tools:
        raise ToolError("unknown_tool", f"no tool named {name!r}", details={"known": sorted(tools)})
    return tools[name]


def call_tool(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a tool by name with raw arguments; return its JSON-ready output."""
    result = get_tool(name).run(ctx, args)
    return result.model_dump(mode="json", by_alias=True)
