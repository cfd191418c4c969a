"""The peers, each doing the same two-node ping-pong with no real work.

Every module exposes ``run(params) -> dict`` with ``mode`` (``bare`` or a recording or
persistence mode of the peer's own) and ``n`` (transitions); the result carries
``per_iter_us`` measured from the first transition to the last, like the engine's.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PEERS", "run_peer"]

# peer -> (module, modes); the distributions to install are env.PEER_REQUIREMENTS
PEERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama-index-workflows": ("bench.peers.llama", ("bare", "snapshot")),
    "autogen-core": ("bench.peers.autogen", ("bare", "publish_hook")),
    "burr": ("bench.peers.burr_peer", ("bare", "tracker", "sqlite")),
    "pydantic-graph": ("bench.peers.pgraph", ("bare", "file")),
}


def run_peer(params: dict[str, Any]) -> dict[str, Any]:
    """Run ``params['peer']`` in ``params['mode']``."""
    module = importlib.import_module(PEERS[params["peer"]][0])
    result: dict[str, Any] = module.run(params)
    return result
