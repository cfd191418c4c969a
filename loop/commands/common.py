"""What the commands share: running an async function, printing a JSON result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["print_json", "run_async"]


def run_async(func: Callable[..., Any], *args: Any) -> Any:
    """Run an async function on asyncio (aiofiles ties hatloop to it)."""
    # anyio is imported by the commands that run something, not by ``--help``
    import anyio  # noqa: PLC0415 - start-up speed, see above

    return anyio.run(func, *args, backend="asyncio")


def print_json(value: Any) -> None:
    """Print a JSON result on stdout."""
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))
