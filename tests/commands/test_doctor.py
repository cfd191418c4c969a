"""``hatloop doctor``, the preflight ``run`` makes first, and ``hats validate``: what a
run needs is checked before any agent is called."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.commands.helpers import ENV

HATS = """\
[loop]
prompt = "x"
max_iterations = 2
{loop_extra}
[tasks]
enabled = false
[themes]
enabled = false
[experience]
enabled = false

[hats.tool]
triggers = ["task.start"]
publishes = ["LOOP_COMPLETE"]
backend = {{ type = "command", command = ["{program}"] }}
"""

AGENTS = """\
[hats.coder]
triggers = ["a.b"]
backend = { type = "claude" }

[hats.critic]
triggers = ["c.d"]
backend = { type = "gemini", env = { GEMINI_API_KEY = "test" } }

[hats.helper]
triggers = ["e.f"]
backend = { type = "python", target = "no_such_module_xyz:run" }
"""


def _cli(
    *args: str, cwd: Path, path: Path | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in ENV.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    }
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env.get('PATH', '')}"
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _fake_programs(folder: Path, *names: str) -> Path:
    """Stand-in programs on PATH (the preflight only looks them up)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        exe = folder / name
        exe.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        exe.chmod(0o755)
    return folder


def test_doctor_passes_a_runnable_config(tmp_path: Path) -> None:
    """Every check ok: exit 0, one line per check and a count."""
    (tmp_path / "loop.toml").write_text(HATS.format(program="true", loop_extra=""), "utf-8")
    res = _cli("doctor", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok    prompt      objective: [loop] prompt (1 characters)" in res.stdout
    assert "ok    program     hat tool: true (" in res.stdout
    assert "ok    folder      sessions: " in res.stdout
    assert res.stdout.rstrip().endswith("0 failed")


def test_doctor_names_each_missing_program_module_backend_key_and_folder(
    tmp_path: Path,
) -> None:
    """A missing program, a module that does not import, a hat without a backend, a
    missing API key (a warning) and a folder that cannot be written: one line each,
    exit 2. A key in the backend's env table (as the local mocks set it) is enough."""
    toml = HATS.format(program="no-such-agent-xyz", loop_extra='sessions_dir = "/proc/x/s"\n')
    toml += AGENTS + '\n[hats.bare]\ntriggers = ["g.h"]\n'
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    bin_dir = _fake_programs(tmp_path / "bin", "claude", "gemini")
    res = _cli("doctor", cwd=tmp_path, path=bin_dir, home=tmp_path / "home")
    assert res.returncode == 2, res.stdout + res.stderr
    out = res.stdout
    assert "fail  program     hat tool: no-such-agent-xyz: not found on PATH" in out
    assert "fail  python      hat helper: no_such_module_xyz:run: cannot import" in out
    assert "fail  backend     hat bare: no backend: set [hats.bare.backend]" in out
    assert "warn  credentials hat coder: claude: none of ANTHROPIC_API_KEY" in out
    assert "ok    credentials hat critic: gemini: GEMINI_API_KEY is set" in out
    assert "ok    program     hat coder: claude (" in out
    assert "fail  folder      sessions: /proc/x/s" in out
    as_json = json.loads(_cli("doctor", "--json", cwd=tmp_path, path=bin_dir).stdout)
    assert {c["status"] for c in as_json["checks"]} >= {"ok", "warn", "fail"}


def test_hats_on_the_same_backend_are_checked_once_together(tmp_path: Path) -> None:
    """Three hats on the default [backend] and one on a backend of its own: the shared
    backend's checks are one line each, naming the three hats; run's error too."""
    toml = (
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[themes]\nenabled = false\n'
        '[experience]\nenabled = false\n[backend]\ntype = "command"\n'
        'command = ["no-such-agent-xyz"]\n'
        '[hats.plan]\ntriggers = ["task.start"]\n[hats.build]\ntriggers = ["a.b"]\n'
        '[hats.review]\ntriggers = ["c.d"]\n'
        '[hats.tool]\ntriggers = ["e.f"]\nbackend = { type = "command", command = ["true"] }\n'
    )
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    res = _cli("doctor", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    programs = [line for line in res.stdout.splitlines() if " program " in line]
    assert programs[0] == (
        "fail  program     hats plan, build, review: no-such-agent-xyz: not found on PATH"
    )
    assert programs[1].startswith("ok    program     hat tool: true (")
    assert len(programs) == 2
    res = _cli("run", "-q", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == (
        "error: hats plan, build, review: no-such-agent-xyz: not found on PATH"
    )


def test_run_checks_first_and_no_preflight_skips(tmp_path: Path) -> None:
    """run stops before any iteration on a failed check (exit 2, one error line per
    failure and a hint); --no-preflight runs on (the missing program: exit 1)."""
    (tmp_path / "loop.toml").write_text(
        HATS.format(program="no-such-agent-xyz", loop_extra=""), "utf-8"
    )
    res = _cli("run", "-q", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == ("error: hat tool: no-such-agent-xyz: not found on PATH")
    assert "doctor" in res.stderr and "--no-preflight" in res.stderr
    assert not (tmp_path / ".loop").exists()
    res = _cli("run", "-q", "--no-preflight", cwd=tmp_path)
    assert res.returncode == 1 and "backend_unavailable" in res.stdout


def test_a_program_path_that_fails_names_the_path_checked_and_why(tmp_path: Path) -> None:
    """A relative program is taken from the project folder: the check names the path it
    looked at, and whether nothing is there, a folder is, or the file is not executable."""
    (tmp_path / "folder.sh").mkdir()
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")
    for program, said in (
        ("./agent.sh", f"./agent.sh ({tmp_path}/agent.sh): not found (a relative path is "),
        ("./folder.sh", f"./folder.sh ({tmp_path}/folder.sh): not a file"),
        ("./plain.sh", f"./plain.sh ({tmp_path}/plain.sh): not executable"),
        (f"{tmp_path}/gone", f"{tmp_path}/gone: not found"),
    ):
        (tmp_path / "loop.toml").write_text(HATS.format(program=program, loop_extra=""), "utf-8")
        res = _cli("doctor", cwd=tmp_path)
        assert res.returncode == 2
        assert f"fail  program     hat tool: {said}" in res.stdout, res.stdout


def test_hats_validate_fails_a_hat_without_a_backend_or_program(tmp_path: Path) -> None:
    """validate checks the hats' backends too: a hat with none, a program not found."""
    toml = HATS.format(program="true", loop_extra="") + '\n[hats.bare]\ntriggers = ["g.h"]\n'
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    res = _cli("hats", "validate", cwd=tmp_path)
    assert res.returncode == 2
    assert "error: hat bare: no backend" in res.stderr
    (tmp_path / "loop.toml").write_text(
        HATS.format(program="no-such-agent-xyz", loop_extra=""), "utf-8"
    )
    res = _cli("hats", "validate", cwd=tmp_path)
    assert res.returncode == 2 and "no-such-agent-xyz: not found on PATH" in res.stderr


def test_without_an_objective_doctor_lists_it_and_the_hats_commands_work(
    tmp_path: Path,
) -> None:
    """A project with no prompt yet (as `init --from-ralph` leaves one): doctor names the
    missing objective among its checks (exit 2) instead of stopping at it; `hats list`,
    `graph` and `validate` look at the hats, which need none; `run` refuses."""
    toml = HATS.format(program="true", loop_extra="").replace('prompt = "x"\n', "")
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    res = _cli("doctor", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "fail  prompt      objective: " in res.stdout
    assert "no prompt: set [loop] prompt or prompt_file, add PROMPT.md" in res.stdout
    assert "ok    program     hat tool: true (" in res.stdout  # the other checks still run
    for argv, shown in (
        (["hats", "list"], "tool"),
        (["hats", "graph"], "task.start → tool"),
        (["hats", "validate"], "ok: 1 hat(s)"),
    ):
        listed = _cli(*argv, cwd=tmp_path)
        assert listed.returncode == 0, (argv, listed.stderr)
        assert shown in listed.stdout, argv
    run = _cli("run", "-q", cwd=tmp_path)
    assert run.returncode == 2 and "no prompt" in run.stderr
    (tmp_path / "PROMPT.md").write_text("Fix the flaky test.\n", encoding="utf-8")
    res = _cli("doctor", cwd=tmp_path)
    assert res.returncode == 0
    assert "ok    prompt      objective: PROMPT.md (20 characters)" in res.stdout


def test_a_scripted_outputs_file_is_checked_as_run_reads_it(tmp_path: Path) -> None:
    """An absent outputs_file: doctor and hats validate fail it with the words run stops
    with (exit 2 each); a readable one is ok, with its count of outputs."""
    toml = (
        '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\n'
        'publishes = ["LOOP_COMPLETE"]\n'
        'backend = { type = "scripted", outputs_file = "nope.json" }\n'
    )
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    said = f"{tmp_path / 'nope.json'}: cannot read scripted outputs: "
    run = _cli("run", "-q", cwd=tmp_path)  # its preflight, as without it
    assert run.returncode == 2 and run.stderr.startswith(f"error: hat a: {said}"), run.stderr
    run = _cli("run", "-q", "--no-preflight", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.startswith(f"error: {said}"), run.stderr
    doctor = _cli("doctor", cwd=tmp_path)
    assert doctor.returncode == 2, doctor.stdout
    assert f"fail  outputs     hat a: {said}" in doctor.stdout
    validate = _cli("hats", "validate", cwd=tmp_path)
    assert validate.returncode == 2 and validate.stderr.startswith(f"error: hat a: {said}")
    (tmp_path / "nope.json").write_text('["<event topic=\\"LOOP_COMPLETE\\">x</event>"]')
    doctor = _cli("doctor", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout
    assert f"ok    outputs     hat a: {tmp_path / 'nope.json'} (1 outputs)" in doctor.stdout


def test_doctor_checks_the_recording_as_run_does(tmp_path: Path) -> None:
    """--record-session to a folder, a link, a FIFO, below a file, or a file that cannot be
    created: doctor fails it (exit 2) with the words run refuses it with (exit 2),
    whatever is there is said before "already exists"; a new file is ok and the check
    leaves nothing behind, not even the folders it would go in; an existing file is a
    warning."""
    (tmp_path / "loop.toml").write_text(HATS.format(program="true", loop_extra=""), "utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    os.mkfifo(tmp_path / "fifo")
    for target, why in (
        ("folder", "folder: is a folder; --record-session needs a file"),
        ("link.jsonl", "link.jsonl: is a symbolic link; --record-session needs a plain file"),
        ("fifo", "fifo: is a pipe or a socket; --record-session needs a file"),
        ("/proc/x.jsonl", "/proc/x.jsonl: cannot write the recording: "),
        ("fifo/r.jsonl", "fifo/r.jsonl: cannot write the recording: Not a directory"),
    ):
        doctor = _cli("doctor", "--record-session", target, cwd=tmp_path)
        assert doctor.returncode == 2, (target, doctor.stdout)
        assert f"fail  recording   --record-session: {why}" in doctor.stdout, doctor.stdout
        run = _cli("run", "-q", "--record-session", target, cwd=tmp_path)
        assert run.returncode == 2 and run.stderr.startswith(f"error: {why}"), run.stderr
    assert not (tmp_path / "elsewhere.jsonl").exists()
    assert not (tmp_path / ".loop").exists()
    doctor = _cli("doctor", "--record-session", "new/sub/r.jsonl", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout
    assert "ok    recording   --record-session: new/sub/r.jsonl can be written" in doctor.stdout
    assert not (tmp_path / "new").exists()
    (tmp_path / "r.jsonl").write_text("")
    doctor = _cli("doctor", "--record-session", "r.jsonl", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout
    assert "warn  recording   --record-session: r.jsonl: exists; run overwrites it only" in (
        doctor.stdout
    )
