"""pydantic-graph (1.x, the BaseNode graph): two nodes; persistence = FileStatePersistence."""

from __future__ import annotations

import asyncio
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import Stamps

with warnings.catch_warnings():
    # 1.x warns that the BaseNode graph moves in 2.x; 2.x has no persistence to compare.
    warnings.simplefilter("ignore")
    from pydantic_graph import BaseNode, End, Graph, GraphRunContext
    from pydantic_graph.persistence.file import FileStatePersistence

_stamps = Stamps()


@dataclass
class PPState:
    """The graph state: the transition count and where to stop."""

    n: int = 0
    limit: int = 0


@dataclass
class PingNode(BaseNode[PPState, None, int]):
    """One ping transition."""

    async def run(self, ctx: GraphRunContext[PPState]) -> PongNode | End[int]:
        """Count, then hand over to pong (or stop)."""
        _stamps.hit()
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= ctx.state.limit else PongNode()


@dataclass
class PongNode(BaseNode[PPState, None, int]):
    """One pong transition."""

    async def run(self, ctx: GraphRunContext[PPState]) -> PingNode | End[int]:
        """Count, then hand over to ping (or stop)."""
        _stamps.hit()
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= ctx.state.limit else PingNode()


GRAPH = Graph(nodes=(PingNode, PongNode), state_type=PPState, run_end_type=int)


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Run the graph bare (in-memory state) or with ``FileStatePersistence``."""
    global _stamps  # noqa: PLW0603 - the nodes are module-level classes
    _stamps = Stamps()
    n = int(params["n"])
    with tempfile.TemporaryDirectory(prefix="bench-pgraph-") as tmp:
        kwargs: dict[str, Any] = {}
        if params["mode"] == "file":
            kwargs["persistence"] = FileStatePersistence(Path(tmp) / "graph.json")
        asyncio.run(GRAPH.run(PingNode(), state=PPState(0, n), **kwargs))
    return _stamps.result()
