"""The exception tree: each class has its code and exit code, as its docstring draws them."""

from __future__ import annotations

import re

import pytest

from loop import errors, exits
from loop.errors import LoopError, StoreError, ToolError


def _classes() -> dict[str, type[LoopError]]:
    return {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, LoopError)
    }


def _drawn() -> dict[str, tuple[str, int]]:
    """``class -> (code, exit)`` as the module docstring's tree draws them."""
    rows = re.findall(r"[─ ]+(\w+)\s+(\S+)\s+(\d+)\s", errors.__doc__ or "")
    rows += re.findall(r"^\s{4}(LoopError)\s+(\S+)\s+(\d+)\s", errors.__doc__ or "", re.M)
    return {name: (code, int(exit_code)) for name, code, exit_code in rows}


def test_the_docstring_draws_every_class_with_its_code_and_exit_code() -> None:
    """Every class of the tree is drawn with the code and exit code it has."""
    drawn = _drawn()
    assert sorted(drawn) == sorted(_classes())
    for name, cls in _classes().items():
        code, exit_code = drawn[name]
        assert exit_code == cls.exit_code, name
        if cls is not ToolError:  # a tool error's code is its domain's
            assert code == cls.code, name


def test_codes_are_distinct_and_snake_case() -> None:
    """No two classes share a code, and every code is a snake_case word."""
    codes = [cls.code for cls in _classes().values() if cls is not ToolError]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            StoreError("invalid JSON", file="t.json"),
            {"code": "store_error", "message": "t.json: invalid JSON"},
        ),
        (
            ToolError("cooldown", "later", details={"next": 1}),
            {"code": "cooldown", "message": "later", "details": {"next": 1}},
        ),
        (errors.SessionError("locked"), {"code": "session_error", "message": "locked"}),
    ],
)
def test_every_error_has_one_structured_form(error: LoopError, expected: dict[str, object]) -> None:
    """to_dict() is the shape the CLI's --json, MCP and the bus all reply with."""
    assert error.to_dict() == {"error": expected}


def test_exit_codes_come_from_one_module() -> None:
    """The classes' exit codes are loop.exits' constants."""
    values = {exits.EXIT_OK, exits.EXIT_FAILED, exits.EXIT_USAGE, exits.EXIT_DIVERGED}
    assert {cls.exit_code for cls in _classes().values()} <= values
    assert exits.exit_code_for("a reason no table names") == exits.EXIT_FAILED
