"""hatloop: an asynchronous, event-driven agent loop runner.

The import is deliberately light (``python -m loop emit`` starts through here):
nothing heavy is imported at package level.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
