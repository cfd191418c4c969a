"""``loop init``: write a commented loop.toml and hat files to start from (never overwrite),
from a preset or converted from a Ralph Orchestrator configuration (``--from-ralph``).

``--backend B`` makes B every hat's backend: the preset's ``[backend]`` block (the
comments above ``[backend]`` and the table, last in ``loop.toml``) is replaced by B's
own commented block (``presets/_backends/B.toml``: its defaults and how to override
them), and the hats' own backend tables are dropped. For the scripted backend, a hat
left without outputs gets a stand-in (:mod:`loop.config.stand_ins`): the stand-ins walk
the topology from its starting event to its completion, so the loop runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from loop._fs import write_new_file
from loop.cli import prog_name
from loop.commands.common import add_path_argument
from loop.config import preset_dir, preset_names
from loop.config.backends import CLI_BACKENDS
from loop.config.models import HatConfig, HatFile
from loop.config.ralph import RalphConversion, convert_ralph
from loop.config.sections import LoopSection
from loop.config.stand_ins import StandIns, stand_ins
from loop.errors import ConfigError, InputError, UsageError

__all__ = [
    "BACKENDS",
    "backend_block",
    "check_converted",
    "ignores_state",
    "plan_files",
    "ralph_files",
    "register",
    "with_backend",
]

BACKENDS = CLI_BACKENDS  # the same choice as `run --backend`
_BACKEND_TABLE = re.compile(r"^\[hats\.[^\]]+\.backend\]\s*$", re.MULTILINE)
_BACKEND_HEADER = re.compile(r"^\[backend\]", re.MULTILINE)
_TYPE = re.compile(r'^type = "(\w+)"', re.MULTILINE)


def backend_block(backend: str) -> str:
    """The commented ``[backend]`` block ``init --backend`` writes for ``backend``."""
    return (preset_dir("default").parent / "_backends" / f"{backend}.toml").read_text("utf-8")


def _block_start(text: str) -> int:
    # The block is the [backend] table (last in a preset's loop.toml) and the comment
    # lines right above it.
    match = _BACKEND_HEADER.search(text)
    if match is None:
        raise UsageError("this preset's loop.toml has no [backend] table to replace")
    lines = text[: match.start()].splitlines(keepends=True)
    while lines and lines[-1].startswith("#"):
        lines.pop()
    return len("".join(lines))


def _strip_backend_tables(text: str) -> str:
    # Preset hat files keep their per-hat backend table last: cut from it to the end.
    match = _BACKEND_TABLE.search(text)
    return text[: match.start()].rstrip() + "\n" if match else text


def _stand_ins(files: dict[Path, str]) -> StandIns:
    """The stand-ins of every hat in the TOML files (``loop.toml``'s ``[loop]`` and the
    hats of every file), read with the models ``run`` reads them with."""
    loop = LoopSection.model_validate(tomllib.loads(files[Path("loop.toml")]).get("loop", {}))
    hats: dict[str, HatConfig] = {}
    for rel, text in files.items():
        if rel.suffix == ".toml":
            hats.update(HatFile.model_validate({"hats": tomllib.loads(text).get("hats", {})}).hats)
    return stand_ins(loop, hats)


def _with_stand_ins(text: str, standing: StandIns) -> str:
    """A hat file with a stand-in for each of its hats that has no backend of its own."""
    hats: dict[str, Any] = tomllib.loads(text).get("hats", {})
    tables = []
    for name, hat in hats.items():
        if not isinstance(hat, dict) or "backend" in hat:
            continue
        outputs = "".join(
            f"  {json.dumps(o, ensure_ascii=False)},\n" for o in standing.outputs[name]
        )
        tables.append(
            f"\n[hats.{name}.backend]              # a stand-in: replace with an agent\n"
            f'type = "scripted"\noutputs = [\n{outputs}]\n'
            "repeat_last = true                 # past its outputs, the last one again\n"
        )
    return text.rstrip() + "\n" + "".join(tables) if tables else text


def plan_files(preset: str, backend: str | None) -> dict[Path, str]:
    """Relative path → content for ``init`` (pure apart from reading the preset)."""
    root = preset_dir(preset)
    files: dict[Path, str] = {}
    for src in sorted(root.rglob("*")):
        rel = src.relative_to(root)
        if src.is_dir() or any(part.startswith((".", "__")) for part in rel.parts):
            continue
        files[rel] = src.read_text(encoding="utf-8")
    return with_backend(files, backend)


def with_backend(files: dict[Path, str], backend: str | None) -> dict[Path, str]:
    """``files`` (a ``loop.toml`` and hat files) with every hat on ``backend``: the
    ``[backend]`` block replaced, the hats' own backend tables dropped (and, for the
    scripted backend, stand-ins added). ``None`` changes nothing."""
    config = files[Path("loop.toml")]
    own = _TYPE.search(config[_block_start(config) :])
    if backend is None or (own is not None and own.group(1) == backend):
        return files  # the preset as shipped
    files = dict(files)
    files[Path("loop.toml")] = config[: _block_start(config)] + backend_block(backend)
    hat_files = [rel for rel in files if rel.suffix == ".toml" and rel.name != "loop.toml"]
    for rel in hat_files:
        files[rel] = _strip_backend_tables(files[rel])
    if backend == "scripted":
        standing = _stand_ins(files)
        for rel in hat_files:
            files[rel] = _with_stand_ins(files[rel], standing)
    return files


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``init``."""
    p = sub.add_parser("init", help="write a loop.toml and hat files to start from")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--preset", default="default", help=f"one of: {', '.join(preset_names())}")
    add_path_argument(
        source,
        "--from-ralph",
        metavar="RALPH_YML",
        help="convert a Ralph Orchestrator configuration or preset (needs PyYAML: "
        "pip install 'hatloop[ralph]')",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        help="every hat's backend (replaces the preset's [backend] and per-hat backends)",
    )
    add_path_argument(p, "--dir", default=".", help="where to write (default: here)")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    target = Path(args.dir)
    notes: list[str] = []
    if args.from_ralph is not None:
        converted = ralph_files(Path(args.from_ralph))
        check_converted(converted.files, args.from_ralph)  # before --backend reads its hats
        files, notes = with_backend(converted.files, args.backend), converted.notes_on(args.backend)
        check_converted(files, args.from_ralph)
        origin = f"converted from {args.from_ralph}"
    else:
        files, origin = plan_files(args.preset, args.backend), f"preset {args.preset}"
    if target.exists() and not target.is_dir():
        raise UsageError(f"--dir {args.dir}: not a folder")
    existing = [str(target / rel) for rel in files if (target / rel).exists()]
    if existing:
        raise UsageError("init never overwrites; these files exist already: " + ", ".join(existing))
    written = _Written()
    try:  # all of it or nothing: what was written is removed again on a failure
        for rel, text in files.items():
            written.write(target / rel, text)
        said = _ignore_state(target / ".gitignore")  # last: an append cannot be undone
    except InputError as exc:  # a file in the way, a folder that cannot be written...
        written.undo()
        kind = UsageError if isinstance(exc, UsageError) else InputError
        raise kind(f"{exc.message}; nothing was written") from None
    except BaseException:
        written.undo()
        raise
    for dest in written.files:
        print(f"wrote {dest}")
    for note in notes:
        print(f"not carried over: {note}")
    if args.backend == "scripted" and (stuck := _stand_ins(files).stuck):
        print(f"stand-ins: {stuck}")
    if said:
        print(said)
    prog = prog_name()
    into = "" if target.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(args.dir)} && "
    print(f"next: {into}{prog} doctor && {prog} run   ({origin})")
    return 0


class _Written:
    """The files and folders ``init`` made, to remove again when it cannot finish."""

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.folders: list[Path] = []

    def write(self, dest: Path, text: str) -> None:
        """Create ``dest`` (and the folders it goes in) with ``text``, never over a file.

        Raises:
            UsageError: ``dest`` appeared meanwhile. InputError: it cannot be written.
        """
        missing = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
        try:
            for folder in reversed(missing):
                folder.mkdir()
                self.folders.append(folder)
            write_new_file(dest, text)  # whole or not at all
        except FileExistsError:
            raise UsageError(f"init never overwrites; {dest} exists already") from None
        except OSError as exc:
            where = exc.filename or dest
            raise InputError(f"init: cannot write {where}: {exc.strerror or exc}") from None
        self.files.append(dest)

    def undo(self) -> None:
        """Remove what was written, then the folders made (each only when empty)."""
        for dest in reversed(self.files):
            with contextlib.suppress(OSError):
                dest.unlink()
        for folder in reversed(self.folders):
            with contextlib.suppress(OSError):
                folder.rmdir()


def ralph_files(path: Path) -> RalphConversion:
    """Read and convert a Ralph configuration file.

    Raises:
        UsageError: PyYAML is missing.
        InputError: the file cannot be read, is not YAML, or is not a Ralph configuration.
    """
    try:
        import yaml  # noqa: PLC0415 - an optional extra, needed by this command only
    except ImportError:
        raise UsageError("init --from-ralph needs PyYAML: pip install 'hatloop[ralph]'") from None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not YAML: {' '.join(str(exc).split())}") from None
    return convert_ralph(data, source=str(path))


def check_converted(files: dict[Path, str], source: str) -> None:
    """Load the converted files as ``run`` would, before any is written: a value Ralph
    took that hatloop refuses (``concurrency: 0``) is the conversion's error.

    Raises:
        InputError: naming ``source``, the converted file and the key.
    """
    from loop.config import load_config  # noqa: PLC0415 - init of a preset does not need it

    with tempfile.TemporaryDirectory(prefix="hatloop-init-") as tmp:
        folder = Path(tmp)
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
        try:
            load_config(folder / "loop.toml", root=folder, prompt=False)
        except ConfigError as exc:
            where = str(exc).replace(f"{folder}{os.sep}", "")
            raise InputError(
                f"{source}: the converted configuration is not valid, nothing was written: {where}"
            ) from None


IGNORED = ".loop/"  # the run's state: sessions, tasks, themes, experiences


def ignores_state(text: str) -> bool:
    """Whether a ``.gitignore``'s text already ignores ``.loop/`` (in a form git reads
    as that folder at the top)."""
    return any(
        line.strip() in (".loop", ".loop/", "/.loop", "/.loop/") for line in text.splitlines()
    )


def _ignore_state(path: Path) -> str:
    """Make ``path`` (a ``.gitignore``) ignore ``.loop/``: write it, or append one line to
    the user's own (never rewritten); what was done, or "" when nothing was needed."""
    try:
        write_new_file(
            path, f"# hatloop's state: sessions, tasks, themes, experiences\n{IGNORED}\n"
        )
    except FileExistsError:
        pass
    except OSError as exc:
        raise InputError(f"init: cannot write {path}: {exc.strerror or exc}") from None
    else:
        return f"wrote {path}"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if ignores_state(text):
        return ""
    try:
        with path.open("a", encoding="utf-8") as fh:  # appended: the user's lines stay
            fh.write(("" if not text or text.endswith("\n") else "\n") + IGNORED + "\n")
    except OSError as exc:
        raise InputError(f"init: cannot write {path}: {exc.strerror or exc}") from None
    return f"added {IGNORED} to {path}"
