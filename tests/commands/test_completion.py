"""``hatloop completion bash|zsh|fish``: scripts generated from the parser, run in the real
shells (zsh and fish when installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loop.cli import COMMANDS, build_parser
from loop.commands.completion import levels, script
from tests.commands.test_cli import loop


def _bash(script_file: Path, *words: str) -> list[str]:
    """What bash completes for ``words`` (the last one is being typed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script_file}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        '_hatloop; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    res = subprocess.run(
        ["bash", "--norc", "-c", program], capture_output=True, text=True, check=True
    )
    return res.stdout.split()


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three scripts, as the command prints them."""
    folder = tmp_path_factory.mktemp("completion")
    out = {}
    for shell in ("bash", "zsh", "fish"):
        res = loop("completion", shell, cwd=folder)
        assert res.returncode == 0, res.stderr
        out[shell] = folder / f"hatloop.{shell}"
        out[shell].write_text(res.stdout, encoding="utf-8")
    return out


def test_the_parser_walk_sees_every_command_and_nested_subcommand() -> None:
    """Every command of the table, nested ones (task create, sessions prune), choices."""
    by_path = {lv.path: lv for lv in levels(build_parser(all_commands=True))}
    assert set(by_path[""].subcommands) == set(COMMANDS)
    assert "prune" in by_path["sessions"].subcommands
    assert "--parent-id" in by_path["task create"].options
    assert by_path["completion"].choices == ["bash", "zsh", "fish"]
    assert by_path["run"].option_choices["--color"] == ["auto", "always", "never"]
    assert (
        script("bash", build_parser(all_commands=True))
        .rstrip()
        .endswith("complete -o filenames -F _hatloop hatloop")
    )


def test_bash_completes_commands_subcommands_options_and_values(
    scripts: dict[str, Path],
) -> None:
    """In a real bash: each level, an option's choices, files where nothing else fits."""
    bash = scripts["bash"]
    assert _bash(bash, "hatloop", "ta") == ["task"]
    assert _bash(bash, "hatloop", "task", "c") == ["create", "complete"]
    assert _bash(bash, "hatloop", "task", "create", "--pa") == ["--parent-id"]
    assert _bash(bash, "hatloop", "sessions", "prune", "--d") == ["--dry-run"]
    assert _bash(bash, "hatloop", "run", "--color", "") == ["auto", "always", "never"]
    assert _bash(bash, "hatloop", "completion", "") == ["bash", "zsh", "fish"]
    assert _bash(bash, "hatloop", "show", str(bash)[:-3]) == [str(bash)]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_from_its_script(scripts: dict[str, Path]) -> None:
    """In a real fish: `complete -C` lists what a Tab would offer, with the help text."""

    def fish(line: str) -> list[str]:
        program = f"source {scripts['fish']}; complete -C '{line}'"
        res = subprocess.run(["fish", "-c", program], capture_output=True, text=True, check=True)
        return [row.split("\t")[0] for row in res.stdout.splitlines()]

    assert fish("hatloop ta") == ["task"]
    assert fish("hatloop task c") == ["complete", "create"]
    assert fish("hatloop sessions prune --d") == ["--dry-run"]
    assert fish("hatloop experience st") == ["status"]  # the experience level's own
    assert sorted(fish("hatloop run --color ")) == ["always", "auto", "never"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_registers_the_completion(scripts: dict[str, Path], tmp_path: Path) -> None:
    """In a real zsh (no rc files): the script loads and registers hatloop's completer."""
    program = f"source {scripts['zsh']}; print -r -- $_comps[hatloop]"
    res = subprocess.run(
        ["zsh", "-f", "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert res.stdout.strip() == "_bash_complete -o filenames -F _hatloop"
