"""The command line as a user runs it: real subprocesses, exit codes, stdout vs stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.commands.test_replay_jobs import GOOD, diverging

ENV = {k: v for k, v in os.environ.items() if not k.startswith("LOOP_")}


def loop(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env=env or ENV,
        input=stdin,
        timeout=120,
        check=False,
    )


def test_run_in_an_empty_folder_uses_the_built_in_default_and_completes(tmp_path: Path) -> None:
    """`python -m loop run` with no config: the default preset completes, exit 0, summary."""
    res = loop("run", "--log-format", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("hatloop: completed after 5 iteration(s)")
    assert "planner ×1 · builder ×2 · reviewer ×2" in res.stdout
    progress = [json.loads(line) for line in res.stderr.splitlines() if line.startswith("{")]
    iterations = [p for p in progress if p.get("event") == "iteration"]
    assert [p["hat"] for p in iterations] == [
        "planner",
        "builder",
        "reviewer",
        "builder",
        "reviewer",
    ]
    assert (tmp_path / ".loop/sessions").is_dir()


def test_status_and_sessions_read_the_state_from_disk(tmp_path: Path) -> None:
    """After a run, status says completed with its iterations; --json is machine-readable."""
    assert loop("run", "-q", "--session-id", "demo", cwd=tmp_path).returncode == 0
    st = json.loads(loop("status", "--json", cwd=tmp_path).stdout)
    assert st["session_id"] == "demo" and st["status"] == "completed"
    assert st["iterations"] == 5 and st["termination"] == "completed"
    assert "demo" in loop("sessions", cwd=tmp_path).stdout


def test_status_sessions_and_export_follow_the_configured_sessions_dir(tmp_path: Path) -> None:
    """With ``[loop] sessions_dir`` set in loop.toml, status, sessions and export look
    there, not in .loop/sessions; a flag still wins."""
    assert loop("init", cwd=tmp_path).returncode == 0
    toml = tmp_path / "loop.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace("[loop]\n", '[loop]\nsessions_dir = "runs"\n', 1),
        encoding="utf-8",
    )
    assert loop("run", "-q", "--session-id", "demo", cwd=tmp_path).returncode == 0
    assert (tmp_path / "runs/demo/journal.jsonl").is_file()
    assert not (tmp_path / ".loop/sessions").exists()
    st = json.loads(loop("status", "--json", cwd=tmp_path).stdout)
    assert (st["session_id"], st["status"]) == ("demo", "completed")
    assert "demo" in loop("sessions", cwd=tmp_path).stdout
    elsewhere = loop("status", "--json", "--sessions-dir", "other", cwd=tmp_path)
    assert json.loads(elsewhere.stdout)["status"] == "not_found"
    exported = loop("export", "demo", "--json", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["conversations"] == 5


def test_a_failed_export_keeps_the_run_summary_and_exit_code(tmp_path: Path) -> None:
    """--export-experience on a run with no finished iteration: the summary still
    prints, with the export's failure as one line, and the run's own exit code stands."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "p"\n[hats.a]\ndescription = "a"\ntriggers = ["task.start"]\n'
        'backend = { type = "command", command = ["no-such-agent-xyz"] }\n',
        encoding="utf-8",
    )
    res = loop("run", "-q", "--no-preflight", "--export-experience", cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # backend_unavailable, not a usage error
    assert res.stdout.startswith("hatloop: backend_unavailable after 0 iteration(s)")
    assert "experience export failed: no_conversations: " in res.stdout


def _set_export_on_complete(folder: Path, extra: str = "") -> None:
    toml = folder / "loop.toml"
    text = toml.read_text(encoding="utf-8")
    assert "[experience]" not in text  # the preset leaves the section to its defaults
    toml.write_text(text + f"\n[experience]\nexport_on_complete = true\n{extra}", encoding="utf-8")


def test_export_on_complete_exports_a_completed_run(tmp_path: Path) -> None:
    """[experience] export_on_complete = true: a run that completes is exported as an
    experience (as with --export-experience), and the summary says so."""
    assert loop("init", cwd=tmp_path).returncode == 0
    _set_export_on_complete(tmp_path)
    res = loop("run", "-q", "--session-id", "done", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "experience done exported" in res.stdout
    manifest = tmp_path / ".loop/experiences/experience_done/manifest.json"
    assert json.loads(manifest.read_text(encoding="utf-8"))["total_conversations"] == 5
    checked = loop("experience", "validate", str(manifest.parent), "--json", cwd=tmp_path)
    assert json.loads(checked.stdout)["valid"] is True, checked.stdout


def test_export_on_complete_skips_a_run_that_did_not_complete(tmp_path: Path) -> None:
    """A run that stops at a limit is not exported by export_on_complete (the flag
    --export-experience still exports it); with the option off nothing is exported."""
    assert loop("init", cwd=tmp_path).returncode == 0
    _set_export_on_complete(tmp_path)
    res = loop("run", "-q", "--max-iterations", "2", "--session-id", "short", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "exported" not in res.stdout
    assert not (tmp_path / ".loop/experiences/experience_short").exists()
    res = loop(
        "run",
        "-q",
        "--max-iterations",
        "2",
        "--session-id",
        "kept",
        "--export-experience",
        cwd=tmp_path,
    )
    assert res.returncode == 3 and "experience kept exported" in res.stdout, res.stdout
    off = tmp_path / "off"
    off.mkdir()
    assert loop("init", cwd=off).returncode == 0
    assert loop("run", "-q", "--session-id", "plain", cwd=off).returncode == 0
    assert not (off / ".loop/experiences").exists()


def test_bad_usage_is_one_line_on_stderr_with_exit_2(tmp_path: Path) -> None:
    """Unknown options, bad values and bad config never print a traceback."""
    for args in (
        ["run", "--max-iterations", "many"],
        ["frobnicate"],
        ["run", "--config", "missing.toml"],
        ["status", "../etc"],
    ):
        res = loop(*args, cwd=tmp_path)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def _reader_gone(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI writing to a pipe whose reader has left (`... | head` after its first
    line, `... | true`): every write to stdout fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "loop", *args],
            cwd=cwd,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)


def test_a_reader_that_leaves_never_changes_the_verdict(tmp_path: Path) -> None:
    """`replay ... | head` in a CI shell run with `-o pipefail`: the replay goes on with
    no output, writes its JUnit file and exits 4, as it would unread; `doctor` keeps its
    failure (2). Before, the first failed write ended the command with exit 0."""
    (tmp_path / "good.jsonl").write_bytes(GOOD.read_bytes())
    (tmp_path / "diverged.jsonl").write_text(diverging(), encoding="utf-8")
    res = _reader_gone("replay", "diverged.jsonl", "good.jsonl", "--junit", "r.xml", cwd=tmp_path)
    assert res.returncode == 4, res.stderr
    assert 'failures="1"' in (tmp_path / "r.xml").read_text(encoding="utf-8")
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[hats.bare]\ndescription = "b"\ntriggers = ["task.start"]\n',
        encoding="utf-8",
    )
    res = _reader_gone("doctor", cwd=tmp_path)
    assert (res.returncode, res.stderr) == (2, "")


def test_emit_appends_a_line_and_refuses_bad_input(tmp_path: Path) -> None:
    """emit writes one JSON line to LOOP_EVENTS_FILE; no file or bad JSON is exit 2."""
    events = tmp_path / "events.jsonl"
    env = {**ENV, "LOOP_EVENTS_FILE": str(events)}
    assert loop("emit", "plan.ready", "step 1", cwd=tmp_path, env=env).returncode == 0
    assert loop("emit", "cfg.set", '{"a": 1}', "--json", cwd=tmp_path, env=env).returncode == 0
    assert loop("emit", "p.q", "-", cwd=tmp_path, env=env, stdin="from stdin").returncode == 0
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [(x["topic"], x["payload"]) for x in lines] == [
        ("plan.ready", "step 1"),
        ("cfg.set", {"a": 1}),
        ("p.q", "from stdin"),
    ]
    assert loop("emit", "x.y", "{bad", "--json", cwd=tmp_path, env=env).returncode == 2
    assert loop("emit", "bad topic", cwd=tmp_path, env=env).returncode == 2
    res = loop("emit", "x.y", cwd=tmp_path)
    assert res.returncode == 2 and "LOOP_EVENTS_FILE is not set" in res.stderr
    assert len(events.read_text().splitlines()) == 3


def test_emit_payloads_fans_out_one_event_per_payload(tmp_path: Path) -> None:
    """--payloads A B C (or one JSON array with --json) appends one event per payload."""
    events = tmp_path / "events.jsonl"
    env = {**ENV, "LOOP_EVENTS_FILE": str(events)}
    res = loop(
        "emit", "review.perspective", "--payloads", "rust", "docs", "ui", cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    array = '[{"role": "a"}, {"role": "b"}]'
    res = loop("emit", "r.p", "--payloads", array, "--json", "--target", "x", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [(x["topic"], x["payload"], x.get("target")) for x in lines] == [
        ("review.perspective", "rust", None),
        ("review.perspective", "docs", None),
        ("review.perspective", "ui", None),
        ("r.p", {"role": "a"}, "x"),
        ("r.p", {"role": "b"}, "x"),
    ]
    for bad in (
        ["--payloads"],
        ["--payloads", "[]", "--json"],
        ["--payloads", "[1", "--json"],
        ["--payloads", "a", "-"],  # stdin is for a single PAYLOAD
    ):
        res = loop("emit", "r.p", *bad, cwd=tmp_path, env=env)
        assert res.returncode == 2 and res.stderr.startswith("error: emit:"), bad
    res = loop("emit", "r.p", "--payloads", "1", '"two"', "three", "--json", cwd=tmp_path, env=env)
    assert "--json payload 3 of 3 ('three') is not valid JSON" in res.stderr  # which one
    assert len(events.read_text().splitlines()) == 5  # none of the three


def test_init_writes_a_preset_that_validates_and_never_overwrites(tmp_path: Path) -> None:
    """init writes loop.toml and hats/; a second init refuses and changes nothing."""
    assert loop("init", cwd=tmp_path).returncode == 0
    before = (tmp_path / "loop.toml").read_text()
    res = loop("init", cwd=tmp_path)
    assert res.returncode == 2 and "never overwrites" in res.stderr
    assert (tmp_path / "loop.toml").read_text() == before
    assert loop("hats", "validate", cwd=tmp_path).returncode == 0
    run = loop("run", "-q", cwd=tmp_path)
    assert run.returncode == 0 and "completed" in run.stdout


def test_init_with_a_backend_drops_per_hat_scripted_outputs(tmp_path: Path) -> None:
    """--backend claude sets [backend] and leaves hats without their scripted tables."""
    assert loop("init", "--backend", "claude", cwd=tmp_path).returncode == 0
    assert 'type = "claude"' in (tmp_path / "loop.toml").read_text()
    assert "outputs" not in (tmp_path / "hats/planner.toml").read_text()
    listing = loop("hats", "list", cwd=tmp_path).stdout
    assert listing.count("claude") == 3


def _wave_project(folder: Path, aggregate: str) -> None:
    """A wave in ``loop.toml``: a coordinator, three reviewers at once, a synthesizer
    with ``aggregate``."""
    (folder / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[backend]\ntype = "scripted"\n'
        '[hats.coordinator]\ntriggers = ["task.start"]\npublishes = ["review.perspective"]\n'
        '[hats.reviewer]\ntriggers = ["review.perspective"]\npublishes = ["review.done"]\n'
        "concurrency = 3\n"
        '[hats.synthesizer]\ntriggers = ["review.done"]\npublishes = ["LOOP_COMPLETE"]\n'
        f"{aggregate}\n"
    )


def test_hats_list_shows_how_each_hat_runs_alongside_others(tmp_path: Path) -> None:
    """A hat's concurrency and its aggregation are in the listing (a wave at a glance)."""
    _wave_project(tmp_path, 'aggregate = { mode = "quorum", count = 2, timeout_seconds = 60 }')
    rows = [line.split() for line in loop("hats", "list", cwd=tmp_path).stdout.splitlines()]
    assert rows[0][-1] == "PARALLEL"
    assert rows[1][0] == "coordinator" and rows[1][-1] == "-"
    assert rows[2][0] == "reviewer" and rows[2][-3:] == ["3", "at", "once"]
    assert rows[3][0] == "synthesizer"
    assert rows[3][-4:] == ["aggregates:", "quorum", "2", "(60s)"]


def test_hats_graph_prints_text_and_mermaid(tmp_path: Path) -> None:
    """graph shows the flow from the starting event to completion, also as Mermaid."""
    text = loop("hats", "graph", cwd=tmp_path).stdout
    assert "task.start → planner" in text and "planner —plan.ready→ builder" in text
    assert "reviewer → LOOP_COMPLETE (done)" in text
    mermaid = loop("hats", "graph", "--mermaid", cwd=tmp_path).stdout
    assert mermaid.startswith("flowchart LR") and "planner -->|plan.ready| builder" in mermaid


def test_hats_list_as_json_and_the_built_in_demo_is_said(tmp_path: Path) -> None:
    """`hats list --json` gives each hat's settings; with no loop.toml anywhere up the
    tree, list and graph say on stderr that these are the built-in demo's hats."""
    res = loop("hats", "list", "--json", cwd=tmp_path)
    listed = json.loads(res.stdout)
    assert listed["builtin"] is True
    assert sorted(h["name"] for h in listed["hats"]) == ["builder", "planner", "reviewer"]
    assert listed["hats"][0]["concurrency"] == 1 and listed["hats"][0]["aggregate"] is None
    for args in (["hats", "list"], ["hats", "graph"]):
        assert "these are the built-in demo's hats" in loop(*args, cwd=tmp_path).stderr
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[backend]\ntype = "scripted"\n[hats.a]\n'
        'triggers = ["task.start"]\npublishes = ["a.x"]\nconcurrency = 2\n[hats.b]\n'
        'triggers = ["a.x"]\naggregate = { mode = "quorum", count = 1 }\n'
    )
    res = loop("hats", "list", "--json", cwd=tmp_path)
    assert res.stderr == ""
    a, b = json.loads(res.stdout)["hats"]
    assert (a["name"], a["concurrency"], a["aggregate"]) == ("a", 2, None)
    assert (b["aggregate"]["mode"], b["aggregate"]["count"]) == ("quorum", 1)


def test_hats_list_shows_no_backend_for_a_hat_that_has_none(tmp_path: Path) -> None:
    """A hat with no backend of its own and no default [backend] is listed with none
    (`-`, null in JSON), as doctor and validate fail it; before, it showed `scripted`."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\n'
        '[hats.b]\ntriggers = ["a.x"]\nbackend = { type = "scripted" }\n'
    )
    rows = [line.split() for line in loop("hats", "list", cwd=tmp_path).stdout.splitlines()]
    assert rows[0][4] == "BACKEND"
    assert (rows[1][0], rows[1][4], rows[2][0], rows[2][4]) == ("a", "-", "b", "scripted")
    listed = json.loads(loop("hats", "list", "--json", cwd=tmp_path).stdout)["hats"]
    assert [h["backend"] for h in listed] == [None, "scripted"]
    doctor = loop("doctor", cwd=tmp_path)
    assert "hat a: no backend" in doctor.stdout and "hat b: no backend" not in doctor.stdout


def test_hats_list_shows_each_hats_name(tmp_path: Path) -> None:
    """A hat's `name` (Ralph's, which --from-ralph writes) is listed beside its key, the
    columns aligned past a wide character, and is `display_name` in --json (null when
    unset); before, it was shown nowhere."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[backend]\ntype = "scripted"\n'
        '[hats.worker]\nname = "👷 Worker"\ntriggers = ["task.start"]\n'
        '[hats.b]\ntriggers = ["a.x"]\n',
        encoding="utf-8",
    )
    lines = loop("hats", "list", cwd=tmp_path).stdout.splitlines()
    assert lines[0].split()[:3] == ["HAT", "NAME", "TRIGGERS"]
    assert lines[1].startswith("worker  👷 Worker  task.start")
    assert lines[2].startswith("b       -          a.x")  # 👷 takes two columns
    listed = json.loads(loop("hats", "list", "--json", cwd=tmp_path).stdout)["hats"]
    assert [(h["name"], h["display_name"]) for h in listed] == [
        ("worker", "👷 Worker"),
        ("b", None),
    ]


def test_hats_graph_says_which_hats_run_alongside_others(tmp_path: Path) -> None:
    """A wave's hats carry their concurrency and aggregation, in text and in Mermaid."""
    _wave_project(tmp_path, 'aggregate = { mode = "wait_for_all", timeout_seconds = 60 }')
    text = loop("hats", "graph", cwd=tmp_path).stdout.splitlines()
    assert "reviewer: 3 at once" in text
    assert "synthesizer: aggregates: wait_for_all (60s)" in text
    assert not any(line.startswith("coordinator:") for line in text)
    mermaid = loop("hats", "graph", "--mermaid", cwd=tmp_path).stdout.splitlines()
    assert '  reviewer["reviewer<br/>3 at once"]' in mermaid
    assert "  coordinator[coordinator]" in mermaid


def test_status_of_a_stale_loop_says_what_to_change_before_the_resume(tmp_path: Path) -> None:
    """A resume of a stale loop as it is stops again: status says so beside the command."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\nstale_threshold = 2\n[hats.a]\ntriggers = ["task.start", "a.x"]\n'
        'publishes = ["a.x"]\nbackend = { type = "scripted", outputs = '
        '["<event topic=\\"a.x\\">same</event>", "<event topic=\\"a.x\\">same</event>"] }\n'
    )
    assert loop("run", "-q", "--session-id", "s", cwd=tmp_path).returncode == 3
    status = loop("status", "s", cwd=tmp_path).stdout.splitlines()
    assert status[-1] == (
        "resume with python -m loop run --resume s (once hat a's prompt or backend, or "
        "[loop] stale_threshold, has changed in loop.toml)"
    )


def test_hats_validate_warns_about_unreachable_hats(tmp_path: Path) -> None:
    """A hat nothing triggers is reported (a warning, exit 0)."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\npublishes = ["LOOP_COMPLETE"]'
        '\n[hats.island]\ntriggers = ["never.sent"]\n[backend]\ntype = "scripted"\n'
    )
    res = loop("hats", "validate", cwd=tmp_path)
    assert res.returncode == 0
    assert "hat 'island' cannot be reached from 'task.start'" in res.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_gracefully_with_exit_130(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGINT or SIGTERM during an iteration: child stopped, journal closed as
    interrupted, the summary names the signal, exit 130."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[themes]\nenabled = false\n'
        '[hats.slow]\ntriggers = ["task.start"]\n'
        f'backend = {{ type = "command", command = ["{sys.executable}", "-c", '
        "\"import time, pathlib; pathlib.Path('started').write_text('1'); time.sleep(60)\"] }\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "loop", "run", "--session-id", "s"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(600):
        if (tmp_path / "started").exists():
            break
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"loop exited early: {proc.stderr.read() if proc.stderr else ''}")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    assert f"stopped by {signum.name}" in out
    assert f"signal={signum.name}" in err
    st = json.loads(loop("status", "s", "--json", cwd=tmp_path).stdout)
    assert st["status"] == "interrupted" and st["resume_command"]


# A Ctrl-C while the run sets up (the tool domains' extensions are being made), before
# the session's journal exists: the run stops as it does during an iteration.
_CTRL_C_DURING_SET_UP = """
import os, signal, sys
import loop.runner
made = loop.runner.domain_extensions
def ctrl_c(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return made(*args, **kwargs)
loop.runner.domain_extensions = ctrl_c
from loop.cli import main
sys.exit(main(["run", "--session-id", "s"]))
"""


def _ctrl_c_during_set_up(folder: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
    """``run`` of a hat that sleeps 60 s, given Ctrl-C while it sets up (``extra``: more
    of ``loop.toml``)."""
    (folder / "loop.toml").write_text(
        '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[themes]\nenabled = false\n'
        + extra
        + '[hats.slow]\ntriggers = ["task.start"]\n'
        f'backend = {{ type = "command", command = ["{sys.executable}", "-c", '
        '"import time; time.sleep(60)"] }\n'
    )
    return subprocess.run(
        [sys.executable, "-c", _CTRL_C_DURING_SET_UP],
        check=False,
        cwd=folder,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_ctrl_c_while_the_run_sets_up_ends_with_the_summary_naming_the_session(
    tmp_path: Path,
) -> None:
    """Not asyncio's KeyboardInterrupt (``error: interrupted``, no session named): the
    summary names the session it made and how to resume it, exit 130."""
    res = _ctrl_c_during_set_up(tmp_path)
    assert res.returncode == 130, res.stderr
    assert "error: interrupted" not in res.stderr
    assert res.stdout.startswith("hatloop: interrupted after 0 iteration(s)")
    assert "stopped by SIGINT" in res.stdout
    assert "--resume s" in res.stdout
    st = json.loads(loop("status", "s", "--json", cwd=tmp_path).stdout)
    assert st["status"] == "interrupted"


def test_a_ctrl_c_before_the_session_exists_makes_none_and_names_none(tmp_path: Path) -> None:
    """The same Ctrl-C with the session's MCP endpoint to start first: the run stops before
    its session exists, so nothing names one (no resume command for a session that is
    not there, no elapsed time made up): ``error: interrupted``, exit 130."""
    res = _ctrl_c_during_set_up(tmp_path, "[mcp]\nserve = true\n")
    assert res.returncode == 130, res.stderr
    assert res.stdout == ""
    assert res.stderr.strip().splitlines()[-1] == "error: interrupted"
    assert "Traceback" not in res.stderr
    assert not (tmp_path / ".loop/sessions/s").exists()


def _catches(pid: int, signum: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (Linux: /proc's SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


# hatloop as a shell starts it: SIGHUP's action the default (not ignored, as the test
# runner may have it, e.g. under nohup)
_HANG_UP_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'loop', *sys.argv[1:]])"
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("command", [["run", "--session-id", "s"], ["task", "list"]])
def test_a_stop_signal_while_the_command_starts_is_an_interrupt_not_a_death(
    tmp_path: Path, command: list[str], signum: signal.Signals
) -> None:
    """SIGTERM (a CI job's timeout) or SIGHUP (the terminal closed) as soon as the process
    can take it, while the command's modules are still being imported: ``error:
    interrupted``, exit 130, no traceback; not a silent death by the signal, and no
    session made."""
    (tmp_path / "loop.toml").write_text(HANG_UP_CONFIG)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANG_UP_DEFAULT, *command],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signum):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "error: interrupted"
    assert out == ""
    assert not (tmp_path / ".loop/sessions/s").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
@pytest.mark.parametrize("gap", [0.0, 0.02, 0.05, 0.2])
def test_a_second_stop_signal_still_exits_130_with_no_traceback(
    tmp_path: Path, gap: float, signum: signal.Signals
) -> None:
    """Ctrl-C (or a hang-up) twice: the second comes during the first one's cleanup or
    the process's exit. The exit code is 130 (a process killed by the signal was seen:
    -2, 129), never a traceback, and the journal is closed as interrupted."""
    (tmp_path / "loop.toml").write_text(HANG_UP_CONFIG)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANG_UP_DEFAULT, "run", "-q", "--session-id", "s"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _agent_pid(tmp_path, proc)  # type: ignore[arg-type]
    proc.send_signal(signum)
    time.sleep(gap)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    st = json.loads(loop("status", "s", "--json", cwd=tmp_path).stdout)
    assert st["status"] == "interrupted"


HANG_UP_CONFIG = (
    '[loop]\nprompt = "x"\n[tasks]\nenabled = false\n[themes]\nenabled = false\n'
    '[hats.slow]\ntriggers = ["task.start"]\n'
    f'backend = {{ type = "command", command = ["{sys.executable}", "-c", '
    "\"import os, time, pathlib; pathlib.Path('agent.pid').write_text(str(os.getpid())); "
    'time.sleep(60)"] }\n'
)


def _agent_pid(folder: Path, proc: subprocess.Popen[bytes]) -> int:
    """The agent's pid, once it has written it (the run is then inside its iteration)."""
    for _ in range(600):
        if (folder / "agent.pid").exists() and (folder / "agent.pid").read_text():
            return int((folder / "agent.pid").read_text())
        if proc.poll() is not None:
            pytest.fail(f"loop exited early with {proc.returncode}")
        time.sleep(0.1)
    pytest.fail("the agent never started")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_terminal_closing_stops_the_run_and_its_agent(tmp_path: Path) -> None:
    """The run's terminal hangs up (closed, an SSH connection dropped): SIGHUP stops the
    run as Ctrl-C does: the agent is stopped, not left running and spending; the journal
    ends as interrupted; writes to the dead terminal do not cut the stop short."""
    (tmp_path / "loop.toml").write_text(HANG_UP_CONFIG, encoding="utf-8")
    master, slave = os.openpty()
    # the terminal becomes the run's controlling terminal, as a shell's is
    take_terminal = (
        "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "os.execv(sys.executable, [sys.executable, '-m', 'loop', 'run', '--session-id', 's'])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", take_terminal],
        cwd=tmp_path,
        env={k: v for k, v in ENV.items() if k not in ("CI", "NO_COLOR")},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        agent = _agent_pid(tmp_path, proc)
        os.close(master)  # the terminal goes away: the kernel sends SIGHUP
        master = -1
        assert proc.wait(timeout=60) == 130
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gone(agent)
    end = json.loads((tmp_path / ".loop/sessions/s/journal.jsonl").read_text().splitlines()[-1])
    assert (end["kind"], end["reason"]) == ("session.end", "interrupted")


def test_a_run_started_with_nohup_outlives_a_hang_up(tmp_path: Path) -> None:
    """SIGHUP ignored at start (``nohup``): the person asked the run to outlive its
    terminal, and it does; SIGTERM still stops it."""
    (tmp_path / "loop.toml").write_text(HANG_UP_CONFIG, encoding="utf-8")
    with subprocess.Popen(
        ["nohup", sys.executable, "-m", "loop", "run", "--session-id", "s"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        try:
            agent = _agent_pid(tmp_path, proc)
            proc.send_signal(signal.SIGHUP)
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
            assert not _gone(agent)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
    assert _gone(agent)


@pytest.mark.parametrize("project", [False, True], ids=["no-loop.toml", "loop.toml"])
@pytest.mark.parametrize(
    ("argv", "domain"),
    [
        (["task", "list"], "loop.tasks"),
        (["theme", "status"], "loop.themes"),
        (["experience", "list"], "loop.experience"),
    ],
)
def test_a_tool_command_imports_its_own_domain_only(
    tmp_path: Path, argv: list[str], domain: str, project: bool
) -> None:
    """A tool command starts without the other domains, the engine, the backends' and
    hats' models, the MCP SDK and, unless something logs, structlog (what keeps it
    fast); with a loop.toml, it reads it through the sections' models alone."""
    if project:
        assert loop("init", cwd=tmp_path).returncode == 0
    code = (
        "import sys\n"
        "from loop.cli import main\n"
        f"assert main({argv!r}) == 0\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=ENV,
        text=True,
        capture_output=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    loaded = set(res.stderr.split())
    assert any(m.startswith(domain) for m in loaded)
    others = {"loop.tasks", "loop.themes", "loop.experience"} - {domain}
    heavy = ("loop.engine", "loop.config.models", "loop.config.backends", "loop.backends")
    heavy += ("mcp", "anyio")
    if domain == "loop.tasks":
        heavy += ("structlog",)
    assert [m for m in loaded if m.startswith((*others, *heavy))] == []
    assert ("loop.config.sections" in loaded) == project


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[tasks]\nfiel = "x.json"\n', "tasks.fiel: unknown key (did you mean 'file'?)"),
        (
            "[loop]\nmax_iteration = 5\n",
            "loop.max_iteration: unknown key (did you mean 'max_iterations'?)",
        ),
        ("[taks]\n", "taks: unknown key (did you mean 'tasks'?)"),
        ("[themes]\nworkspace = 3\n", "themes.workspace: expected a string, got 3"),
        # rules between [loop] keys: before, only run, doctor and hats refused them
        (
            '[loop]\ncancellation_event = "LOOP_COMPLETE"\n',
            "loop.cancellation_event: the cancellation event must differ from the completion "
            "and starting events",
        ),
        (
            '[loop]\nrequired_events = ["LOOP_COMPLETE"]\n',
            "loop.required_events: the completion event cannot be one of the required events",
        ),
        # before, accepted, and nothing was exported
        (
            "[experience]\nenabled = false\nexport_on_complete = true\n",
            "experience.export_on_complete: true with enabled = false: the domain is off, "
            "nothing would be exported; drop one of them",
        ),
    ],
)
def test_tool_commands_read_loop_toml_as_strictly_as_run(
    tmp_path: Path, toml: str, message: str
) -> None:
    """One reader: what `run` refuses in loop.toml, `task list`, `theme status`,
    `experience list`, `status` and `sessions` refuse too, with the same one-line error
    (exit 2)."""
    (tmp_path / "loop.toml").write_text(toml, encoding="utf-8")
    expected = f"{tmp_path / 'loop.toml'}: {message}"
    run = loop("run", "-q", cwd=tmp_path)
    assert (run.returncode, run.stderr.splitlines()[-1]) == (2, f"error: {expected}")
    for argv in (["task", "list"], ["theme", "status"], ["experience", "list"]):
        res = loop(*argv, cwd=tmp_path)
        assert (res.returncode, res.stderr) == (2, f"error: config_error: {expected}\n"), argv
    for argv in (["status"], ["sessions"]):
        res = loop(*argv, cwd=tmp_path)
        assert (res.returncode, res.stderr) == (2, f"error: {expected}\n"), argv


def test_a_tool_command_reports_every_error_with_its_code(tmp_path: Path) -> None:
    """A bad loop.toml in a tool command: error: config_error: ..., exit 2, and with --json
    the structured error on stdout, like a refused call."""
    (tmp_path / "loop.toml").write_text("[tasks\n", encoding="utf-8")
    res = loop("task", "list", "--json", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("error: config_error: ") and res.stderr.count("\n") == 1
    assert json.loads(res.stdout)["error"]["code"] == "config_error"


def test_quiet_leaves_only_warnings_and_errors_in_the_log(tmp_path: Path) -> None:
    """-q: no progress, and no info log lines (the experience export's among them); a
    warning still shows."""
    (tmp_path / "loop.toml").write_text(
        '[loop]\nprompt = "x"\nmax_iterations = 1\n[hats.a]\ntriggers = ["task.start"]\n'
        'backend = { type = "scripted", outputs = '
        '["<event topic=\\"nobody.listens\\">x</event>"] }\n'
    )
    loud = loop("run", "--export-experience", cwd=tmp_path)
    assert "[info" in loud.stderr and "experience export started" in loud.stderr
    quiet = loop("run", "-q", "--export-experience", cwd=tmp_path)
    assert "[info" not in quiet.stderr, quiet.stderr
    assert "[warning" in quiet.stderr  # the event no hat takes


def test_recording_a_session_warns_of_tool_state_a_replay_starts_without(
    tmp_path: Path,
) -> None:
    """A task made before the run is in the tasks file, not in the recording: the run
    says so as it starts recording (a replay starts in an empty folder); a clean project
    gets no such warning."""
    clean = loop("run", "-q", "--record-session", "r.jsonl", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "already hold" not in clean.stderr
    other = tmp_path / "other"
    other.mkdir()
    assert loop("task", "create", "made before", cwd=other).returncode == 0
    warned = loop("run", "-q", "--record-session", "r.jsonl", cwd=other)
    assert "the tools already hold data that a replay starts without" in warned.stderr
    assert f"1 task(s) in {other / '.loop' / 'tasks.json'}" in warned.stderr
