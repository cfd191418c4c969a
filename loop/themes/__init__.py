"""The theme domain: preview, atomic start, end, feedbackbox, heartbeats.

It owns the theme workspace (the themebox, the active themes, the feedbackbox, the
heartbeat) and the rules over it; it imports the leaf modules and ``loop.tools.base``.

* :mod:`loop.themes.models`, :mod:`~loop.themes.naming`: the tools' inputs and outputs, ids;
* :mod:`loop.themes.workspace`: the workspace's files (locked, atomic);
* :mod:`loop.themes.lifecycle`, :mod:`~loop.themes.feedback`, :mod:`~loop.themes.status`,
  :mod:`~loop.themes.heartbeat`, :mod:`~loop.themes.ops`, :mod:`~loop.themes.service`:
  what each tool does;
* :mod:`loop.themes.tools`: ``TOOLS``, served by the CLI, the MCP server and the bus,
  and ``BUS``, how hats request them with ``theme.*`` events;
* :mod:`loop.themes.extension`: a heartbeat per iteration and the prompt section. The
  ``theme`` command is :mod:`loop.commands.theme`; docs/themes-guide.md is the guide.
"""

from __future__ import annotations

from loop.themes.heartbeat import next_heartbeat_id, read_heartbeat_id, write_heartbeat
from loop.themes.ops import Operations
from loop.themes.service import ThemeService
from loop.themes.workspace import Workspace

__all__ = [
    "Operations",
    "ThemeService",
    "Workspace",
    "next_heartbeat_id",
    "read_heartbeat_id",
    "write_heartbeat",
]
