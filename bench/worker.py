"""Runs one benchmark case in a fresh process: ``python -m bench.worker CASE PARAMS_JSON``.

Prints the case's result as one JSON line on stdout. A fresh process per run keeps the
cases from warming or slowing each other (imports, GC state, the tasks parse cache).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from typing import Any

CASES: dict[str, str] = {
    "engine": "bench.engine_cases:engine_pingpong",
    "bus_pingpong": "bench.engine_cases:bus_pingpong",
    "bus_fanout": "bench.engine_cases:bus_fanout",
    "tasks": "bench.tasks_cases:task_ops",
    "replay": "bench.replay_cases:replay_file",
    "floor_queue": "bench.floor_cases:queue_pingpong",
    "floor_journaled": "bench.floor_cases:journaled_loop",
    "floor_contract": "bench.floor_cases:contract_loop",
    "floor_jsonl": "bench.floor_cases:jsonl_append_parse",
    "floor_fsync": "bench.floor_cases:fsync_per_line",
    "floor_fdatasync": "bench.floor_cases:fdatasync_per_line",
    "peer": "bench.peers:run_peer",
    "parallel_overhead": "bench.parallel:parallel_overhead",
    "parallel_wave": "bench.parallel:parallel_wave",
    "mcp_startup": "bench.mcp_cases:mcp_startup",
    "mcp_stdio": "bench.mcp_cases:mcp_stdio",
    "mcp_http": "bench.mcp_cases:mcp_http",
}


def resolve(case: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function behind ``case``."""
    import importlib

    module, _, name = CASES[case].partition(":")
    func: Callable[[dict[str, Any]], dict[str, Any]] = getattr(
        importlib.import_module(module), name
    )
    return func


def main(argv: list[str]) -> int:
    """Run the case named in ``argv[0]`` with the JSON params in ``argv[1]``."""
    warnings.simplefilter("ignore")  # peers' deprecation notices are not results
    import logging

    logging.disable(logging.WARNING)
    case, params = argv[0], json.loads(argv[1])
    result = resolve(case)(params)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
