"""Tools: each written once (:mod:`loop.tools.base`), served as CLI subcommands, over MCP
and on the bus. :mod:`loop.tools.registry` lists every domain's tools."""
