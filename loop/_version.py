"""hatloop's version, in a leaf (``loop.__version__`` re-exports it; the journal, the
recording, the MCP server and the report stamp it)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
