"""``hatloop doctor``: the preflight of a run, one line per check (see
:mod:`loop.session.preflight`). Exit 0 when nothing failed (warnings allowed), 2 when a
check failed."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from loop.commands.common import add_path_argument, print_json
from loop.commands.run import add_config_options, load_from_args
from loop.exits import EXIT_OK, EXIT_USAGE
from loop.session.preflight import preflight

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor``."""
    p = sub.add_parser(
        "doctor",
        help="check what a run needs: backends, programs, modules, API keys, folders",
        description="Check what a run of this configuration needs, calling no agent: every "
        "hat has a backend, its program is found, its Python target imports, its API key "
        "is set (a warning only), and the folders a run writes can be written. "
        "Exit 0 when no check failed, 2 when one did. `run` does the same first.",
    )
    add_config_options(p)
    add_path_argument(
        p, "--record-session", metavar="FILE", help="also check that this recording can be written"
    )
    p.add_argument("--json", action="store_true", help="the checks as JSON")
    p.set_defaults(handler=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    config = load_from_args(args, prompt=False)  # a missing objective is one of the checks
    record = Path(args.record_session) if args.record_session else None
    checks = preflight(config, recording=record)
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    if args.json:
        print_json({"config": config.source, "checks": [asdict(c) for c in checks]})
    else:
        print(f"config {config.source}" + (" (the built-in demo)" if config.builtin else ""))
        for check in checks:
            print(check.line())
        print(f"{len(checks) - failed - warned} ok, {warned} warning(s), {failed} failed")
    return EXIT_USAGE if failed else EXIT_OK
