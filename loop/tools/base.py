"""What a tool is, and where tools keep their files: the seam every tool domain implements.

A :class:`Tool` is a name (the seed's), a description written for a model, a pydantic
input model whose fields are the seed's parameter names, an output model, and a plain
synchronous function ``func(ctx, input) -> output`` that raises :class:`ToolError`
for failures a caller can act on. :class:`ToolContext` says where the tools' files are,
and which session iteration a call is part of.

:meth:`Tool.run` is the one way a tool is called (the CLI, MCP and the bus all go
through it), so it is where a call made in an iteration's context is journaled
(:mod:`loop.tools.calls`). A tool that mints an id or reads the clock asks the context
(:meth:`ToolContext.new_id`, :meth:`ToolContext.now`): inside a session both are the
call's own, and a replay gets them again.

The domains (tasks, themes, experience, session) define their tools with these; the
registry (:mod:`loop.tools.registry`) and its adapters (CLI, MCP) sit above them, as
the engine sits above :mod:`loop.backends.base`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from loop import _json
from loop._names import check_path
from loop.errors import InputError, ToolError
from loop.locations import (
    DEFAULT_EXPERIENCES_DIR,
    DEFAULT_SESSIONS_DIR,
    DEFAULT_WORKSPACE,
    ENV_EVENTS_FILE,
    ENV_EXPERIENCES_DIR,
    ENV_SESSION_DIR,
    ENV_TASKS_FILE,
    ENV_WORKSPACE,
)
from loop.tools.calls import Call, Channel, FileCalls, in_process, mint_id

__all__ = ["BusRequest", "BusService", "Tool", "ToolContext", "ToolFunc"]


@dataclass
class ToolContext:
    """Where the tools keep their files; built from flags, environment and config.

    Attributes:
        root: the project folder (relative settings resolve against it).
        tasks_file: the tasks JSON file; ``None`` keeps tasks in memory (seed 003).
        workspace: the theme workspace (themebox/, feedbackbox/, artifacts/, stats/).
        experiences_base: the folder holding ``experiences/experience_<id>/``.
        sessions_dir: the loop's sessions folder (``[loop] sessions_dir``).
        session_dir: the running loop session's folder, when called from inside one.
        events_file: the running iteration's events file (``LOOP_EVENTS_FILE``).
        state: per-process state of in-memory stores, keyed by domain.
        calls: the iteration whose events file journals this context's calls (an
            agent's process, the MCP endpoint); unset: the iteration the engine's
            process runs, if any (:func:`loop.tools.calls.in_process`).
        call: the call running (set by :meth:`Tool.run` for the tool's function).
    """

    root: Path = field(default_factory=Path.cwd)
    tasks_file: Path | None = None
    workspace: Path = field(default_factory=lambda: Path(DEFAULT_WORKSPACE))
    experiences_base: Path = field(default_factory=lambda: Path(DEFAULT_EXPERIENCES_DIR))
    sessions_dir: Path = field(default_factory=lambda: Path(DEFAULT_SESSIONS_DIR))
    session_dir: Path | None = None
    events_file: Path | None = None
    state: dict[str, Any] = field(default_factory=dict)
    calls: FileCalls | None = None
    call: Call | None = None

    def __post_init__(self) -> None:
        for what, path in (
            ("tasks file", self.tasks_file),
            ("workspace", self.workspace),
            ("experiences folder", self.experiences_base),
            ("sessions folder", self.sessions_dir),
        ):
            if path is not None:  # from flags, environment or config: still checked
                check_path(str(path), what)
        self.root = self.root.resolve()
        if self.tasks_file is not None:
            self.tasks_file = self._full(self.tasks_file)
        self.workspace = self._full(self.workspace)
        self.experiences_base = self._full(self.experiences_base)
        self.sessions_dir = self._full(self.sessions_dir)

    def _full(self, path: Path) -> Path:
        """A configured path, absolute: a relative one from the project folder, ``.`` and
        ``..`` taken as written (as a shell's ``cd`` does, and as :mod:`loop._fs` reaches
        every path), so ``../p/works`` and ``/abs/p/works`` are the same folder."""
        return Path(os.path.normpath(self.root / path))

    def trusted_root(self, path: Path) -> Path:
        """The folder whose links are the user's, for a state path: see :mod:`loop._fs`.

        A path inside the project folder is reached from the project folder, so no
        link below it (``.loop`` included) is followed; a path configured outside it
        (written as an absolute path or with ``..``) is trusted as given, and only what
        hatloop creates below it is checked. ``.`` and ``..`` are taken as written.
        """
        full = Path(os.path.abspath(path))  # noqa: PTH100 - lexical, as loop._fs
        if full == self.root or self.root in full.parents:
            return self.root
        return full

    def now(self) -> datetime:
        """The time a tool takes as "now" (UTC): the running call's, else the clock's."""
        return self.call.now().astimezone(UTC) if self.call is not None else datetime.now(UTC)

    def local_now(self) -> datetime:
        """:meth:`now` in the caller's time zone (aware)."""
        return self.call.now() if self.call is not None else datetime.now().astimezone()

    def new_id(self, kind: str, attempt: int = 0) -> str:
        """A new id of kind ``kind``: derived from the running call inside a session (the
        same on a replay; ``attempt`` > 0 gives the next candidates), random outside."""
        return self.call.new_id(kind, attempt) if self.call is not None else mint_id(kind)

    def for_call(self, call: Call) -> ToolContext:
        """This context while ``call`` runs (a shallow copy: the stores are shared)."""
        ctx = copy.copy(self)
        ctx.call = call
        return ctx

    @classmethod
    def from_env(
        cls,
        *,
        root: Path | None = None,
        tasks_file: str | None = None,
        workspace: str | None = None,
        experiences_base: str | None = None,
        sessions_dir: str | None = None,
        default_tasks_file: str | None = None,
        default_workspace: str = DEFAULT_WORKSPACE,
        default_experiences_base: str = DEFAULT_EXPERIENCES_DIR,
        environ: dict[str, str] | None = None,
        channel: Channel = "cli",
    ) -> ToolContext:
        """Build a context: explicit arguments (flags) win, then the environment
        (``FILE_PATH``, ``LOOP_WORKSPACE``, ``LOOP_EXPERIENCES_DIR``), then the defaults
        (``loop.toml``'s settings, else the built-in ones).

        Inside a loop iteration (``LOOP_SESSION_ID``, ``LOOP_ITERATION`` and
        ``LOOP_EVENTS_FILE`` set) its calls are journaled in the iteration's events file,
        as made over ``channel``.
        """
        env = os.environ if environ is None else environ
        tf = _given(
            (tasks_file, "--tasks-file"),
            (env.get(ENV_TASKS_FILE), ENV_TASKS_FILE),
            (default_tasks_file, "[tasks] file in loop.toml"),
        )
        ws = _given(
            (workspace, "--workspace"),
            (env.get(ENV_WORKSPACE), ENV_WORKSPACE),
            (default_workspace, "[themes] workspace in loop.toml"),
        )
        ex = _given(
            (experiences_base, "--experiences-dir"),
            (env.get(ENV_EXPERIENCES_DIR), ENV_EXPERIENCES_DIR),
            (default_experiences_base, "[experience] base_directory in loop.toml"),
        )
        sd = env.get(ENV_SESSION_DIR)
        ef = env.get(ENV_EVENTS_FILE)
        return cls(
            root=root or Path.cwd(),
            tasks_file=Path(tf) if tf else None,
            workspace=Path(ws or DEFAULT_WORKSPACE),
            experiences_base=Path(ex or DEFAULT_EXPERIENCES_DIR),
            sessions_dir=Path(sessions_dir or DEFAULT_SESSIONS_DIR),
            session_dir=Path(sd) if sd else None,
            events_file=Path(ef) if ef else None,
            calls=FileCalls.from_env(env, channel),
        )

    def variables(self) -> dict[str, str]:
        """The variables that point a child process's tool calls at these files (what
        :meth:`from_env` reads back): agents inside a loop share the loop's files."""
        env = {ENV_WORKSPACE: str(self.workspace), ENV_EXPERIENCES_DIR: str(self.experiences_base)}
        if self.tasks_file is not None:
            env[ENV_TASKS_FILE] = str(self.tasks_file)
        return env


def _given(*choices: tuple[str | None, str]) -> str | None:
    """The first path set, checked in the name of where it was set (a flag, a variable,
    a ``loop.toml`` setting), so that a refusal says which one to fix."""
    for value, where in choices:
        if value:
            return check_path(value, where)
    return None


ToolFunc = Callable[[ToolContext, Any], BaseModel]


@dataclass(frozen=True)
class Tool:
    """One tool: the seed's name and parameters, one implementation."""

    name: str
    domain: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    func: ToolFunc
    read_only: bool = False
    journaled: bool = True  # False: the session's own tools (emit_event: the event is)

    def parse_input(self, args: dict[str, Any]) -> BaseModel:
        """Validate raw arguments strictly; a failure is a ``ToolError`` naming the fields.

        Strict: nothing is coerced (``"5"`` is not an integer, ``1`` is not a boolean),
        and every bound of the input model holds. Arguments nested deeper than
        :data:`loop._json.INPUT_DEPTH` are refused first, whichever way they came (CLI,
        MCP, bus): the files and records that keep an argument stay readable. So is
        text UTF-8 cannot hold (a lone surrogate, which JSON's ``\\ud800`` escape
        spells), in a value or a key: every file a tool writes is UTF-8.
        """
        if _json.too_deep(args, _json.INPUT_DEPTH + 1):
            raise ToolError(
                "invalid_input",
                f"invalid arguments for {self.name}: a value is nested deeper than "
                f"{_json.INPUT_DEPTH} levels",
            )
        if unstorable := _not_utf8(args):
            raise ToolError(
                "invalid_input", _validation_message(self.name, unstorable), details=unstorable
            )
        try:
            return self.input_model.model_validate(args, strict=True)
        except ValidationError as exc:
            details = _validation_details(exc)
            raise ToolError(
                "invalid_input", _validation_message(self.name, details), details=details
            ) from exc

    def run(
        self, ctx: ToolContext, args: dict[str, Any], *, channel: Channel | None = None
    ) -> BaseModel:
        """Validate ``args``, call the tool, return its output model.

        A call in an iteration's context (``ctx.calls``, else the iteration the engine's
        process runs) is journaled there, with its input and its output or error;
        ``channel`` says how it came (default: the context's, ``bus`` in the engine).

        Raises:
            ToolError: every failure a caller can act on: bad arguments, a path or a
                state file the tool refused (``invalid_path``, ``store_error``), a file
                system error no domain rule expected (``io_error``, naming the file),
                and ``not_journaled`` when the iteration's events file cannot be written.
        """
        calls = ctx.calls if ctx.calls is not None else in_process()
        if calls is None or not self.journaled or ctx.call is not None:  # nested: the outer's
            return self._call(ctx, args)
        return calls.record(
            self.name, args, channel, lambda call: self._call(ctx.for_call(call), args)
        )

    def _call(self, ctx: ToolContext, args: dict[str, Any]) -> BaseModel:
        parsed = self.parse_input(args)
        try:
            return self.func(ctx, parsed)
        except ToolError:
            raise
        except InputError as exc:  # paths, stores: still the caller's to fix
            raise ToolError(exc.code, exc.message, exc.details) from exc
        except OSError as exc:  # the file system said no where no rule expected it
            where = f"{exc.filename}: " if exc.filename else ""
            raise ToolError("io_error", f"{self.name}: {where}{exc.strerror or exc}") from exc


@dataclass(frozen=True)
class BusRequest:
    """One tool a hat may request on the bus: ``<prefix>.<action>`` runs ``tool``.

    Attributes:
        action: the request topic's last segment (``create`` in ``task.create``).
        tool: the tool it runs (the tool's own name is accepted as the action too).
        result: the result topic's last segment (``created``).
        bare: the input field that a payload of one bare word fills (``id``), if any.
    """

    action: str
    tool: str
    result: str
    bare: str | None = None


@dataclass(frozen=True)
class BusService:
    """How a domain's tools are requested on the bus (:mod:`loop.tools.bus` serves it).

    Attributes:
        prefix: the topics' first segment (``task``).
        source: the source of the results (``tasks``); its own events are no requests.
        tools: the domain's tools.
        requests: the requests, each naming one of ``tools``.
        reply_to_requester: results and errors are addressed to the requesting hat;
            otherwise they go to every subscriber (a task list several hats share).
        notices: actions of other events of the domain that are not requests (the
            domain's own notices, or data such as ``experience.thought``).
    """

    prefix: str
    source: str
    tools: Sequence[Tool]
    requests: tuple[BusRequest, ...]
    reply_to_requester: bool = True
    notices: tuple[str, ...] = ()


# pydantic's wording names the input model's class, which the caller never sees
_OBJECT_EXPECTED = {"model_type", "model_attributes_type", "dataclass_type"}


def _validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {
            "field": ".".join(str(p) for p in err["loc"]),
            "message": "Input should be an object"
            if err["type"] in _OBJECT_EXPECTED
            else err["msg"],
        }
        for err in exc.errors(include_url=False)
    ]


def _validation_message(tool: str, details: list[dict[str, Any]]) -> str:
    parts = [f"{d['field'] or '(input)'}: {d['message']}" for d in details]
    return f"invalid arguments for {tool}: " + "; ".join(parts)


def _shown(text: str) -> str:
    """``text`` as a reply can carry it: a lone surrogate escaped (``\\ud800``)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _not_utf8(value: Any, path: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``{field, message}`` for every text in ``value`` (a key or a value, at any depth)
    that UTF-8 cannot hold: a lone surrogate, which JSON text may spell (``\\ud800``)
    and Python keeps, but no file can store. Arguments are within
    :data:`loop._json.INPUT_DEPTH` here, so the recursion stays shallow."""
    if isinstance(value, str):
        if value.isascii():  # most text: nothing to encode
            return []
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = _shown(exc.object[exc.start : exc.end])
            message = f"Input should be text UTF-8 can store, not a lone surrogate ({bad})"
            return [{"field": ".".join(path), "message": message}]
        return []
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            where = (*path, _shown(str(key)))
            found += _not_utf8(key, where) or _not_utf8(item, where)
        return found
    if isinstance(value, list | tuple):
        return [d for i, item in enumerate(value) for d in _not_utf8(item, (*path, str(i)))]
    return []
