"""The theme domain (seed 001): preview, atomic start, end, feedbackbox, heartbeats.

``tools.TOOLS`` registers the tools; ``cli.register`` adds ``python -m loop theme``;
``extension.ThemesExtension`` connects the workspace to the loop. See docs/themes-guide.md.
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
