"""Configuration: pydantic models for the loop and its hats, loaded from TOML.

Key names follow Ralph Orchestrator's where they exist (DESIGN.md, "Config contract").
Unknown keys are errors that name the file and the key. Relative paths in a file
resolve against that file's folder.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from loop._json import too_deep
from loop.backends.claude import ClaudeConfig
from loop.backends.configs import (
    CodexConfig,
    CommandConfig,
    GeminiConfig,
    PythonConfig,
    ReplayConfig,
    ScriptedConfig,
)
from loop.engine.topology import validate_topology
from loop.errors import ConfigError
from loop.events import is_valid_pattern, is_valid_topic

__all__ = [
    "BackendConfig",
    "HatConfig",
    "LoadedConfig",
    "LoopSection",
    "McpSection",
    "config_from_snapshot",
    "load_config",
    "preset_dir",
    "preset_names",
    "tool_settings_from_project",
]

DEFAULT_CONFIG_NAME = "loop.toml"
BACKEND_TYPES = ("scripted", "command", "python", "claude", "gemini", "codex")


BackendConfig = Annotated[
    ScriptedConfig
    | CommandConfig
    | PythonConfig
    | GeminiConfig
    | CodexConfig
    | ReplayConfig
    | ClaudeConfig,
    Field(discriminator="type"),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoopSection(_Strict):
    """``[loop]``: the objective, the starting and completion events, the limits."""

    prompt: str | None = None
    prompt_file: str | None = None
    starting_event: str = "task.start"
    completion_event: str = "LOOP_COMPLETE"
    max_iterations: int = Field(default=50, ge=1)
    max_runtime_seconds: float = Field(default=3600, gt=0)
    iteration_timeout_seconds: float = Field(default=600, gt=0)
    max_consecutive_failures: int = Field(default=3, ge=1)
    stale_threshold: int = Field(default=3, ge=2)
    hats: list[str] = Field(default_factory=list)
    fallback_hat: str | None = None
    durable: bool = True
    sessions_dir: str = ".loop/sessions"

    @field_validator("starting_event", "completion_event")
    @classmethod
    def _topic(cls, v: str) -> str:
        if not is_valid_topic(v):
            raise ValueError(f"not a valid topic: {v!r}")
        return v


class TasksSection(_Strict):
    """``[tasks]``: the task store the loop and its agents share."""

    enabled: bool = True
    file: str = ".loop/tasks.json"
    block_completion: bool = True


class ThemesSection(_Strict):
    """``[themes]``: the theme workspace; every iteration is a heartbeat."""

    enabled: bool = True
    workspace: str = ".loop/works"


class ExperienceSection(_Strict):
    """``[experience]``: where experiences are exported."""

    enabled: bool = True
    base_directory: str = ".loop/experiences"
    export_on_complete: bool = False


class RecordingSection(_Strict):
    """``[recording]``: the session recording's cap and redaction."""

    max_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    redact_secrets: bool = True


class McpSection(_Strict):
    """``[mcp]``: whether the loop serves hatloop's tools to its agents over MCP.

    ``serve = "auto"`` (the default) serves them on a loopback endpoint while the loop
    runs when a hat's backend hands its agent hatloop's tools (``claude`` with
    ``mcp = true``); ``true`` always (for agents of your own, which find the endpoint in
    ``LOOP_MCP_URL`` and ``LOOP_MCP_TOKEN``); ``false`` never (the ``claude`` backend then
    starts ``python -m loop mcp`` over stdio for each iteration instead).
    """

    serve: StrictBool | Literal["auto"] = "auto"

    @field_validator("serve", mode="before")
    @classmethod
    def _serve(cls, v: object) -> object:
        if v is True or v is False or v == "auto":
            return v
        raise ValueError(f'serve must be true, false or "auto", not {v!r}')


class HatConfig(_Strict):
    """One hat: a persona triggered by events, publishing events."""

    name: str | None = None
    description: str = ""
    triggers: list[str] = Field(min_length=1)
    publishes: list[str] = Field(default_factory=list)
    instructions: str = ""
    default_publishes: str | None = None
    max_activations: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)
    backend: BackendConfig | None = None

    @field_validator("triggers")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        for p in v:
            if not is_valid_pattern(p):
                raise ValueError(f"not a valid trigger pattern: {p!r}")
        return v

    @field_validator("publishes")
    @classmethod
    def _topics(cls, v: list[str]) -> list[str]:
        for t in v:
            if not is_valid_pattern(t):
                raise ValueError(f"not a valid topic: {t!r}")
        return v

    @field_validator("default_publishes")
    @classmethod
    def _default(cls, v: str | None) -> str | None:
        if v is not None and not is_valid_topic(v):
            raise ValueError(f"not a valid topic: {v!r}")
        return v


class _ConfigFile(_Strict):
    loop: LoopSection = Field(default_factory=LoopSection)
    backend: BackendConfig = Field(default_factory=ScriptedConfig)
    hats: dict[str, HatConfig] = Field(default_factory=dict)
    tasks: TasksSection = Field(default_factory=TasksSection)
    themes: ThemesSection = Field(default_factory=ThemesSection)
    experience: ExperienceSection = Field(default_factory=ExperienceSection)
    recording: RecordingSection = Field(default_factory=RecordingSection)
    mcp: McpSection = Field(default_factory=McpSection)


class _HatFile(_Strict):
    hats: dict[str, HatConfig]


@dataclass
class LoadedConfig:
    """A validated configuration with every path resolved."""

    loop: LoopSection
    backend: Any
    hats: dict[str, HatConfig]
    tasks: TasksSection
    themes: ThemesSection
    experience: ExperienceSection
    recording: RecordingSection
    prompt: str
    base_dir: Path
    source: str
    hat_sources: dict[str, Path] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    # Not in the snapshot: serving the tools changes no routing or outcome (and replay
    # serves nothing, its backends being in-process).
    mcp: McpSection = field(default_factory=McpSection)

    def hat_backend(self, name: str) -> Any:
        """The backend config of hat ``name`` (its own, or the default ``[backend]``)."""
        return self.hats[name].backend or self.backend

    def resolve(self, path: str) -> Path:
        """A state path (sessions, tasks, workspace), resolved against the working folder.

        Hat files and prompt files resolve against the config's folder instead; state
        lives where the loop runs, so the packaged default never writes into the package.
        """
        p = Path(path)
        return p if p.is_absolute() else self.root / p

    def snapshot(self) -> dict[str, Any]:
        """The effective configuration as JSON-ready data (what the digest covers)."""
        return {
            "loop": self.loop.model_dump(mode="json"),
            "backend": self.backend.model_dump(mode="json"),
            "hats": {n: h.model_dump(mode="json", exclude_none=True) for n, h in self.hats.items()},
            "tasks": self.tasks.model_dump(mode="json"),
            "themes": self.themes.model_dump(mode="json"),
            "experience": self.experience.model_dump(mode="json"),
            "recording": self.recording.model_dump(mode="json"),
            "prompt": self.prompt,
        }

    def digest(self) -> str:
        """A stable SHA-256 of :meth:`snapshot` (what a recording's header carries)."""
        from loop.session.recording import config_digest  # noqa: PLC0415 - models on use

        return config_digest(self.snapshot())


# Deepest nesting of tables and arrays in a config or hat file: far more than any real
# one needs, and far from what the recursive TOML parser can take.
MAX_TOML_DEPTH = 32


def _load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; every problem is a ``ConfigError`` naming the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError("file not found", file=path) from exc
    except IsADirectoryError as exc:
        raise ConfigError("is a folder, expected a TOML file", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); TOML files are UTF-8", file=path
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", file=path) from exc
    except RecursionError as exc:
        raise ConfigError(f"nested deeper than {MAX_TOML_DEPTH} levels", file=path) from exc
    if too_deep(data, MAX_TOML_DEPTH):
        raise ConfigError(f"nested deeper than {MAX_TOML_DEPTH} levels", file=path)
    return data


def _translate(exc: ValidationError, path: Path) -> ConfigError:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "tagged-")))
    if err["type"] == "extra_forbidden":
        return ConfigError("unknown key", file=path, key=loc)
    if err["type"] == "union_tag_invalid":
        tag = err.get("input", {}).get("type") if isinstance(err.get("input"), dict) else None
        return ConfigError(
            f"unknown backend type {tag!r} (known: {', '.join(BACKEND_TYPES)})", file=path, key=loc
        )
    if err["type"] == "missing":
        return ConfigError("missing required key", file=path, key=loc)
    msg = err["msg"].removeprefix("Value error, ")
    more = len(exc.errors()) - 1
    return ConfigError(msg + (f" (and {more} more)" if more else ""), file=path, key=loc)


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
    files: list[Path] = []
    for entry in entries:
        p = Path(entry)
        p = p if p.is_absolute() else base / p
        if p.is_dir():
            files.extend(sorted(p.glob("*.toml")))
        elif p.exists():
            files.append(p)
        else:
            raise ConfigError(
                f"hat file or folder not found: {entry}", file=origin, key="loop.hats"
            )
    return files


def load_config(
    config: Path | None = None,
    *,
    root: Path | None = None,
    hats: list[Path] | None = None,
    overrides: dict[str, Any] | None = None,
) -> LoadedConfig:
    """Load and validate the loop configuration.

    Args:
        config: a ``loop.toml``; ``None`` uses ``<root>/loop.toml`` or, failing that,
            the packaged default preset.
        root: the working folder (default: the current one).
        hats: hat files or folders replacing ``[loop] hats``.
        overrides: ``[loop]`` keys from the command line (prompt, max_iterations...),
            plus ``backend`` (a type name applied to every hat).

    Raises:
        ConfigError: naming the file and the key.
    """
    root = root or Path.cwd()
    if config is None:
        local = root / DEFAULT_CONFIG_NAME
        config = local if local.exists() else preset_dir("default") / DEFAULT_CONFIG_NAME
    path = config.resolve() if config.exists() else config
    raw = _load_toml(path)
    try:
        parsed = _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        raise _translate(exc, path) from exc
    base = path.parent
    overrides = dict(overrides or {})
    backend_type = overrides.pop("backend", None)
    loop_data = parsed.loop.model_dump()
    loop_data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        loop = LoopSection.model_validate(loop_data)
    except ValidationError as exc:
        raise _translate(exc, Path("<command line>")) from exc

    all_hats = {n: _resolve_hat_paths(h, base) for n, h in parsed.hats.items()}
    sources: dict[str, Path] = dict.fromkeys(parsed.hats, path)
    if hats is not None:
        files = _hat_files(root, [str(h) for h in hats], Path("--hats"))
    else:
        files = _hat_files(base, loop.hats, path)
    for hat_file in files:
        data = _load_toml(hat_file)
        try:
            hat_set = _HatFile.model_validate(data)
        except ValidationError as exc:
            raise _translate(exc, hat_file) from exc
        for name, hat in hat_set.hats.items():
            if name in all_hats:
                raise ConfigError(
                    f"hat {name!r} is also defined in {sources[name]}",
                    file=hat_file,
                    key=f"hats.{name}",
                )
            all_hats[name] = _resolve_hat_paths(hat, hat_file.parent)
            sources[name] = hat_file

    backend = parsed.backend
    if backend_type is not None:
        backend, all_hats = _force_backend(backend_type, all_hats)
    prompt = _prompt(loop, base, root, path)
    loaded = LoadedConfig(
        loop=loop,
        backend=_resolve_backend_paths(backend, base),
        hats=all_hats,
        tasks=parsed.tasks,
        themes=parsed.themes,
        experience=parsed.experience,
        recording=parsed.recording,
        prompt=prompt,
        base_dir=base,
        source=str(path),
        hat_sources=sources,
        root=root.resolve(),
        mcp=parsed.mcp,
    )
    validate_topology(loaded)
    return loaded


def _resolve_hat_paths(hat: HatConfig, base: Path) -> HatConfig:
    if hat.backend is None:
        return hat
    return hat.model_copy(update={"backend": _resolve_backend_paths(hat.backend, base)})


def _resolve_backend_paths(backend: Any, base: Path) -> Any:
    if isinstance(backend, ScriptedConfig) and backend.outputs_file:
        p = Path(backend.outputs_file)
        if not p.is_absolute():
            return backend.model_copy(update={"outputs_file": str(base / p)})
    return backend


def _force_backend(kind: str, hats: dict[str, HatConfig]) -> tuple[Any, dict[str, HatConfig]]:
    models: dict[str, Any] = {
        "claude": ClaudeConfig,
        "gemini": GeminiConfig,
        "codex": CodexConfig,
    }
    if kind not in models:
        raise ConfigError(
            f"--backend {kind}: only claude, gemini or codex can be set for every hat from the "
            "command line (scripted, command and python need per-hat settings)"
        )
    backend = models[kind]()
    return backend, {n: h.model_copy(update={"backend": backend}) for n, h in hats.items()}


def _prompt(loop: LoopSection, base: Path, root: Path, path: Path) -> str:
    if loop.prompt:
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
                return c.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read prompt file: {exc}", file=c) from exc
    raise ConfigError(
        "no prompt: set [loop] prompt or prompt_file, add PROMPT.md, or pass --prompt",
        file=path,
        key="loop.prompt",
    )


def config_from_snapshot(
    snapshot: dict[str, Any], *, base_dir: Path, source: str = "<recording>"
) -> LoadedConfig:
    """Rebuild a configuration from :meth:`LoadedConfig.snapshot` (as recorded).

    Relative paths (tasks file, workspace, sessions) resolve against ``base_dir``, so a
    replay can run the recorded configuration in a scratch folder.
    """
    try:
        parsed = _ConfigFile.model_validate(
            {
                k: snapshot[k]
                for k in ("loop", "backend", "hats", "tasks", "themes", "experience", "recording")
                if k in snapshot
            }
        )
    except ValidationError as exc:
        raise _translate(exc, Path(source)) from exc
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


def tool_settings_from_project(root: Path, config: str | None = None) -> dict[str, str]:
    """Where the tool files live according to ``loop.toml`` (or ``config``), if any.

    Returns keys ``tasks_file``, ``workspace``, ``experiences_base`` and ``sessions_dir``
    for the settings present; relative paths resolve against ``root`` (where the loop
    runs), as in the loop.
    """
    path = Path(config) if config else root / DEFAULT_CONFIG_NAME
    if not config and not path.exists():
        return {}
    data = _load_toml(path)
    base = root.resolve()
    out: dict[str, str] = {}
    for section, key, name in (
        ("tasks", "file", "tasks_file"),
        ("themes", "workspace", "workspace"),
        ("experience", "base_directory", "experiences_base"),
        ("loop", "sessions_dir", "sessions_dir"),
    ):
        value = data.get(section, {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and value:
            out[name] = str(base / value)
    return out
