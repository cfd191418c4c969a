"""Flags as a user of pytest, uv or ruff expects them: the flag wins over the file, and a
bad flag is an exit-2 one-line error that names the flag."""

from __future__ import annotations

import json
from pathlib import Path

from loop.cli import build_parser
from loop.commands.run import overrides_from
from loop.config import load_config
from tests.commands.helpers import loop

ECHO = """\
[loop]
prompt = "from loop.toml"
max_iterations = 1

[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.echo]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = { type = "scripted", outputs = ['<event topic="LOOP_COMPLETE">ok</event>'] }
"""


def _start_payload(folder: Path) -> str:
    journal = next((folder / ".loop/sessions").glob("*/journal.jsonl"))
    start = json.loads(journal.read_text(encoding="utf-8").splitlines()[0])
    return str(start["start_event"]["payload"])


def test_prompt_file_wins_over_the_configs_prompt(tmp_path: Path) -> None:
    """``--prompt-file`` replaces ``[loop] prompt``: the loop starts on the file's text."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    (tmp_path / "objective.md").write_text("from the flag's file", encoding="utf-8")
    res = loop("run", "-q", "--prompt-file", "objective.md", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _start_payload(tmp_path) == "from the flag's file"


def test_a_missing_prompt_file_is_the_flags_error(tmp_path: Path) -> None:
    """A missing ``--prompt-file``: exit 2, one line naming the flag, not loop.toml."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    res = loop("run", "-q", "--prompt-file", "nope.md", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["error: --prompt-file nope.md: file not found"]
    assert not (tmp_path / ".loop/sessions").exists()


def test_an_empty_or_unreadable_objective_from_a_flag_is_the_flags_error(
    tmp_path: Path,
) -> None:
    """``--prompt ""``, ``--prompt "  "``, an empty ``--prompt-file`` and one that is not
    UTF-8, and an empty ``--record-session`` file name: exit 2, one line naming the flag;
    nothing runs."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    (tmp_path / "blank.md").write_text(" \n\t\n", encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("caf\u00e9".encode("latin-1"))
    for argv, said in (
        (["--prompt", ""], "--prompt: empty objective"),
        (["--prompt", "  "], "--prompt: empty objective"),
        (["--prompt-file", "blank.md"], "--prompt-file blank.md: empty objective"),
        (["--prompt-file", "latin1.md"], "--prompt-file latin1.md: not UTF-8 text (byte 3)"),
        (["--record-session", ""], "--record-session must not be empty"),
        (["--record-session", " ", "--force"], "--record-session: empty file name"),
    ):
        res = loop("run", "-q", *argv, cwd=tmp_path)
        assert res.returncode == 2, argv
        assert res.stderr.strip().splitlines() == [f"error: {said}"], res.stderr
    assert not (tmp_path / ".loop/sessions").exists()


def test_a_resume_keeps_its_objective_and_its_id(tmp_path: Path) -> None:
    """``--prompt``/``--prompt-file`` with ``--resume`` (the objective would change
    unjournaled) and ``--session-id`` with ``--resume`` or empty are exit-2 errors of one
    line; the session is left as it was."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    (tmp_path / "other.md").write_text("another objective", encoding="utf-8")
    first = loop("run", "-q", "--session-id", "s", "--max-iterations", "1", cwd=tmp_path)
    journal = tmp_path / ".loop/sessions/s/journal.jsonl"
    before = journal.read_bytes()
    assert first.returncode in (0, 3), first.stderr
    for argv, said in (
        (["--resume", "s", "--prompt", "x"], "error: --prompt with --resume: a resumed session"),
        (["--resume", "s", "--prompt-file", "other.md"], "error: --prompt-file with --resume: "),
        (["--resume", "s", "--session-id", "t"], "not allowed with argument --resume"),
        (["--session-id", ""], "error: --session-id: empty (leave it out for a generated id)"),
    ):
        res = loop("run", "-q", *argv, cwd=tmp_path)
        assert res.returncode == 2, argv
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines
    assert journal.read_bytes() == before
    assert [p.parent.name for p in (tmp_path / ".loop/sessions").glob("*/journal.jsonl")] == ["s"]


def test_a_hats_budget_flag_sets_that_hat_and_names_itself_when_wrong(tmp_path: Path) -> None:
    """--hat-max-cost-usd HAT=USD and --hat-max-tokens HAT=N set the hat's budget for a
    run too (the summary's note names it); an unknown hat or a bad value is an exit-2
    error naming the flag."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    for argv, said in (
        (["--hat-max-cost-usd", "nope=1"], "error: --hat-max-cost-usd: no hat 'nope' (hats: echo)"),
        (["--hat-max-tokens", "echo=0"], "echo: expected a whole number of tokens, at least 1"),
        (["--hat-max-cost-usd", "echo"], "expected HAT=VALUE, got 'echo'"),
        (["--hat-max-cost-usd", "echo=x"], "echo: expected dollars, above 0, got 'x'"),
    ):
        res = loop("run", "-q", *argv, cwd=tmp_path)
        assert res.returncode == 2, argv
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], lines
    config = load_config(
        tmp_path / "loop.toml",
        overrides=overrides_from(
            build_parser("run").parse_args(
                ["run", "--hat-max-cost-usd", "echo=0.5", "--hat-max-tokens", "echo=900"]
            )
        ),
    )
    assert (config.hats["echo"].max_cost_usd, config.hats["echo"].max_tokens) == (0.5, 900)
    assert config.limit_settings().hat_max_cost_usd == {"echo": 0.5}


def test_a_hats_budget_given_twice_with_different_values_is_refused(tmp_path: Path) -> None:
    """One budget per hat: the same hat given two different values is an exit-2 error
    naming the flag and the hat (neither silently wins); the same value twice is fine."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    for flag, first, second in (
        ("--hat-max-cost-usd", "echo=1", "echo=2"),
        ("--hat-max-tokens", "echo=900", "echo=800"),
    ):
        res = loop("run", "-q", flag, first, flag, second, cwd=tmp_path)
        assert res.returncode == 2
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: hat 'echo' given two")
    args = ["run", "--hat-max-cost-usd", "echo=0.5", "--hat-max-cost-usd", "echo=0.50"]
    overrides = overrides_from(build_parser("run").parse_args(args))
    assert overrides["hat_max_cost_usd"] == {"echo": 0.5}


def test_prompt_and_prompt_file_exclude_each_other(tmp_path: Path) -> None:
    """Both objectives at once is a usage error, not a silent choice."""
    res = loop("run", "--prompt", "a", "--prompt-file", "b.md", cwd=tmp_path)
    assert res.returncode == 2
    assert "not allowed with argument" in res.stderr


def test_an_unopenable_recording_is_refused_before_any_iteration(tmp_path: Path) -> None:
    """``--record-session`` to a file that cannot be written (in /proc, a folder, a link):
    exit 2, one line naming the file, and no session was started."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    for target, why in (
        ("/proc/x.jsonl", "cannot write the recording"),
        ("folder", "is a folder"),
        ("link.jsonl", "is a symbolic link"),
    ):
        res = loop("run", "-q", "--record-session", target, cwd=tmp_path)
        assert res.returncode == 2, (target, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], lines
        assert not (tmp_path / ".loop/sessions").exists()
    assert not (tmp_path / "elsewhere.jsonl").exists()
    assert not Path("/proc/x.jsonl").exists()


def test_a_recordings_options_without_a_recording_are_refused(tmp_path: Path) -> None:
    """--force, --no-redact and --record-max-bytes without --record-session: exit 2
    naming them, before any session (they were accepted and did nothing)."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    res = loop("run", "-q", "--force", "--record-max-bytes", "4096", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: --force, --record-max-bytes: only with --record-session FILE"
    )
    assert loop("run", "-q", "--no-redact", cwd=tmp_path).returncode == 2
    assert not (tmp_path / ".loop/sessions").exists()


def test_hats_naming_a_folder_without_hat_files_is_the_flags_error(tmp_path: Path) -> None:
    """--hats naming a folder with no *.toml: exit 2, one line naming the flag (it said
    `loop.toml: hats: no hats defined`, blaming a file that was not at fault)."""
    (tmp_path / "loop.toml").write_text('[loop]\nprompt = "x"\n', encoding="utf-8")
    (tmp_path / "empty").mkdir()
    res = loop("run", "-q", "--hats", "empty", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == "error: --hats empty: no hat files (*.toml)"


def test_a_resume_into_a_recording_at_its_cap_is_refused_before_it_runs(tmp_path: Path) -> None:
    """A recording already too big for the cap a resume gives could take nothing more (not
    even its cap marker): it would replay as the shorter session it holds. Exit 2 before
    the resume runs; the recording and the session are as they were."""
    # the built-in demo (no loop.toml), stopped after 2 of its 5 iterations
    first = loop(
        "run",
        "-q",
        "--session-id",
        "s",
        "--max-iterations",
        "1",
        "--record-session",
        "r.jsonl",
        cwd=tmp_path,
    )
    assert first.returncode == 3, first.stderr
    recording, journal = tmp_path / "r.jsonl", tmp_path / ".loop/sessions/s/journal.jsonl"
    before = recording.read_bytes(), journal.read_bytes()
    res = loop(
        "run",
        "-q",
        "--resume",
        "s",
        "--max-iterations",
        "5",
        "--record-session",
        "r.jsonl",
        "--record-max-bytes",
        str(len(before[0])),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "too close to its cap" in lines[0], lines
    assert (recording.read_bytes(), journal.read_bytes()) == before


def test_run_json_gives_the_recording_as_data(tmp_path: Path) -> None:
    """``run --json``: ``recording`` has what the summary's recording line says, as fields
    a CI job reads (null without a recording)."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    res = loop("run", "-q", "--json", "--record-session", "r.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    recording = json.loads(res.stdout)["recording"]
    assert recording == {
        "path": "r.jsonl",
        "records": recording["records"],
        "bytes": (tmp_path / "r.jsonl").stat().st_size,
        "max_bytes": 100 * 1024 * 1024,
        "cap_reached": False,
        "write_failures": 0,
    }
    assert recording["records"] >= 3  # header, the iteration, the footer
    plain = loop("run", "-q", "--json", "--session-id", "other", cwd=tmp_path)
    assert json.loads(plain.stdout)["recording"] is None


def test_a_recording_to_dev_null_is_written_and_discarded(tmp_path: Path) -> None:
    """``--record-session /dev/null --force`` (record, keep nothing): accepted before the
    run, as the docs say, and written without a failure (it is not cut like a file)."""
    (tmp_path / "loop.toml").write_text(ECHO, encoding="utf-8")
    res = loop("run", "-q", "--json", "--record-session", "/dev/null", "--force", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    recording = json.loads(res.stdout)["recording"]
    assert recording["write_failures"] == 0 and recording["records"] >= 3
