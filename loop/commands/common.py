"""What the commands share: running an async function, printing a JSON result, the
sessions folder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop._fs import require_folder
from loop.locations import DEFAULT_SESSIONS_DIR

__all__ = ["SESSIONS_DIR_HELP", "print_json", "run_async", "sessions_root"]


def run_async(func: Callable[..., Any], *args: Any) -> Any:
    """Run an async function under anyio, on asyncio (the MCP endpoint's server needs it)."""
    # anyio is imported by the commands that run something, not by ``--help``
    import anyio  # noqa: PLC0415 - start-up speed, see above

    return anyio.run(func, *args, backend="asyncio")


def print_json(value: Any) -> None:
    """Print a JSON result on stdout."""
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


SESSIONS_DIR_HELP = "default: [loop] sessions_dir of ./loop.toml, else .loop/sessions"


def sessions_root(flag: str | None) -> Path:
    """The sessions folder: the flag, else ``[loop] sessions_dir`` of ``./loop.toml``.

    Raises:
        StoreError: a file is where the folder belongs; PathError: a link is (inside
            the project, no link is followed).
    """
    if flag:
        root = Path(flag)
    else:
        from loop.config.project import tool_settings_from_project  # noqa: PLC0415 - on use

        settings = tool_settings_from_project(Path.cwd())
        root = Path(settings.get("sessions_dir", DEFAULT_SESSIONS_DIR))
    full, project = Path(os.path.abspath(root)), Path.cwd()  # noqa: PTH100 - lexical
    require_folder(full, root=project if project in (full, *full.parents) else full)
    return root
