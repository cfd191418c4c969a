"""The command backend's argv building and settings (pure parts)."""

from __future__ import annotations

from pathlib import Path

from loop.backends.command import CommandBackend, build_argv
from loop.config.backends import CommandConfig


def test_prompt_goes_on_stdin_as_an_argument_or_in_a_file() -> None:
    """stdin mode feeds bytes; arg and file modes replace placeholders or append."""
    assert build_argv(["a"], "stdin", "hi", None) == (["a"], b"hi")
    assert build_argv(["a", "{prompt}", "-x"], "arg", "hi", None) == (["a", "hi", "-x"], None)
    assert build_argv(["a"], "arg", "hi", None) == (["a", "hi"], None)
    f = Path("/tmp/p.md")
    assert build_argv(["a", "--in", "{prompt_file}"], "file", "hi", f) == (
        ["a", "--in", str(f)],
        None,
    )
    assert build_argv(["a"], "file", "hi", f) == (["a", str(f)], None)


def test_settings_reach_the_backend() -> None:
    """prompt_via, env and timeout come from the config; the kind is `command`."""
    plain = CommandBackend.from_config(
        CommandConfig(command=["x"], prompt_via="file", env={"A": "1"}, timeout_seconds=5)
    )
    assert (plain.kind, plain.prompt_via, plain.env, plain.timeout_seconds) == (
        "command",
        "file",
        {"A": "1"},
        5,
    )
