"""The user's own Python, named ``module:name`` (a ``python`` hat's ``target``, an
extension given to ``replay --extension``): one rule for finding it.

The module is imported from a folder (the project's, where the loop runs), as a script
in that folder would import it; a module that raises as it is imported is one that
cannot be used, as one that is not there.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__all__ = ["load_named"]


def load_named(spec: str, where: Path) -> object:
    """The object ``spec`` (``module:name``) names, its module imported from ``where``.

    Raises:
        ValueError: why it cannot be had, in words to follow the spec in a one-line
            error: not ``module:name``, the module cannot be imported (or raised as it
            was: what it raised), or it has no such name.
    """
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise ValueError("expected module:name")
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or what the module raised as it ran
        raise ValueError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    found = getattr(module, name, None)
    if found is None:
        raise ValueError(f"{module_name} has no {name!r}")
    return found
