"""One registry of tools, served as CLI subcommands, over MCP and on the bus."""

from __future__ import annotations

from loop.tools.registry import Tool, ToolContext, all_tools, call_tool, get_tool

__all__ = ["Tool", "ToolContext", "all_tools", "call_tool", "get_tool"]
