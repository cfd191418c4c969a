"""``init --from-ralph``: Ralph Orchestrator's shipped presets convert, validate, and run
to completion (on a command backend standing in for the agent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from loop.config import load_config
from loop.config.ralph import convert_ralph, rewrite_commands
from loop.errors import InputError
from tests.commands.test_cli import ENV

RALPH = Path(__file__).parent / "ralph"
PRESETS = {  # preset -> (completion, required events, the hats in the order they run)
    "review": ("REVIEW_COMPLETE", 2, ["reviewer", "analyzer", "closer"]),
    "research": ("RESEARCH_COMPLETE", 1, ["researcher", "synthesizer"]),
    "debug": (  # the hasty first completion is refused: the investigator goes on
        "DEBUG_COMPLETE",
        4,
        [
            "investigator",
            "investigator",
            "tester",
            "investigator",
            "fixer",
            "verifier",
            "investigator",
        ],
    ),
    "code-assist": ("LOOP_COMPLETE", 1, ["planner", "builder", "critic", "finalizer"]),
}
# Ralph, the coordinator, added for the events no hat of the preset takes
COORDINATED = {"code-assist": ["build.blocked"], "debug": ["fix.blocked"]}


def _loop(*args: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(ENV)
    if path is not None:  # stand-in programs first on PATH
        env["PATH"] = f"{path}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "loop", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _run_on(root: Path, agent: str) -> None:
    """Replace the converted ``[backend]`` of ``root/loop.toml`` with a command backend
    running the Python script ``agent`` (a stand-in for the agent CLI)."""
    loop_toml = root / "loop.toml"
    text = loop_toml.read_text(encoding="utf-8")
    command = json.dumps([sys.executable, agent])
    loop_toml.write_text(
        text[: text.index("[backend]")] + f'[backend]\ntype = "command"\ncommand = {command}\n',
        encoding="utf-8",
    )


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_ralph_preset_converts_validates_and_runs_to_completion(
    tmp_path: Path, preset: str
) -> None:
    """The converted preset keeps Ralph's events, rules and guardrails; its hats' prompts
    carry hatloop's commands; the loop runs through every hat to the completion event,
    which the required events hold back until they were all published (a debug
    investigator that completes at once is refused and told what is missing)."""
    completion, required, order = PRESETS[preset]
    init = _loop("init", "--from-ralph", str(RALPH / f"{preset}.yml"), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert "not carried over: core.specs_dir: a Ralph setting" in init.stdout
    bin_dir = tmp_path / "bin"  # validate looks the claude program up: a stand-in
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (bin_dir / "claude").chmod(0o755)
    validate = _loop("hats", "validate", "--prompt", "x", cwd=tmp_path, path=bin_dir)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    config = load_config(tmp_path / "loop.toml", root=tmp_path, overrides={"prompt": "x"})
    assert config.loop.completion_event == completion
    assert len(config.loop.required_events) == required
    assert config.backend.type == "claude"  # code-assist's kiro is noted, claude written
    coordinator = {"ralph"} if preset in COORDINATED else set()
    assert sorted(config.hats) == sorted(set(order) | coordinator)
    if coordinator:
        assert config.hats["ralph"].triggers == COORDINATED[preset]
        assert config.loop.fallback_hat == "ralph"
    for hat in config.hats.values():
        assert "ralph emit" not in hat.instructions
        assert "ralph tools task" not in hat.instructions

    _run_on(tmp_path, str(RALPH / "agent.py"))
    (tmp_path / "PROMPT.md").write_text("Look into the flaky test.\n", encoding="utf-8")
    run = _loop("run", "-q", "--json", "--session-id", "r", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert (summary["reason"], summary["iterations"]) == ("completed", len(order))
    published = (tmp_path / "seen.txt").read_text(encoding="utf-8").split()
    assert published[-1] == completion
    assert set(config.loop.required_events) <= set(published)
    prompts = sorted((tmp_path / "prompts").iterdir())
    assert len(prompts) == len(order)
    first = prompts[0].read_text(encoding="utf-8")
    assert "Look into the flaky test." in first
    assert '"$LOOP_PYTHON" -m loop emit' in first
    if preset == "debug":
        refused = prompts[1].read_text(encoding="utf-8")
        assert "required events not published yet: hypothesis.test, " in refused
    for guardrail in config.loop.guardrails:  # code-assist has five, in every prompt
        assert all(guardrail in p.read_text(encoding="utf-8") for p in prompts)


def test_what_cannot_be_carried_over_is_listed_and_the_rest_written() -> None:
    """Memories, skills, Telegram and Ralph-only agents are noted, one line each;
    backends as strings and tables, timeouts, activations and waves map."""
    data = {
        "event_loop": {
            "completion_promise": "DONE",
            "cancellation_promise": "STOP",
            "enforce_hat_scope": True,
            "max_cost_usd": 2.5,
            "idle_timeout_secs": 300,
        },
        "cli": {"backend": "gemini"},
        "memories": {"enabled": True},
        "skills": {"enabled": True},
        "RObot": {"enabled": True},
        "hats": {
            "a": {
                "name": "A",
                "triggers": ["task.start"],
                "publishes": ["a.done"],
                "backend": {"type": "codex", "args": ["--model", "x"]},
                "timeout": 90,
                "max_activations": 2,
                "instructions": 'Run `ralph emit "a.done" "ok"`, `ralph tools memory add x`.',
            },
            "b": {
                "triggers": ["a.done"],
                "publishes": ["DONE"],
                "backend": "kiro",
                "concurrency": 3,
            },
            "c": {"custom": 1, "triggers": [], "publishes": []},
            "d": {"triggers": ["b.x"], "backend": {"command": "my-agent", "args": ["-q"]}},
        },
    }
    out = convert_ralph(data, source="ralph.yml")
    assert out.notes == [
        "memories: memories (hatloop has none; an agent keeps notes in files)",
        "skills: skills (give them to the agent CLI itself)",
        "RObot: Telegram (RObot) human-in-the-loop",
        "hats.a.instructions: `ralph tools memory` (no hatloop equivalent; left as written)",
        "hats.b.backend: 'kiro' has no hatloop backend; gemini runs instead "
        "(change the backend table)",
        "hats.c.custom: a Ralph setting",
        "hats.c: no triggers (hatloop needs one): the hat is left out",
    ]
    assert Path("hats/c.toml") not in out.files
    loop = tomllib.loads(out.files[Path("loop.toml")])
    assert loop["loop"] == {
        "completion_event": "DONE",
        "cancellation_event": "STOP",
        "strict_publishes": True,
        "max_cost_usd": 2.5,
        "idle_timeout_seconds": 300,
        "hats": ["hats"],
    }
    assert loop["backend"] == {"type": "gemini"}
    a = tomllib.loads(out.files[Path("hats/a.toml")])["hats"]["a"]
    assert a["backend"] == {"type": "codex", "args": ["--model", "x"]}
    assert (a["timeout_seconds"], a["max_activations"], a["name"]) == (90, 2, "A")
    assert a["instructions"].startswith('Run `"$LOOP_PYTHON" -m loop emit "a.done"')
    b = tomllib.loads(out.files[Path("hats/b.toml")])["hats"]["b"]
    assert "backend" not in b  # the default [backend] runs it
    assert b["concurrency"] == 3
    d = tomllib.loads(out.files[Path("hats/d.toml")])["hats"]["d"]
    assert d["backend"] == {"type": "command", "command": ["my-agent", "-q"], "prompt_via": "stdin"}


def test_ralph_commands_become_hatloops() -> None:
    """emit and task commands, bare or through $RALPH_BIN; the task verbs renamed."""
    text = (
        'ralph emit "x" "y"; "$RALPH_BIN" emit z; ralph tools task close 7; '
        '"$RALPH_BIN" tools task ensure --key k; `ralph tools task` is there; ralph tools memory'
    )
    assert rewrite_commands(text) == (
        '"$LOOP_PYTHON" -m loop emit "x" "y"; "$LOOP_PYTHON" -m loop emit z; '
        '"$LOOP_PYTHON" -m loop task complete 7; "$LOOP_PYTHON" -m loop task create --key k; '
        '`"$LOOP_PYTHON" -m loop task` is there; ralph tools memory'
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "not a Ralph configuration"),
        ({"hats": {"a": {"name": "A"}}}, "no hat has triggers"),
        ({"hats": {"a": "x"}}, "hats.a: not a mapping"),
        ({"cli": ["claude"], "hats": {"a": {"triggers": ["t"]}}}, "cli: not a mapping"),
    ],
)
def test_what_is_not_a_ralph_configuration_is_refused(data: object, message: str) -> None:
    """One line naming the file and the problem."""
    with pytest.raises(InputError, match=message) as caught:
        convert_ralph(data, source="x.yml")  # type: ignore[arg-type]
    assert str(caught.value).startswith("x.yml: ")


def test_init_from_ralph_refuses_bad_yaml_and_never_overwrites(tmp_path: Path) -> None:
    """Not YAML: exit 2 naming the file; existing files are never replaced."""
    bad = tmp_path / "bad.yml"
    bad.write_text("hats: [unclosed\n", encoding="utf-8")
    res = _loop("init", "--from-ralph", str(bad), cwd=tmp_path)
    assert res.returncode == 2 and "bad.yml: not YAML" in res.stderr
    assert _loop("init", "--from-ralph", str(RALPH / "research.yml"), cwd=tmp_path).returncode == 0
    again = _loop("init", "--from-ralph", str(RALPH / "research.yml"), cwd=tmp_path)
    assert again.returncode == 2 and "never overwrites" in again.stderr


@pytest.mark.parametrize(
    ("reviewer", "says"),
    [
        ("concurrency: 0", "hats/r.toml: hats.r.concurrency: expected a number at least 1, got 0"),
        ('timeout: "soon"', "hats/r.toml: hats.r.timeout_seconds: expected a number, got 'soon'"),
    ],
)
def test_init_from_ralph_refuses_what_hatloop_would_not_load(
    tmp_path: Path, reviewer: str, says: str
) -> None:
    """A value Ralph took that hatloop refuses is the conversion's error, naming the
    converted file and key; nothing is written (a `run` would fail on it)."""
    ralph = tmp_path / "ralph.yml"
    ralph.write_text(
        "hats:\n  d:\n    triggers: [task.start]\n    publishes: [review.perspective]\n"
        f"  r:\n    triggers: [review.perspective]\n    {reviewer}\n",
        encoding="utf-8",
    )
    res = _loop("init", "--from-ralph", str(ralph), "--dir", "out", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        f"error: {ralph}: the converted configuration is not valid, nothing was written: {says}"
    )
    assert not (tmp_path / "out").exists()


def _completed_wave(folder: Path, *args: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Run the converted wave-review to completion in 5 iterations (``args``: more flags);
    its journal's records, and the order of its starts and ends (``start reviewer``)."""
    run = _loop("run", "-q", "--json", "--session-id", "w", *args, cwd=folder)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert (summary["reason"], summary["iterations"]) == ("completed", 5)
    journal = folder / ".loop/sessions/w/journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    order = [
        f"{'start' if r['kind'] == 'iteration.start' else 'end'} {r['hat']}"
        for r in records
        if r["kind"] in ("iteration.start", "iteration.end")
    ]
    return records, order


def test_ralph_wave_review_runs_three_reviewers_in_parallel_and_one_aggregator(
    tmp_path: Path,
) -> None:
    """Ralph's wave-review converts: the coordinator's `ralph wave emit --payloads` fans
    out three events, three reviewers run at once (each waits for the other two to
    start), and the synthesizer, an aggregator, runs once on the three findings."""
    init = _loop("init", "--from-ralph", str(RALPH / "wave-review.yml"), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    # its synthesizer's default is the completion, which a default never is in hatloop
    assert (
        "not carried over: hats.synthesizer.default_publishes: 'review.complete' as a "
        "default" in init.stdout
    )
    config = load_config(tmp_path / "loop.toml", root=tmp_path, overrides={"prompt": "x"})
    assert config.hats["reviewer"].concurrency == 3
    aggregate = config.hats["synthesizer"].aggregate
    assert aggregate is not None and aggregate.mode == "wait_for_all"
    assert aggregate.timeout_seconds == 300
    assert "ralph wave emit" not in config.hats["coordinator"].instructions
    _run_on(tmp_path, str(RALPH / "wave_agent.py"))
    (tmp_path / "PROMPT.md").write_text("Review the authentication module.\n", encoding="utf-8")
    _, order = _completed_wave(tmp_path)
    assert order == [
        "start coordinator",
        "end coordinator",
        *["start reviewer"] * 3,
        *["end reviewer"] * 3,
        "start synthesizer",
        "end synthesizer",
    ]
    assert len((tmp_path / "review-report.md").read_text().splitlines()) == 3


def test_claudes_permissions_are_noted_only_where_a_claude_backend_is_written(
    tmp_path: Path,
) -> None:
    """The note on Claude Code's permissions concerns a claude backend: `--backend
    scripted` (or gemini, codex) writes none, so it is not said."""
    ralph = str(RALPH / "wave-review.yml")
    said = _loop("init", "--from-ralph", ralph, "--dir", "a", cwd=tmp_path).stdout
    assert "claude's permissions" in said
    for backend in ("scripted", "gemini"):
        said = _loop(
            "init", "--from-ralph", ralph, "--backend", backend, "--dir", backend, cwd=tmp_path
        ).stdout
        assert "claude's permissions" not in said
        assert "not carried over: hats.synthesizer.default_publishes" in said


@pytest.mark.parametrize("where", ["init", "run"])
def test_ralph_wave_review_on_scripted_stand_ins_fans_out_as_a_wave(
    tmp_path: Path, where: str
) -> None:
    """With no agent (`init --backend scripted`, or `run --backend scripted`), the
    stand-ins still make the wave: the coordinator's stand-in publishes one event per
    reviewer, the three reviewers run at once, and the synthesizer gathers them."""
    init_args = ["--backend", "scripted"] if where == "init" else []
    init = _loop("init", "--from-ralph", str(RALPH / "wave-review.yml"), *init_args, cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    run_args = ["--backend", "scripted"] if where == "run" else []
    records, order = _completed_wave(tmp_path, "--prompt", "x", *run_args)
    assert order[2:8] == [*["start reviewer"] * 3, *["end reviewer"] * 3]
    ends = [r for r in records if r["kind"] == "iteration.end"]
    assert [e["payload"] for e in ends[0]["events"]] == [f"part {i} of 3" for i in (1, 2, 3)]
    assert sorted(e["events"][0]["payload"] for e in ends[1:4]) == ["done 1", "done 2", "done 3"]


@pytest.mark.parametrize("preset", sorted(p.stem for p in RALPH.glob("*.yml")))
def test_every_vendored_ralph_preset_completes_on_stand_ins(tmp_path: Path, preset: str) -> None:
    """`init --from-ralph --backend scripted` runs each shipped preset to its completion
    event with no agent, the required events published on the way; debug's investigator
    runs three times (before, its one output ran out at its second activation)."""
    init = _loop(
        "init", "--from-ralph", str(RALPH / f"{preset}.yml"), "--backend", "scripted",
        cwd=tmp_path,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    assert "stand-ins:" not in init.stdout  # a walk completes
    run = _loop("run", "-q", "--json", "--prompt", "x", "--session-id", "s", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["reason"] == "completed"
    config = load_config(tmp_path / "loop.toml", root=tmp_path, overrides={"prompt": "x"})
    journal = tmp_path / ".loop/sessions/s/journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    ends = [r for r in records if r["kind"] == "iteration.end"]
    published = [e["topic"] for r in ends for e in r["events"]]
    assert published[-1] == config.loop.completion_event
    assert set(config.loop.required_events) <= set(published)
    if preset == "debug":
        assert [r["hat"] for r in ends] == [
            "investigator", "tester", "investigator", "fixer", "verifier", "investigator",
        ]  # fmt: skip


def test_a_session_on_stand_ins_resumes_where_it_stopped(tmp_path: Path) -> None:
    """`run --resume` of a session on `--backend scripted` carries on along the walk:
    each stand-in answers its hat's next activation (before, a hat that had run once had
    no output left for its second)."""
    init = _loop("init", "--from-ralph", str(RALPH / "debug.yml"), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    (tmp_path / "PROMPT.md").write_text("Look into the flaky test.\n", encoding="utf-8")
    first = _loop(
        "run", "-q", "--backend", "scripted", "--max-iterations", "3",
        "--session-id", "s", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 3, first.stdout + first.stderr
    again = _loop("run", "-q", "--json", "--resume", "s", "--max-iterations", "20", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    summary = json.loads(again.stdout)
    assert (summary["reason"], summary["iterations"]) == ("completed", 6)


def _solo_project(tmp_path: Path) -> tuple[Path, str]:
    """Ralph's hatless-baseline preset converted, on the solo stand-in agent; with what
    the conversion printed."""
    init = _loop("init", "--from-ralph", str(RALPH / "hatless-baseline.yml"), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    _run_on(tmp_path, str(RALPH / "solo_agent.py"))
    (tmp_path / "PROMPT.md").write_text("Implement a fibonacci function.\n", encoding="utf-8")
    return tmp_path, init.stdout


def test_a_ralph_configuration_without_hats_runs_in_solo_mode(tmp_path: Path) -> None:
    """Ralph's solo mode: one `ralph` hat, the fallback, that plans tasks, does one a
    turn and runs again on `ralph.next`, until it publishes the completion event."""
    root, printed = _solo_project(tmp_path)
    assert printed.count("claude's permissions: Ralph runs Claude Code with") == 1
    config = load_config(root / "loop.toml", root=root)
    assert list(config.hats) == ["ralph"] and config.loop.fallback_hat == "ralph"
    hat = config.hats["ralph"]
    assert hat.triggers == ["task.start", "ralph.next"]
    assert hat.default_publishes == "ralph.next"
    assert "createTask" in hat.instructions
    assert '"$LOOP_PYTHON" -m loop task list' in hat.instructions
    run = _loop("run", "-q", "--json", "--session-id", "solo", cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert (summary["reason"], summary["iterations"]) == ("completed", 3)
    work = (root / "work.txt").read_text(encoding="utf-8").splitlines()
    assert work == ["write the function", "write its tests"]  # one task a turn
    prompts = sorted((root / "prompts").iterdir())
    assert all("Implement a fibonacci function." in p.read_text() for p in prompts)
    assert "Publish `ralph.next`" in prompts[0].read_text(encoding="utf-8")


def test_a_silent_solo_ralph_runs_again_and_three_silent_turns_are_a_stale_loop(
    tmp_path: Path,
) -> None:
    """A turn that publishes nothing runs the hat again (its default event), and three
    such turns in a row stop the run as a stale loop (exit 3)."""
    root, _ = _solo_project(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "loop", "run", "-q", "--json"],
        cwd=root,
        env={**ENV, "SOLO_SILENT": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 3, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert (summary["reason"], summary["iterations"]) == ("stale_loop", 3)


COORDINATING_AGENT = """\
import os, subprocess, sys
prompt = sys.stdin.read()
if os.environ["LOOP_HAT"] == "builder":
    topic = "build.done"
else:
    open("coordinator.txt", "a").write(prompt)
    topic = "LOOP_COMPLETE" if "`build.done` from builder" in prompt else "build.task"
subprocess.run([os.environ["LOOP_PYTHON"], "-m", "loop", "emit", topic, "x"], check=True)
"""


def test_hats_that_count_on_ralph_get_ralph_the_coordinator(tmp_path: Path) -> None:
    """Hats that leave the starting event, or what they publish, to Ralph (as Ralph's
    minimal builder and kiro presets do) get a `ralph` coordinator, the loop's fallback,
    that hands the work to them and completes the loop."""
    data = {
        "cli": {"backend": "claude"},
        "hats": {
            "builder": {
                "name": "Builder",
                "description": "Implements code",
                "triggers": ["build.task"],
                "publishes": ["build.done", "build.blocked"],
            }
        },
    }
    out = convert_ralph(data, source="ralph.yml")
    ralph = tomllib.loads(out.files[Path("hats/ralph.toml")])["hats"]["ralph"]
    assert ralph["triggers"] == ["task.start", "build.done", "build.blocked"]
    assert ralph["publishes"] == ["build.task", "LOOP_COMPLETE"]
    assert "- `builder` (Implements code): triggered by `build.task`" in ralph["instructions"]
    for path, text in out.files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    (tmp_path / "agent.py").write_text(COORDINATING_AGENT, encoding="utf-8")
    _run_on(tmp_path, str(tmp_path / "agent.py"))
    (tmp_path / "PROMPT.md").write_text("Build it.\n", encoding="utf-8")
    run = _loop("run", "-q", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert (summary["reason"], summary["iterations"]) == ("completed", 3)
    assert summary["activations"] == {"ralph": 2, "builder": 1}
    assert "You are Ralph, the coordinator." in (tmp_path / "coordinator.txt").read_text()


def test_a_hat_named_ralph_keeps_its_name_and_the_coordinator_is_noted() -> None:
    """Ralph's own hat is not added over a hat of that name: the conversion says so."""
    data = {"hats": {"ralph": {"triggers": ["build.task"], "publishes": ["build.done"]}}}
    out = convert_ralph(data, source="ralph.yml")
    assert sorted(str(p) for p in out.files) == ["hats/ralph.toml", "loop.toml"]
    assert tomllib.loads(out.files[Path("hats/ralph.toml")])["hats"]["ralph"]["triggers"] == [
        "build.task"
    ]
    assert (
        "Ralph, the coordinator (task.start, build.done): not added, a hat is named 'ralph'"
        in out.notes
    )
