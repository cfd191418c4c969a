"""Validation errors in plain words: the key, what it expects, what it got.

pydantic's own messages (``String should match pattern ...``, ``Input should be ...``,
``(and 1 more)``) never reach a person: :func:`explain` turns the first error into one
line naming the key, and an unknown key gets the closest known one ("did you mean").
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from loop.errors import ConfigError

__all__ = ["FLAGS", "explain", "translate"]


def translate(exc: ValidationError, path: Path, model: type[BaseModel]) -> ConfigError:
    """The first validation error of ``exc`` (of ``model``) as a :class:`ConfigError`
    naming the file."""
    key, message = explain(exc, model)
    return ConfigError(message, file=path, key=key)


def explain(exc: ValidationError, model: type[BaseModel]) -> tuple[str, str]:
    """``(key, message)`` for the first validation error of ``exc``, in plain words: what
    is expected and what was given (no pydantic wording), and for an unknown key the
    closest known one."""
    errors = exc.errors(include_url=False)
    # a misspelt key shows as unknown and as missing: the unknown one says more
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    parts = _key_parts(err["loc"])
    loc = ".".join(parts)
    kind, given, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "extra_forbidden":
        known = _known_keys(model, parts[:-1], [str(p) for p in err["loc"]])
        close = difflib.get_close_matches(parts[-1], known, n=1, cutoff=0.6) if parts else []
        return loc, "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")
    if kind == "union_tag_invalid":
        tag = given.get("type") if isinstance(given, dict) else None
        return loc, f"unknown backend type {tag!r} (known: {', '.join(_backend_types())})"
    if kind == "union_tag_not_found":
        return loc, f"missing key 'type' (one of: {', '.join(_backend_types())})"
    if kind == "missing":
        return loc, "missing required key"
    return loc, _expected(kind, ctx, parts, given, err["msg"])


# The [loop] keys whose command-line flag is not their name in kebab case.
FLAGS = {"max_runtime_seconds": "--max-runtime", "max_wait_seconds": "--max-wait"}

_EXPECTED = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": 'a list, such as ["a", "b"]',
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
# Keys whose form is a pattern: what that pattern asks for, in words.
_FORMS = {"target": '"module:function", such as "hats.checks:run_tests"'}


def _given(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return repr(value)
    names = {list: "a list", dict: "a table", type(None): "nothing"}
    return names.get(type(value), type(value).__name__)


def _expected(kind: str, ctx: dict[str, Any], parts: list[str], given: object, msg: str) -> str:
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {_given(given)}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {
            "greater_than_equal": ("at least", "ge"),
            "greater_than": ("greater than", "gt"),
            "less_than_equal": ("at most", "le"),
            "less_than": ("less than", "lt"),
        }[kind]
        return f"expected a number {words[0]} {ctx.get(words[1])}, got {_given(given)}"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}, got {_given(given)}"
    if kind == "string_pattern_mismatch":
        form = _FORMS.get(parts[-1] if parts else "", "another form")
        return f"expected {form}, got {_given(given)}"
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length', 1)} item(s), got none"
    return msg.removeprefix("Value error, ")


def _backend_types() -> tuple[str, ...]:
    """The backend types: only an error under a ``backend`` key asks, and then the
    backends' models are being validated, so importing them costs nothing more."""
    from loop.config.backends import BACKEND_TYPES  # noqa: PLC0415 - start-up

    return BACKEND_TYPES


def _key_parts(loc: tuple[int | str, ...]) -> list[str]:
    """The key path of an error's location, without pydantic's own steps (validator
    names, and the backend type a tagged union adds after ``backend``)."""
    parts: list[str] = []
    tag_next = False  # the step right after ``backend`` is the union's tag, once
    for p in loc:
        text = str(p)
        if text.startswith(("function-", "tagged-")):
            continue
        if tag_next and text in (*_backend_types(), "replay"):
            tag_next = False
            continue
        tag_next = text == "backend"
        parts.append(text)
    return parts


def _known_keys(model: type[BaseModel], parents: list[str], loc: list[str]) -> list[str]:
    """The keys the table at ``parents`` may hold (for "did you mean"), found by walking
    the models down the path; [] when the path leads nowhere known."""
    current: Any = model
    index = 0
    while index < len(parents):
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(parents[index])
        if field is None:
            return []
        current, index = field.annotation, index + 1
        if typing.get_origin(current) is dict:  # a table of named entries: skip the name
            current, index = typing.get_args(current)[1], index + 1
        current = _backend_model(current, loc) or _unwrap_optional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap_optional(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 else annotation


def _backend_model(annotation: Any, loc: list[str]) -> type[BaseModel] | None:
    """The backend model an error inside ``[...backend]`` is about (by its ``type``)."""
    inner = _unwrap_optional(annotation)
    if typing.get_origin(inner) is typing.Annotated:
        inner = typing.get_args(inner)[0]
    members = [
        m for m in typing.get_args(inner) if isinstance(m, type) and issubclass(m, BaseModel)
    ]
    for m in members:
        tag = m.model_fields["type"].default if "type" in m.model_fields else None
        if tag in loc:
            return m
    return None
