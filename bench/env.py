"""The bench's own virtualenv (``bench/.venv``): hatloop, the peers, orjson, pyinstrument.

The peers are never project dependencies: they live only here. An existing environment
is reused; only what is missing gets installed.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["PEER_REQUIREMENTS", "ensure_venv", "installed_versions"]

# pydantic-graph is held below 2: 2.x dropped the BaseNode graph's persistence
# (FileStatePersistence), which is what the persistence-on comparison needs.
PEER_REQUIREMENTS: dict[str, str] = {
    "llama-index-workflows": "llama-index-workflows",
    "autogen-core": "autogen-core",
    "apache-burr": "apache-burr",
    "pydantic-graph": "pydantic-graph<2",
}
TOOLS = {"orjson": "orjson", "pyinstrument": "pyinstrument"}
_IMPORTS = {
    "llama-index-workflows": "workflows",
    "autogen-core": "autogen_core",
    "apache-burr": "burr",
    "pydantic-graph": "pydantic_graph.persistence.file",
    "orjson": "orjson",
    "pyinstrument": "pyinstrument",
    "hatloop": "loop",
}


def _python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _importable(python: Path, module: str) -> bool:
    proc = subprocess.run(  # -I: not from the current folder (a checkout has loop/ in it)
        [str(python), "-I", "-c", f"import {module}"],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


def ensure_venv(root: Path, *, log: object = print) -> Path:
    """Create or complete ``bench/.venv``; return its interpreter.

    Raises:
        RuntimeError: ``pip`` failed (its output tail is in the message).
    """
    venv_dir = root / "bench" / ".venv"
    python = _python(venv_dir)
    if not python.exists():
        log(f"creating {venv_dir}")  # type: ignore[operator]
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    wanted: list[str] = []
    if not _importable(python, "loop"):
        wanted += ["-e", str(root)]
    names = dict(TOOLS) | PEER_REQUIREMENTS
    wanted += [req for dist, req in names.items() if not _importable(python, _IMPORTS[dist])]
    if wanted:
        log(f"installing into {venv_dir}: {' '.join(wanted)}")  # type: ignore[operator]
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *wanted],
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                "pip install failed:\n" + proc.stderr.decode(errors="replace")[-2000:]
            )
    return python


def installed_versions(python: Path | str, dists: list[str]) -> dict[str, str | None]:
    """Installed versions of ``dists`` in the environment of ``python``."""
    code = (
        "import json, sys\nfrom importlib import metadata\nout = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try:\n        out[d] = metadata.version(d)\n"
        "    except metadata.PackageNotFoundError:\n        out[d] = None\n"
        "print(json.dumps(out))"
    )
    proc = subprocess.run(
        [str(python), "-c", code, *dists],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        return dict.fromkeys(dists)
    import json

    result: dict[str, str | None] = json.loads(proc.stdout)
    return result
