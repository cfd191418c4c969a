"""The preflight: what a run needs from the machine, checked before any agent is called.

``hatloop doctor`` prints these checks; ``hatloop run`` runs them first (``--no-preflight``
skips them) and stops with exit 2 on a failure. Each check is fast and calls no agent:

* the objective is there (``[loop] prompt``, its ``prompt_file`` or ``PROMPT.md``);
* every hat has a backend (its own, or a default ``[backend]``);
* each agent or command backend's program is found (on ``PATH``, or as a path);
* each Python hat's ``module:function`` imports;
* each scripted hat's ``outputs_file`` is read (a JSON list of strings);
* each agent backend has what its API needs: a key variable, in the environment or the
  backend's ``env`` table, or a login the CLI saved (a warning only: logins live in
  places a CLI may change);
* the folders a run writes (sessions, tasks, themes, experiences) can be written, and
  a recording's file too (as ``run`` checks it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loop.backends.python_hat import resolve_target
from loop.backends.scripted import ScriptedBackend
from loop.config import LoadedConfig, read_prompt
from loop.config.backends import (
    BackendConfig,
    ClaudeConfig,
    CodexConfig,
    CommandConfig,
    GeminiConfig,
    PythonConfig,
    ScriptedConfig,
)
from loop.errors import ConfigError, InputError
from loop.session.target import check_target

__all__ = [
    "Check",
    "CheckStatus",
    "backend_checks",
    "folder_checks",
    "preflight",
]

CheckStatus = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One check's result: what was checked, for whom, and what was found."""

    what: str  # "prompt", "backend", "program", "python", "outputs", "folder", "recording"...
    subject: str  # "hat planner", "hats builder, reviewer", "sessions", "--record-session"...
    status: CheckStatus
    detail: str

    def line(self) -> str:
        """The check as one line: ``ok    program    hat planner: claude (/usr/bin/claude)``."""
        return f"{self.status:<5} {self.what:<11} {self.subject}: {self.detail}"


# What each agent CLI needs to reach its API: key variables, the files its login leaves
# (relative to HOME), and the install command.
@dataclass(frozen=True)
class _Needs:
    keys: tuple[str, ...]
    logins: tuple[str, ...]
    install: str


_AGENTS: dict[str, _Needs] = {
    "claude": _Needs(
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        (".claude/.credentials.json",),
        "npm install -g @anthropic-ai/claude-code",
    ),
    "gemini": _Needs(
        ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
        (".gemini/oauth_creds.json",),
        "npm install -g @google/gemini-cli",
    ),
    "codex": _Needs(
        ("OPENAI_API_KEY", "CODEX_API_KEY"),
        # a login, or a config.toml of its own (a custom model provider names its key)
        (".codex/auth.json", ".codex/config.toml"),
        "npm install -g @openai/codex",
    ),
}


def preflight(config: LoadedConfig, *, recording: Path | None = None) -> list[Check]:
    """Every check for a run of ``config`` (and its recording, if any), in order."""
    return [
        _objective_check(config),
        *backend_checks(config),
        *folder_checks(config),
        *([recording_check(recording)] if recording is not None else []),
    ]


def _objective_check(config: LoadedConfig) -> Check:
    """The objective: where it comes from, or why there is none (read here only when
    the configuration was loaded without it, as ``doctor`` loads it)."""
    try:
        text = config.prompt or read_prompt(config)
    except ConfigError as exc:
        return Check("prompt", "objective", "fail", exc.message)
    where = "[loop] prompt" if config.loop.prompt else config.loop.prompt_file or "PROMPT.md"
    return Check("prompt", "objective", "ok", f"{where} ({len(text)} characters)")


def backend_checks(config: LoadedConfig) -> list[Check]:
    """The hats' backends: present, their programs found, their modules importable, their
    credentials (warnings). Hats with the same backend are checked once, together
    (``hats builder, planner: gemini``), as the default ``[backend]`` usually is."""
    checks: list[Check] = []
    shared: list[tuple[BackendConfig, list[str]]] = []  # in the order the hats come
    for name in config.hats:
        backend = config.named_backend(name)
        if backend is None:
            checks.append(
                Check(
                    "backend",
                    f"hat {name}",
                    "fail",
                    f"no backend: set [hats.{name}.backend] or a default [backend]",
                )
            )
            continue
        same = next((names for known, names in shared if known == backend), None)
        if same is None:
            shared.append((backend, [name]))
        else:
            same.append(name)
    for backend, names in shared:
        subject = f"hat {names[0]}" if len(names) == 1 else f"hats {', '.join(names)}"
        checks.append(Check("backend", subject, "ok", backend.type))
        checks.extend(_backend(subject, backend, config.root))
    return checks


def _backend(subject: str, backend: BackendConfig, root: Path) -> Iterator[Check]:
    if isinstance(backend, PythonConfig):
        yield _python(subject, backend.target, root)
        return
    if isinstance(backend, ScriptedConfig):
        if backend.outputs_file:
            yield _outputs(subject, backend)
        return
    if not isinstance(backend, CommandConfig | ClaudeConfig | GeminiConfig | CodexConfig):
        return  # replay: nothing outside hatloop
    env = {**os.environ, **backend.env}
    needs = _AGENTS.get(backend.type)
    yield _program(subject, backend.command[0], root, env, needs.install if needs else None)
    if needs is not None:
        yield _credentials(subject, backend.type, needs, env)


def _program(
    subject: str, program: str, root: Path, env: Mapping[str, str], install: str | None
) -> Check:
    path = None
    if os.sep in program:  # a path: relative ones resolve where the hats run
        path = Path(program) if Path(program).is_absolute() else root / program
        found = str(path) if path.is_file() and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is not None:
        return Check("program", subject, "ok", f"{program} ({found})")
    where = f"{program}: not found on PATH" if path is None else _not_there(program, path)
    hint = f" (install: {install})" if install else ""
    return Check("program", subject, "fail", f"{where}{hint}")


def _not_there(program: str, path: Path) -> str:
    """Why the program at ``path`` (``program`` as configured) cannot run."""
    if Path(program).is_absolute():
        shown, relative = program, ""
    else:
        shown, relative = (
            f"{program} ({path})",
            " (a relative path is taken from the project folder)",
        )
    if not path.exists():
        return f"{shown}: not found{relative}"
    return f"{shown}: " + ("not executable" if path.is_file() else "not a file")


def _python(subject: str, target: str, root: Path) -> Check:
    try:
        resolve_target(target, root)
    except Exception as exc:  # an import runs the module's code: any error is its answer
        return Check("python", subject, "fail", str(exc))
    return Check("python", subject, "ok", f"{target} imports")


def _outputs(subject: str, backend: ScriptedConfig) -> Check:
    """A scripted backend's ``outputs_file`` is read as the run reads it."""
    try:
        outputs = ScriptedBackend.from_config(backend).outputs
    except ConfigError as exc:
        return Check("outputs", subject, "fail", exc.message)
    return Check("outputs", subject, "ok", f"{backend.outputs_file} ({len(outputs)} outputs)")


def _credentials(subject: str, kind: str, needs: _Needs, env: Mapping[str, str]) -> Check:
    given = [k for k in needs.keys if env.get(k)]
    if given:
        return Check("credentials", subject, "ok", f"{kind}: {given[0]} is set")
    home = Path(env.get("HOME") or Path.home())
    saved = [f for f in needs.logins if (home / f).is_file()]
    if saved:
        return Check("credentials", subject, "ok", f"{kind}: {home / saved[0]}")
    return Check(
        "credentials",
        subject,
        "warn",
        f"{kind}: none of {', '.join(needs.keys)} is set and no saved login in {home} "
        f"(set one, or log in with the {kind} CLI)",
    )


def folder_checks(config: LoadedConfig) -> list[Check]:
    """The folders a run writes: each exists as a writable folder, or can be made."""
    folders = [("sessions", config.resolve(config.loop.sessions_dir))]
    if config.tasks.enabled:
        folders.append(("tasks", config.resolve(config.tasks.file).parent))
    if config.themes.enabled:
        folders.append(("themes", config.resolve(config.themes.workspace)))
    if config.experience.enabled:
        folders.append(("experiences", config.resolve(config.experience.base_directory)))
    return [_writable(subject, folder) for subject, folder in folders]


def recording_check(path: Path) -> Check:
    """``--record-session FILE`` checked with the check ``run`` makes
    (:func:`~loop.session.target.check_target`): a link, a folder, a pipe or a socket,
    or a file that cannot be created or opened for writing, fails. An existing file is
    a warning: ``run`` overwrites it only with ``--force`` (or appends with ``--resume``)."""
    try:
        check_target(path, force=True, append=False)  # what it is, and whether it opens
    except InputError as exc:
        return Check("recording", "--record-session", "fail", exc.message)
    if path.exists():
        return Check(
            "recording",
            "--record-session",
            "warn",
            f"{path}: exists; run overwrites it only with --force (--resume appends to it)",
        )
    return Check("recording", "--record-session", "ok", f"{path} can be written")


def _writable(subject: str, folder: Path) -> Check:
    """Whether ``folder`` can be written: probed with a file that vanishes at once (a
    permission check alone says yes to root on a read-only or virtual file system)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check("folder", subject, "fail", f"{folder}: {existing} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return Check("folder", subject, "fail", f"{folder}: not writable: {exc.strerror or exc}")
    made = "" if existing == folder else f" (to be made in {existing})"
    return Check("folder", subject, "ok", f"{folder}{made}")
