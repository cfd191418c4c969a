"""The package's import graph: layers point one way, and no module imports itself back.

Every ``import`` in ``loop/`` is read with :mod:`ast`, including the ones inside
functions (imported on use) and under ``TYPE_CHECKING``: each is a dependency all the
same. A module may import from its own layer or from a layer below it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "loop"

# Bottom to top. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "leaf",
        (
            "loop._faults",
            "loop._fs",
            "loop._gc",
            "loop._json",
            "loop._names",
            "loop._log",
            "loop._prefix",
            "loop._signals",
            "loop._text",
            "loop._user_code",
            "loop._version",
            "loop.bus",
            "loop.emit",
            "loop.errors",
            "loop.events",
            "loop.exits",
            "loop.extensions",
            "loop.locations",
            "loop.records",
            "loop.redact",
            # which hat an event goes to: the engine routes by it, the config reasons with it
            "loop.routing",
            "loop.topics",
            # what a tool is: the domains implement it, as backends implement backends.base
            "loop.tools.base",
            # which iteration a tool call is part of: the engine collects, the tools record
            "loop.tools.calls",
        ),
    ),
    ("config", ("loop.config",)),
    ("backends", ("loop.backends",)),
    ("engine", ("loop.engine",)),
    ("session", ("loop.session",)),
    ("domains", ("loop.tasks", "loop.themes", "loop.experience")),
    ("tools", ("loop.tools",)),
    (
        "commands",
        (
            "loop.__main__",
            "loop.cli",
            "loop.commands",
            # what assembles a whole run (every domain included) and what drives one
            "loop.pytest_plugin",
            "loop.replay",
            "loop.runner",
            "loop.testing",
        ),
    ),
    # the public facade: it names what the layers below define (imported on first use)
    ("api", ("loop",)),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _target(name: str) -> str:
    """The module of ``name`` (``loop.a.b`` may name ``b`` inside module ``loop.a``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for every import of ``loop`` modules in ``path``."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "loop" or name.startswith("loop."):
                target = _target(name)
                if target != module:
                    yield target, node.lineno


GRAPH = {m: sorted(set(_imports(m, p))) for m, p in MODULES.items()}


def layer_of(module: str) -> int | None:
    """The index of ``module``'s layer in :data:`LAYERS` (``None``: no layer names it)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            named = module == prefix or (prefix != "loop" and module.startswith(prefix + "."))
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def test_every_module_has_a_layer() -> None:
    """A new module or package is given its place in LAYERS."""
    assert [m for m in MODULES if layer_of(m) is None] == []


Graph = dict[str, list[tuple[str, int]]]


def upward_imports(graph: Graph) -> list[str]:
    """Every import in ``graph`` of a module from a layer above the importer's."""
    upward = []
    for module, imports in graph.items():
        mine = layer_of(module)
        for target, line in imports:
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(
                    f"{module}:{line} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})"
                )
    return upward


def cycle_from(graph: Graph, start: str) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        module, path = stack.pop()
        for target, _ in graph.get(module, []):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_imports_point_down_the_layers() -> None:
    """No module imports from a layer above its own."""
    assert upward_imports(GRAPH) == []


def test_no_import_cycles() -> None:
    """No module reaches itself through imports (lazy ones included)."""
    cycles = [" -> ".join(c) for m in sorted(GRAPH) if (c := cycle_from(GRAPH, m)) is not None]
    assert cycles == []


def test_lazy_imports_say_why() -> None:
    """An import inside a function carries its reason (start-up speed), never a cycle."""
    bare = []
    for module, path in MODULES.items():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "noqa: PLC0415" in line:
                reason = re.search(r"noqa: PLC0415 - (.+)", line)
                if reason is None or "cycle" in reason.group(1):
                    bare.append(f"{module}:{number}: {line.strip()}")
    assert bare == []


def test_the_checks_find_an_upward_import_and_a_cycle() -> None:
    """The checks flag what they look for, in a made-up graph (one that cannot fail is none)."""
    graph: Graph = {
        "loop.engine.driver": [("loop.session.store", 3)],
        "loop.session.store": [("loop.engine.state", 5)],
        "loop.engine.state": [("loop.engine.driver", 7)],
    }
    assert upward_imports(graph) == [
        "loop.engine.driver:3 (engine) imports loop.session.store (session)"
    ]
    assert cycle_from(graph, "loop.engine.state") == [
        "loop.engine.state",
        "loop.engine.driver",
        "loop.session.store",
        "loop.engine.state",
    ]
    assert cycle_from(graph, "loop.events") is None


def test_the_graph_is_read_from_the_sources() -> None:
    """Top-level, lazy and ``from package import module`` imports are all edges."""
    driver = {target for target, _ in GRAPH["loop.engine.driver"]}
    assert {"loop.engine.state", "loop.engine.journal", "loop.events"} <= driver
    assert "loop.replay" in {target for target, _ in GRAPH["loop.pytest_plugin"]}  # lazy
    assert layer_of("loop.tools.base") == 0
    assert layer_of("loop.commands.task") == len(LAYERS) - 2
    assert (layer_of("loop"), layer_of("loop._version")) == (len(LAYERS) - 1, 0)
