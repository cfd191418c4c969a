"""The command backend's argv building and the gemini / codex presets (pure parts)."""

from __future__ import annotations

from pathlib import Path

from loop.backends.command import CommandBackend, build_argv
from loop.backends.configs import CodexConfig, CommandConfig, GeminiConfig


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


def test_gemini_and_codex_are_presets_of_command() -> None:
    """gemini runs `gemini [--model M] [args] -p PROMPT`; codex `codex exec ... -` on stdin."""
    gem = CommandBackend.from_config(GeminiConfig(model="gemini-2.5-pro", args=["--yolo"]))
    assert gem.kind == "gemini" and gem.prompt_via == "arg"
    assert gem.command == ["gemini", "--model", "gemini-2.5-pro", "--yolo", "-p", "{prompt}"]
    cdx = CommandBackend.from_config(CodexConfig(args=["--full-auto"]))
    assert cdx.kind == "codex" and cdx.prompt_via == "stdin"
    assert cdx.command == ["codex", "exec", "--full-auto", "-"]
    plain = CommandBackend.from_config(
        CommandConfig(command=["x"], prompt_via="file", env={"A": "1"}, timeout_seconds=5)
    )
    assert (plain.kind, plain.prompt_via, plain.env, plain.timeout_seconds) == (
        "command",
        "file",
        {"A": "1"},
        5,
    )
