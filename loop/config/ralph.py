"""Convert a Ralph Orchestrator configuration or preset (YAML, parsed) into hatloop's
``loop.toml`` and one hat file per hat, in pure code.

What maps (Ralph → hatloop):

* ``event_loop``: ``prompt``, ``prompt_file`` (Ralph's default ``PROMPT.md`` is
  hatloop's too), ``completion_promise`` → ``completion_event``, ``starting_event``,
  ``max_iterations``, ``max_runtime_seconds``, ``max_cost_usd``,
  ``max_consecutive_failures``, ``idle_timeout_secs`` → ``idle_timeout_seconds``,
  ``required_events``, ``cancellation_promise`` →
  ``cancellation_event``, ``enforce_hat_scope`` → ``strict_publishes``;
* ``cli.backend``: ``claude``, ``gemini`` and ``codex`` are hatloop's backends of the
  same name, ``custom`` (``cli.command`` and ``cli.args``) a ``command`` backend;
* ``core.guardrails`` → ``[loop] guardrails``;
* Ralph itself, as one more hat ``ralph`` (the loop's fallback): with no hats at all
  (Ralph's solo mode), Ralph does a task a turn and publishes ``ralph.next`` to run
  again (its default) until it publishes the completion event; when the hats leave the
  starting event or some of their events to Ralph, Ralph coordinates: it takes those
  and hands the work to the hats;
* each hat: ``name``, ``description``, ``triggers``, ``publishes``, ``instructions``
  (and ``extra_instructions``, appended), ``default_publishes``, ``max_activations``,
  ``timeout`` → ``timeout_seconds``, a wave's ``concurrency`` and ``aggregate``
  (``mode``, ``timeout`` → ``timeout_seconds``), and a backend given as a string, a
  table with ``type`` and ``args``, or a custom ``command``; ``ralph emit ...``,
  ``ralph wave emit ... --payloads ...`` and ``ralph tools task ...`` commands in the
  instructions become hatloop's (``"$LOOP_PYTHON" -m loop emit ...``,
  ``... -m loop task ...``).

Whatever does not map (memories, skills, Telegram, hooks, Ralph-only agents and
settings) is listed in :attr:`RalphConversion.notes`, one line each; the files are
written all the same.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.errors import InputError
from loop.events import is_reserved, topic_matches
from loop.topics import DEFAULT_COMPLETION_EVENT, DEFAULT_STARTING_EVENT, is_valid_topic

__all__ = ["AGENT_BACKENDS", "RalphConversion", "convert_ralph", "rewrite_commands"]

AGENT_BACKENDS = ("claude", "gemini", "codex")
_FALLBACK_BACKEND = "claude"

# event_loop key -> [loop] key
_LOOP_KEYS = {
    "prompt": "prompt",
    "prompt_file": "prompt_file",
    "completion_promise": "completion_event",
    "starting_event": "starting_event",
    "max_iterations": "max_iterations",
    "max_runtime_seconds": "max_runtime_seconds",
    "max_cost_usd": "max_cost_usd",
    "max_consecutive_failures": "max_consecutive_failures",
    "idle_timeout_secs": "idle_timeout_seconds",
    "required_events": "required_events",
    "cancellation_promise": "cancellation_event",
    "enforce_hat_scope": "strict_publishes",
}
_HAT_KEYS = {
    "name": "name",
    "description": "description",
    "triggers": "triggers",
    "publishes": "publishes",
    "default_publishes": "default_publishes",
    "max_activations": "max_activations",
    "timeout": "timeout_seconds",
    "concurrency": "concurrency",
}
_AGGREGATE_MODES = ("wait_for_all", "first", "quorum")
# what a top-level key or a hat key is, when it is not carried over
_WHY = {
    "memories": "memories (hatloop has none; an agent keeps notes in files)",
    "skills": "skills (give them to the agent CLI itself)",
    "RObot": "Telegram (RObot) human-in-the-loop",
    "robot": "Telegram (RObot) human-in-the-loop",
    "hooks": "lifecycle hooks",
    "scratchpad": "the per-hat scratchpad",
    "disallowed_tools": "disallowed tools (set them on the agent CLI: allowed_tools, args)",
}
_RALPH = r'(?:"\$RALPH_BIN"|\$RALPH_BIN|\$\{RALPH_BIN\}|ralph)'
_EMIT = re.compile(_RALPH + r"(?: wave)? emit\b")
_TASK = re.compile(_RALPH + r" tools task\b(?: (\w+))?")
_OTHER_TOOLS = re.compile(_RALPH + r" tools (?!task\b)(\w+)")
_TASK_VERBS = {
    "add": "create",
    "ensure": "create",
    "show": "get",
    "close": "complete",
    "reopen": "update",
}
_LOOP = '"$LOOP_PYTHON" -m loop'
# Ralph runs Claude Code with every permission; hatloop's claude backend allows its tools
_CLAUDE = (
    "claude's permissions: Ralph runs Claude Code with --dangerously-skip-permissions; "
    "hatloop's claude backend allows only hatloop's tools, so allow what the "
    "instructions run in a shell (allowed_tools, permission_mode: docs/backends.md)"
)
# Ralph's own hat: the solo loop (a configuration without hats), or the coordinator
# that a hat collection counts on (for its starting event, or events no hat takes)
_RALPH_HAT = "ralph"
_SOLO_NEXT = "ralph.next"
_TASKS = """\
Keep the work in hatloop's tasks: the listTasks, createTask, startTask and
completeTask tools, or in a shell: `{loop} task list`,
`... task create "NAME"`, `... task start ID`, `... task complete ID "RESOLUTION"`.
"""
_COORDINATOR_INSTRUCTIONS = (
    """\
You are Ralph, the coordinator. You take the objective, and every event no hat takes;
the hats do the work:

{roster}

"""
    + _TASKS
    + """
1. Study the objective, the event that triggered you, and the work so far: the files,
   and the tasks.
2. Plan: create a task for each piece of work that is not listed yet.
3. Delegate: publish exactly ONE event that a hat is triggered by, with what it is to
   do, and stop. Do not do the work yourself.
   When every task is done and the objective is met and verified, publish
   `{completion}` instead.
"""
)
_SOLO_INSTRUCTIONS = (
    """\
You work alone, one task a turn. After each turn the loop runs you again, with a fresh
context, until the objective is met: what you learn goes into files and tasks.

"""
    + _TASKS
    + """
1. Study the objective and the work so far: the files, and the tasks.
2. Plan: create a task for each piece of work that is not listed yet.
3. Pick exactly ONE open task, start it and do it.
4. Verify it (run the tests, use what you built), commit, then complete it with what
   was done.
5. Publish `{next}` with one line on what you did and what comes next, and stop.
   When every task is done and the objective is met and verified, publish
   `{completion}` instead.
"""
)


@dataclass
class RalphConversion:
    """What ``init --from-ralph`` writes (relative path → text) and what it could not
    carry over (one line each)."""

    files: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def notes_on(self, backend: str | None) -> list[str]:
        """The notes once every hat runs on ``backend`` (``init --backend``; ``None``: the
        converted backends): Claude Code's permissions concern a claude backend only."""
        if backend is None or backend == "claude":
            return list(self.notes)
        return [n for n in self.notes if n != _CLAUDE]


def rewrite_commands(text: str) -> str:
    """``ralph emit`` and ``ralph tools task VERB`` (also through ``$RALPH_BIN``) as
    hatloop's commands; other ``ralph tools`` commands are left as they are."""
    text = _EMIT.sub(f"{_LOOP} emit", text)
    return _TASK.sub(
        lambda m: f"{_LOOP} task" + (f" {_TASK_VERBS.get(m[1], m[1])}" if m[1] else ""), text
    )


def convert_ralph(data: Mapping[str, Any], *, source: str = "ralph.yml") -> RalphConversion:
    """Convert a parsed Ralph configuration (``yaml.safe_load`` of its file).

    Raises:
        InputError: ``data`` is not a Ralph configuration (not a mapping, a section of
            the wrong shape, no hats at all); the message starts with ``source``.
    """
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: not a Ralph configuration (the YAML is not a mapping)")
    out = RalphConversion()
    event_loop, cli, core, hats = (
        _section(data, key, source) for key in ("event_loop", "cli", "core", "hats")
    )
    for key in data:
        if key not in ("event_loop", "cli", "core", "hats"):
            out.notes.append(f"{key}: {_WHY.get(str(key), 'a Ralph setting')}")

    loop: dict[str, Any] = {}
    for key, value in event_loop.items():
        if key in _LOOP_KEYS:
            loop[_LOOP_KEYS[key]] = value
        else:
            out.notes.append(f"event_loop.{key}: a Ralph setting")
    if loop.get("prompt_file") == "PROMPT.md":  # hatloop's default as well
        del loop["prompt_file"]
    if core.get("guardrails"):
        loop["guardrails"] = [str(g) for g in core["guardrails"]]
    for key in core:
        if key != "guardrails":
            out.notes.append(f"core.{key}: a Ralph setting")
    loop["hats"] = ["hats"]

    backend = _cli_backend(cli, out.notes)
    start = str(loop.get("starting_event", DEFAULT_STARTING_EVENT))
    completion = str(loop.get("completion_event", DEFAULT_COMPLETION_EVENT))
    tables: dict[str, dict[str, Any]] = {}
    for name in sorted(hats):
        hat = hats[name]
        if not isinstance(hat, Mapping):
            raise InputError(f"{source}: hats.{name}: not a mapping")
        table = _hat(
            str(name), hat, cli, default=str(backend["type"]), notes=out.notes, source=source
        )
        if table is not None:
            tables[str(name)] = table
    if hats and not tables:  # every hat left out (the solo hat is for no hats at all)
        raise InputError(f"{source}: no hat has triggers (hatloop needs at least one)")
    if not hats:  # Ralph's solo mode: Ralph works on the objective itself
        tables[_RALPH_HAT] = _solo_hat(start, completion)
        loop["fallback_hat"] = _RALPH_HAT
    elif left := _left_to_ralph(tables, start, completion):
        if _RALPH_HAT in tables:
            out.notes.append(
                f"Ralph, the coordinator ({', '.join(left)}): not added, a hat is named "
                f"{_RALPH_HAT!r}"
            )
        else:
            tables[_RALPH_HAT] = _coordinator(tables, left, completion)
            loop["fallback_hat"] = _RALPH_HAT
    for name, table in tables.items():
        if table.get("default_publishes") == completion and name != _RALPH_HAT:
            out.notes.append(
                f"hats.{name}.default_publishes: {completion!r} as a default (Ralph's "
                "completion when the agent says nothing); a default never completes a "
                "hatloop loop, so the agent must publish it"
            )
        out.files[Path("hats") / f"{name}.toml"] = _hat_file(name, table)
    out.files[Path("loop.toml")] = _loop_file(loop, backend, Path(source).name)
    for text in out.files.values():
        tomllib.loads(text)  # what is written always parses
    return out


def _solo_hat(start: str, completion: str) -> dict[str, Any]:
    """The one hat of Ralph's solo mode: it works on the objective a task a turn, and
    runs again (with a fresh context) after every turn until it publishes ``completion``;
    as the loop's fallback it takes any other event too."""
    return {
        "description": "Ralph's solo mode: works on the objective itself, one task a turn",
        "triggers": [start, _SOLO_NEXT],
        "publishes": [_SOLO_NEXT, completion],
        "default_publishes": _SOLO_NEXT,
        "instructions": _SOLO_INSTRUCTIONS.format(
            loop=_LOOP, next=_SOLO_NEXT, completion=completion
        ),
    }


def _left_to_ralph(
    tables: Mapping[str, Mapping[str, Any]], start: str, completion: str
) -> list[str]:
    """The topics Ralph, the coordinator, would take: the starting event when no hat is
    triggered by it, and what the hats publish that no hat is triggered by."""
    triggers = [t for table in tables.values() for t in table["triggers"]]
    left = [] if any(topic_matches(t, start) for t in triggers) else [start]
    for table in tables.values():
        for topic in map(str, table.get("publishes") or []):
            if (
                topic not in left
                and is_valid_topic(topic)  # a pattern: the fallback takes what it matches
                and not is_reserved(topic, completion)
                and not any(topic_matches(t, topic) for t in triggers)
            ):
                left.append(topic)
    return left


def _coordinator(
    tables: Mapping[str, Mapping[str, Any]], left: list[str], completion: str
) -> dict[str, Any]:
    """Ralph, the coordinator of a hat collection that counts on one: triggered by
    ``left`` (and, as the loop's fallback, by any event no hat takes), it hands the work
    to the hats one event at a time and completes the loop."""
    handoffs = [
        str(t)
        for table in tables.values()
        for t in table["triggers"]
        if is_valid_topic(str(t)) and not is_reserved(str(t), completion)
    ]
    roster = "\n".join(
        f"- `{name}`"
        + (f" ({table['description']})" if table.get("description") else "")
        + ": triggered by "
        + ", ".join(f"`{t}`" for t in table["triggers"])
        for name, table in tables.items()
    )
    return {
        "description": "Ralph, the coordinator: hands the work to the hats",
        "triggers": left,
        "publishes": [*dict.fromkeys(handoffs), completion],
        "instructions": _COORDINATOR_INSTRUCTIONS.format(
            loop=_LOOP, roster=roster, completion=completion
        ),
    }


def _section(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise InputError(f"{source}: {key}: not a mapping")
    return value


def _cli_backend(cli: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    kind = str(cli.get("backend") or _FALLBACK_BACKEND)
    for key in cli:
        if key not in ("backend", "command", "args", "prompt_mode"):
            notes.append(f"cli.{key}: a Ralph setting")
    table = _backend(
        kind,
        command=cli.get("command"),
        args=cli.get("args"),
        cli=cli,
        where="cli.backend",
        fallback=_FALLBACK_BACKEND,
        notes=notes,
    )
    return table or {"type": _FALLBACK_BACKEND}


def _backend(
    kind: str,
    *,
    command: object,
    args: object,
    cli: Mapping[str, Any],
    where: str,
    fallback: str,
    notes: list[str],
) -> dict[str, Any] | None:
    """A backend table, or None (noted) for an agent hatloop has no backend for: then
    ``fallback`` runs instead (claude for the loop, the loop's backend for a hat)."""
    extra = [str(a) for a in args] if isinstance(args, list) else []
    if kind == "custom" and isinstance(command, str) and command:
        via = "arg" if cli.get("prompt_mode") == "arg" else "stdin"
        return {"type": "command", "command": [command, *extra], "prompt_via": via}
    table = None
    if kind in AGENT_BACKENDS:
        table = {"type": kind, **({"args": extra} if extra else {})}
    else:
        notes.append(
            f"{where}: {kind!r} has no hatloop backend; "
            f"{fallback} runs instead (change the backend table)"
        )
    if (table or {"type": fallback})["type"] == "claude" and _CLAUDE not in notes:
        notes.append(_CLAUDE)
    return table


def _hat(
    name: str,
    hat: Mapping[str, Any],
    cli: Mapping[str, Any],
    *,
    default: str,
    notes: list[str],
    source: str,
) -> dict[str, Any] | None:
    """A hat's table (``default``: the loop's backend type), or None (noted) for a hat
    without triggers."""
    table: dict[str, Any] = {}
    for key, value in hat.items():
        if key in _HAT_KEYS:
            table[_HAT_KEYS[key]] = value
        elif key == "aggregate" and isinstance(value, Mapping):
            table["aggregate"] = _aggregate(name, value, notes)
        elif key not in ("instructions", "extra_instructions", "backend", "backend_args", "args"):
            why = _WHY.get(str(key), "a Ralph setting")
            notes.append(f"hats.{name}.{key}: {why}")
    if not table.get("triggers"):
        notes.append(f"hats.{name}: no triggers (hatloop needs one): the hat is left out")
        return None
    parts = [str(hat.get("instructions") or "")]
    parts += [str(x) for x in hat.get("extra_instructions") or []]
    instructions = rewrite_commands("\n\n".join(p.strip("\n") for p in parts if p.strip()))
    if tools := sorted({m[1] for m in _OTHER_TOOLS.finditer(instructions)}):
        listed = ", ".join(f"`ralph tools {t}`" for t in tools)
        notes.append(f"hats.{name}.instructions: {listed} (no hatloop equivalent; left as written)")
    if instructions:
        table["instructions"] = instructions + "\n"
    args = hat.get("backend_args", hat.get("args"))
    raw = hat.get("backend")
    if raw is None and args:
        raw = str(cli.get("backend") or _FALLBACK_BACKEND)
    if raw is not None:
        where = f"hats.{name}.backend"
        if isinstance(raw, str):
            backend = _backend(
                raw,
                command=cli.get("command"),
                args=args,
                cli=cli,
                where=where,
                fallback=default,
                notes=notes,
            )
        elif isinstance(raw, Mapping):
            if "agent" in raw:
                notes.append(f"{where}.agent: a Kiro agent")
            kind = str(raw.get("type") or ("custom" if "command" in raw else ""))
            backend = _backend(
                kind,
                command=raw.get("command"),
                args=raw.get("args", args),
                cli=cli,
                where=where,
                fallback=default,
                notes=notes,
            )
        else:
            raise InputError(f"{source}: {where}: not a string or a mapping")
        if backend is not None:
            table["backend"] = backend
    return table


def _aggregate(name: str, agg: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """A wave's ``aggregate``: ``mode``, ``timeout`` → ``timeout_seconds``, ``count``."""
    out: dict[str, Any] = {}
    mode = agg.get("mode", "wait_for_all")
    if mode in _AGGREGATE_MODES:
        out["mode"] = mode
    else:
        notes.append(f"hats.{name}.aggregate.mode: {mode!r} (hatloop waits for all instead)")
    for key, value in agg.items():
        if key == "timeout":
            out["timeout_seconds"] = value
        elif key == "count":
            out["count"] = value
        elif key != "mode":
            notes.append(f"hats.{name}.aggregate.{key}: a Ralph setting")
    return out


# -- writing TOML -----------------------------------------------------------------------


def _string(text: str) -> str:
    if "\n" in text and "'''" not in text and not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text):
        return "'''\n" + text + "'''"  # a literal block: the instructions read as written
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return _string(str(value))


def _key(key: object) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else json.dumps(text)


def _table(header: str, values: Mapping[str, Any]) -> str:
    lines = [f"[{header}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _loop_file(loop: Mapping[str, Any], backend: Mapping[str, Any], source: str) -> str:
    head = (
        f"# Converted from the Ralph Orchestrator configuration {source}\n"
        "# by `python -m loop init --from-ralph`. The hats are in hats/.\n\n"
    )
    return head + _table("loop", loop) + "\n" + _table("backend", backend)


def _hat_file(name: str, table: Mapping[str, Any]) -> str:
    own = {k: v for k, v in table.items() if k != "backend"}
    text = _table(f"hats.{_key(name)}", own)
    if "backend" in table:
        text += "\n" + _table(f"hats.{_key(name)}.backend", table["backend"])
    return text
