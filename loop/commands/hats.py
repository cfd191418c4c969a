"""``loop hats list|validate|graph``: the topology at a glance."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata

from loop.cli import prog_name
from loop.commands.common import report_checks
from loop.commands.run import add_config_options, load_from_args
from loop.config.models import AggregateConfig, LoadedConfig
from loop.config.topology import edges, warnings_for
from loop.events import topic_matches
from loop.exits import EXIT_USAGE

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``hats``."""
    p = sub.add_parser("hats", help="list, validate or graph the hats")
    hs = p.add_subparsers(dest="hats_command", metavar="COMMAND", required=True)
    for name, handler, help_text in (
        ("list", _list, "one line per hat: its name, triggers, publishes, backend"),
        (
            "validate",
            _validate,
            "check the config, the topology and the hats' backends (exit 2 on a failure)",
        ),
        ("graph", _graph, "the event flow, as text or Mermaid"),
    ):
        sp = hs.add_parser(name, help=help_text)
        add_config_options(sp)
        if name == "graph":
            sp.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart")
        if name == "list":
            sp.add_argument("--json", action="store_true", help="the hats as JSON")
        sp.set_defaults(handler=handler)


def _hats(args: argparse.Namespace) -> LoadedConfig:
    """The configuration whose hats are shown (the hats, not the objective); where no
    loop.toml is found, a line on stderr says these are the built-in demo's, as ``run``
    does."""
    config = load_from_args(args, prompt=False)
    if config.builtin:
        print(
            "note: no loop.toml here or in a parent folder: these are the built-in demo's "
            f"hats ({prog_name()} init writes your own)",
            file=sys.stderr,
        )
    return config


def _list(args: argparse.Namespace) -> int:
    config = _hats(args)
    if args.json:
        hats = [
            {
                "name": name,
                "display_name": hat.name,
                "triggers": list(hat.triggers),
                "publishes": list(hat.publishes),
                "backend": _backend(config, name),
                "max_activations": hat.max_activations,
                "concurrency": hat.concurrency or 1,
                "aggregate": hat.aggregate.model_dump() if hat.aggregate else None,
            }
            for name, hat in config.hats.items()
        ]
        print(json.dumps({"config": str(config.source), "builtin": config.builtin, "hats": hats}))
        return 0
    rows = [("HAT", "NAME", "TRIGGERS", "PUBLISHES", "BACKEND", "MAX", "PARALLEL")]
    for name, hat in config.hats.items():
        rows.append(
            (
                name,
                hat.name or "-",
                ", ".join(hat.triggers),
                ", ".join(hat.publishes) or "-",
                _backend(config, name) or "-",
                str(hat.max_activations or "-"),
                _parallel(hat.concurrency, hat.aggregate),
            )
        )
    widths = [max(_cells(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(
                cell + " " * (w - _cells(cell)) for cell, w in zip(row, widths, strict=True)
            ).rstrip()
        )
    return 0


def _cells(text: str) -> int:
    """How many terminal columns ``text`` takes: a wide character (an emoji, as in a
    Ralph hat's name ``👷 Worker``) two, a combining mark or a format character none."""
    return sum(
        0
        if unicodedata.category(c) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(c) in "WF"
        else 1
        for c in text
    )


def _backend(config: LoadedConfig, name: str) -> str | None:
    """The type of the backend hat ``name`` runs on; ``None`` when it has none (neither
    its own nor a default ``[backend]``: ``doctor`` and ``run`` refuse it)."""
    backend = config.named_backend(name)
    return backend.type if backend is not None else None


def _parallel(concurrency: int | None, aggregate: AggregateConfig | None) -> str:
    """How a hat runs alongside others: ``3 at once`` (its concurrency), and how it gathers
    a wave (``first``, ``quorum 2``, ``wait_for_all``, with its timeout)."""
    parts = [f"{concurrency} at once"] if concurrency and concurrency > 1 else []
    if aggregate is not None:
        mode = f"quorum {aggregate.count}" if aggregate.mode == "quorum" else aggregate.mode
        limit = aggregate.timeout_seconds
        parts.append(f"aggregates: {mode}" + (f" ({limit:g}s)" if limit is not None else ""))
    return ", ".join(parts) or "-"


def _validate(args: argparse.Namespace) -> int:
    from loop.session.preflight import backend_checks  # noqa: PLC0415 - imports hats' modules

    config = load_from_args(args, prompt=False)  # the hats, not the objective
    hint = f"{prog_name()} doctor shows every check"
    if report_checks(backend_checks(config), hint=hint):
        return EXIT_USAGE
    print(
        f"ok: {len(config.hats)} hat(s) from {config.source}; starts on "
        f"{config.loop.starting_event!r}, completes on {config.loop.completion_event!r}"
    )
    for w in warnings_for(config):
        print(f"warning: {w}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    config = _hats(args)
    start, comp = config.loop.starting_event, config.loop.completion_event
    starters = [
        n for n, h in config.hats.items() if any(topic_matches(t, start) for t in h.triggers)
    ]
    finishers = [n for n, h in config.hats.items() if comp in h.publishes]
    parallel = {  # the hats that run alongside others or gather a wave, and how
        n: how
        for n, h in config.hats.items()
        if (how := _parallel(h.concurrency, h.aggregate)) != "-"
    }
    if args.mermaid:
        print("flowchart LR")
        print(f"  start(({start}))")
        for n in config.hats:
            label = f'"{n}<br/>{parallel[n]}"' if n in parallel else n
            print(f"  {n}[{label}]")
        print(f"  done(({comp}))")
        for n in starters:
            print(f"  start --> {n}")
        for a, topic, b in edges(config):
            print(f"  {a} -->|{topic}| {b}")
        for n in finishers:
            print(f"  {n} --> done")
        return 0
    for n in starters:
        print(f"{start} → {n}")
    for a, topic, b in edges(config):
        print(f"{a} —{topic}→ {b}")
    for n in finishers:
        print(f"{n} → {comp} (done)")
    for n, how in parallel.items():
        print(f"{n}: {how}")
    return 0
