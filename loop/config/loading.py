"""Load the configuration: ``loop.toml`` and hat files, validated, every path resolved.

Unknown keys are errors that name the file and the key. Relative paths in a file
resolve against that file's folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from loop.config.backends import (
    CLI_BACKENDS,
    BackendConfig,
    ClaudeConfig,
    CodexConfig,
    GeminiConfig,
    ScriptedConfig,
)
from loop.config.explain import FLAGS, explain, translate
from loop.config.models import ConfigFile, HatConfig, HatFile, LoadedConfig
from loop.config.project import DEFAULT_CONFIG_NAME, find_config, load_toml
from loop.config.sections import ExperienceSection, LoopSection, TasksSection, ThemesSection
from loop.config.settings import read_config_file
from loop.config.stand_ins import stand_ins
from loop.config.topology import validate_topology
from loop.errors import ConfigError, UsageError

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "config_from_snapshot",
    "find_config",
    "load_config",
    "preset_dir",
    "preset_names",
    "read_prompt",
]


def preset_names() -> list[str]:
    """The names of the presets shipped inside the package."""
    root = resources.files("loop") / "presets"
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))


def preset_dir(name: str) -> Path:
    """The folder of the packaged preset ``name``."""
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r} (known: {', '.join(preset_names())})")
    return Path(str(resources.files("loop") / "presets" / name))


def _hat_files(base: Path, entries: list[str], origin: Path) -> list[Path]:
    """The hat files ``entries`` name (files, or folders of ``*.toml``), each once: a file
    named twice (a folder and a file in it, or a folder listed twice) is loaded once."""
    files: dict[Path, Path] = {}  # resolved -> as named
    for entry in entries:
        p = Path(entry)
        p = p if p.is_absolute() else base / p
        if p.is_dir():
            found = sorted(p.glob("*.toml"))
        elif p.exists():
            found = [p]
        else:
            raise ConfigError(
                f"hat file or folder not found: {entry}", file=origin, key="loop.hats"
            )
        for f in found:
            files.setdefault(f.resolve(), f)
    return list(files.values())


def _flag_hat_files(root: Path, hats: list[Path]) -> list[Path]:
    """The hat files ``--hats`` names.

    Raises:
        UsageError: its folders hold no hat file (not "no hats defined" in loop.toml).
    """
    files = _hat_files(root, [str(h) for h in hats], Path("--hats"))
    if not files:
        raise UsageError(f"--hats {' '.join(str(h) for h in hats)}: no hat files (*.toml)")
    return files


def load_config(
    config: Path | None = None,
    *,
    root: Path | None = None,
    hats: list[Path] | None = None,
    overrides: dict[str, Any] | None = None,
    prompt: bool = True,
) -> LoadedConfig:
    """Load and validate the loop configuration.

    Args:
        config: a ``loop.toml``; ``None`` uses the one :func:`find_config` finds from
            ``root`` (whose folder then becomes the root) or, failing that, the packaged
            default preset (the built-in demo).
        root: the working folder (default: the current one): where state lives and
            agents run.
        hats: hat files or folders replacing ``[loop] hats``.
        overrides: ``[loop]`` keys from the command line (prompt, max_iterations...),
            plus ``backend`` (a type name applied to every hat).
        prompt: ``False``: the objective is not read (``prompt`` is empty), for a
            command that looks at the configuration without running it (``hats list``,
            ``doctor``, which checks it with :func:`read_prompt`).

    Raises:
        ConfigError: naming the file and the key.
    """
    root = root or Path.cwd()
    builtin = False
    if config is None:
        found = find_config(root)
        if found is not None:
            config, root = found, found.parent
        else:
            config, builtin = preset_dir("default") / DEFAULT_CONFIG_NAME, True
    path = config.resolve() if config.exists() else config
    parsed = read_config_file(path)
    base = path.parent
    overrides = dict(overrides or {})
    flags = {
        k: v for k, v in overrides.items() if v is not None and k not in ("prompt", "prompt_file")
    }
    backend_type = overrides.pop("backend", None)
    hat_budgets = {
        key: given
        for key in ("max_cost_usd", "max_tokens")
        if (given := overrides.pop(f"hat_{key}", None))
    }
    loop_data = parsed.loop.model_dump()
    loop_data.update({k: v for k, v in overrides.items() if v is not None})
    # the objective given on the command line replaces the file's, whichever form it takes
    if overrides.get("prompt_file") is not None and overrides.get("prompt") is None:
        loop_data["prompt"] = None
    elif overrides.get("prompt") is not None:
        loop_data["prompt_file"] = None
    try:
        loop = LoopSection.model_validate(loop_data)
    except ValidationError as exc:  # the file's values passed above: a flag's value is wrong
        key, message = explain(exc, LoopSection)
        if key not in flags:  # a rule between keys refused the file's key with a flag's value
            # (--completion-event: the one flag such a rule involves)
            raise UsageError(
                f"--completion-event {loop_data['completion_event']}: {message} "
                f"(loop.{key} in {path})"
            ) from exc
        raise UsageError(f"{FLAGS.get(key, '--' + key.replace('_', '-'))}: {message}") from exc

    all_hats = {n: _resolve_hat_paths(h, base) for n, h in parsed.hats.items()}
    sources: dict[str, Path] = dict.fromkeys(parsed.hats, path)
    files = _flag_hat_files(root, hats) if hats is not None else _hat_files(base, loop.hats, path)
    for hat_file in files:
        data = load_toml(hat_file)
        try:
            hat_set = HatFile.model_validate(data, strict=True)  # as loop.toml's
        except ValidationError as exc:
            raise translate(exc, hat_file, HatFile) from exc
        for name, hat in hat_set.hats.items():
            if name in all_hats:
                raise ConfigError(
                    f"hat {name!r} is also defined in {sources[name]}",
                    file=hat_file,
                    key=f"hats.{name}",
                )
            all_hats[name] = _resolve_hat_paths(hat, hat_file.parent)
            sources[name] = hat_file

    for key, given in hat_budgets.items():
        all_hats = _with_budgets(all_hats, key, given)
    backend = parsed.backend
    if backend_type is not None:
        backend, all_hats = _force_backend(backend_type, all_hats, loop)
    objective = _prompt(loop, base, root, path) if prompt else ""
    loaded = LoadedConfig(
        loop=loop,
        backend=_resolve_backend_paths(backend, base),
        hats=all_hats,
        tasks=_configured(parsed, "tasks", parsed.tasks),
        themes=_themes(parsed, all_hats, backend),
        experience=_configured(parsed, "experience", parsed.experience),
        recording=parsed.recording,
        prompt=objective,
        base_dir=base,
        source=str(path),
        hat_sources=sources,
        root=root.resolve(),
        mcp=parsed.mcp,
        builtin=builtin,
        backend_given="backend" in parsed.model_fields_set or backend_type is not None,
        flags=flags,
    )
    validate_topology(loaded)
    return loaded


def _with_budgets(
    hats: dict[str, HatConfig], key: str, given: dict[str, float]
) -> dict[str, HatConfig]:
    """``hats`` with the budgets ``--hat-max-cost-usd`` or ``--hat-max-tokens`` give.

    Raises:
        UsageError: a hat the configuration does not define, naming the flag.
    """
    for name in given:
        if name not in hats:
            raise UsageError(
                f"--hat-{key.replace('_', '-')}: no hat {name!r} (hats: {', '.join(hats)})"
            )
    return {
        name: hat.model_copy(update={key: given[name]}) if name in given else hat
        for name, hat in hats.items()
    }


def _resolve_hat_paths(hat: HatConfig, base: Path) -> HatConfig:
    if hat.backend is None:
        return hat
    return hat.model_copy(update={"backend": _resolve_backend_paths(hat.backend, base)})


def _resolve_backend_paths(backend: BackendConfig, base: Path) -> BackendConfig:
    if isinstance(backend, ScriptedConfig) and backend.outputs_file:
        p = Path(backend.outputs_file)
        if not p.is_absolute():
            return backend.model_copy(update={"outputs_file": str(base / p)})
    return backend


def _force_backend(
    kind: str, hats: dict[str, HatConfig], loop: LoopSection
) -> tuple[BackendConfig, dict[str, HatConfig]]:
    """Every hat on ``kind``. For ``scripted``, a hat keeps its own scripted outputs, and
    any other hat gets the stand-in ``init --backend scripted`` writes
    (:mod:`loop.config.stand_ins`): the topology runs with no agent."""
    models: dict[str, type[ClaudeConfig | GeminiConfig | CodexConfig]] = {
        "claude": ClaudeConfig,
        "gemini": GeminiConfig,
        "codex": CodexConfig,
    }
    if kind == "scripted":
        standing = stand_ins(loop, hats)
        forced = {
            name: hat
            if isinstance(hat.backend, ScriptedConfig)
            else hat.model_copy(update={"backend": standing.backend(name)})
            for name, hat in hats.items()
        }
        return ScriptedConfig(), forced
    if kind not in models:
        raise ConfigError(
            f"--backend {kind}: one of {', '.join(CLI_BACKENDS)} (command and python need "
            "per-hat settings)"
        )
    backend = models[kind]()
    return backend, {n: h.model_copy(update={"backend": backend}) for n, h in hats.items()}


def read_prompt(config: LoadedConfig) -> str:
    """The objective of ``config`` (a ``[loop] prompt``, its ``prompt_file`` or the
    project's ``PROMPT.md``), read as :func:`load_config` reads it.

    Raises:
        ConfigError: there is none, or its file cannot be read.
    """
    return _prompt(config.loop, config.base_dir, config.root, Path(config.source))


def _prompt(loop: LoopSection, base: Path, root: Path, path: Path) -> str:
    """The objective; one of only white space is none, refused naming where it is."""
    if loop.prompt is not None:
        if not loop.prompt.strip():
            raise ConfigError("empty objective", file=path, key="loop.prompt")
        return loop.prompt
    candidates = []
    if loop.prompt_file:
        p = Path(loop.prompt_file)
        candidates.append(p if p.is_absolute() else base / p)
        if not candidates[0].exists():
            raise ConfigError(
                f"prompt file not found: {loop.prompt_file}", file=path, key="loop.prompt_file"
            )
    else:
        candidates.append(root / "PROMPT.md")
    for c in candidates:
        if c.exists():
            try:
                text = c.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read prompt file: {exc}", file=c) from exc
            if not text.strip():
                raise ConfigError("empty objective", file=c)
            return text
    raise ConfigError(
        "no prompt: set [loop] prompt or prompt_file, add PROMPT.md, or pass --prompt",
        file=path,
        key="loop.prompt",
    )


_Domain = TypeVar("_Domain", TasksSection, ThemesSection, ExperienceSection)


def _configured(parsed: ConfigFile, name: str, section: _Domain) -> _Domain:
    """A domain's section with ``enabled`` decided: a section written in loop.toml turns
    its domain on unless it says ``enabled = false``; an absent one leaves it unset (on
    once used)."""
    if section.enabled is None and name in parsed.model_fields_set:
        return section.model_copy(update={"enabled": True})
    return section


def _themes(
    parsed: ConfigFile, hats: dict[str, HatConfig], default: BackendConfig
) -> ThemesSection:
    """``[themes]`` decided: configured as :func:`_configured` says, and on too when the
    loop hands hatloop's tools to its agents (``[mcp] serve = true``, or an agent backend
    with ``mcp`` on): an agent may call a theme tool at any iteration, and theme operations
    need the heartbeat. Decided here, so the snapshot (and a replay) holds the outcome."""
    themes = _configured(parsed, "themes", parsed.themes)
    if themes.enabled is not None:
        return themes
    backends = [h.backend or default for h in hats.values()]
    agents_get_tools = parsed.mcp.serve is True or any(
        isinstance(b, ClaudeConfig | GeminiConfig | CodexConfig) and b.mcp for b in backends
    )
    return themes.model_copy(update={"enabled": True}) if agents_get_tools else themes


def config_from_snapshot(
    snapshot: dict[str, Any], *, base_dir: Path, source: str = "<recording>"
) -> LoadedConfig:
    """Rebuild a configuration from :meth:`LoadedConfig.snapshot` (as recorded).

    Relative paths (tasks file, workspace, sessions) resolve against ``base_dir``, so a
    replay can run the recorded configuration in a scratch folder.
    """
    try:
        parsed = ConfigFile.model_validate(
            {
                k: snapshot[k]
                for k in ("loop", "backend", "hats", "tasks", "themes", "experience", "recording")
                if k in snapshot
            }
        )
    except ValidationError as exc:
        raise translate(exc, Path(source), ConfigFile) from exc
    loaded = LoadedConfig(
        loop=parsed.loop,
        backend=parsed.backend,
        hats=dict(parsed.hats),
        tasks=parsed.tasks,
        themes=parsed.themes,
        experience=parsed.experience,
        recording=parsed.recording,
        prompt=str(snapshot.get("prompt", "")),
        base_dir=base_dir,
        source=source,
        hat_sources=dict.fromkeys(parsed.hats, Path(source)),
        root=base_dir,
    )
    validate_topology(loaded)
    return loaded
