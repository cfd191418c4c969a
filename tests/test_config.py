"""Config loading: strict keys with file and key in every error, overrides, presets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loop.config import load_config, preset_names, tool_settings_from_project
from loop.errors import ConfigError, UsageError

HAT = '[hats.a]\ntriggers = ["task.start"]\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_packaged_default_is_used_where_there_is_no_loop_toml(tmp_path: Path) -> None:
    """No config in the folder: the default preset (planner → builder → reviewer)."""
    cfg = load_config(root=tmp_path)
    assert list(cfg.hats) == ["builder", "planner", "reviewer"]
    assert "default" in preset_names() and "claude" in preset_names()


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ('[loop]\nprompt = "x"\nmax_iteration = 3\n' + HAT, "loop.max_iteration", "unknown key"),
        (
            '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\ncolour = 1\n',
            "hats.a.colour",
            "unknown key",
        ),
        (
            '[loop]\nprompt = "x"\n[hats.a]\npublishes = ["x.y"]\n',
            "hats.a.triggers",
            "missing required key",
        ),
        (
            '[loop]\nprompt = "x"\n[backend]\ntype = "telepathy"\n' + HAT,
            "backend",
            "unknown backend type 'telepathy'",
        ),
        (
            '[loop]\nprompt = "x"\nmax_iterations = 0\n' + HAT,
            "loop.max_iterations",
            "expected a number at least 1, got 0",
        ),
        # inf was journaled as null: the recording's configuration digest then differed
        (
            '[loop]\nprompt = "x"\nmax_runtime_seconds = inf\n' + HAT,
            "loop.max_runtime_seconds",
            "expected a finite number, got inf",
        ),
        (
            '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start"]\nconcurrency = 2\n'
            'aggregate = { mode = "first", timeout_seconds = inf }\n',
            "hats.a.aggregate.timeout_seconds",
            "expected a finite number, got inf",
        ),
        (
            '[loop]\nprompt = "x"\n[backend]\ntype = "command"\ncommand = ["true"]\n'
            "timeout_seconds = inf\n" + HAT,
            "backend.timeout_seconds",
            "expected a finite number, got inf",
        ),
    ],
)
def test_config_errors_name_the_file_and_the_key(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    """Every validation error says which file and which key."""
    path = write(tmp_path / "loop.toml", text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and key in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("trigger", ["task.start", "*"])
def test_a_trigger_claimed_by_two_hats_is_refused(tmp_path: Path, trigger: str) -> None:
    """Ambiguous routing is a config error naming both hats; the bare `*` too (before,
    two catch-all hats were taken, and the second never got what `*` routes)."""
    path = write(
        tmp_path / "loop.toml",
        '[loop]\nprompt = "x"\n[hats.a]\ntriggers = ["task.start", "*"]\n'
        f'[hats.b]\ntriggers = ["{trigger}"]\n',
    )
    with pytest.raises(
        ConfigError, match=re.escape(f"trigger {trigger!r} is claimed by hats 'a' and 'b'")
    ):
        load_config(path)


def test_an_undefined_starting_event_is_refused(tmp_path: Path) -> None:
    """No hat triggered by the starting event: error naming loop.starting_event."""
    path = write(tmp_path / "loop.toml", '[loop]\nprompt = "x"\nstarting_event = "go.now"\n' + HAT)
    with pytest.raises(ConfigError, match=r"loop\.starting_event.*'go\.now'"):
        load_config(path)


def test_invalid_toml_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    """Broken TOML and missing hat files name the file."""
    bad = write(tmp_path / "bad.toml", "[loop\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)
    missing = write(tmp_path / "m.toml", '[loop]\nprompt = "x"\nhats = ["nope.toml"]\n')
    with pytest.raises(ConfigError, match=r"hat file or folder not found: nope\.toml"):
        load_config(missing)


def test_a_byte_order_mark_is_accepted_in_every_toml_file(tmp_path: Path) -> None:
    """UTF-8 with a byte-order mark (as Windows editors save it): loop.toml and a hat file
    load for a run, and the tool commands read loop.toml too."""
    bom = "\ufeff".encode()
    (tmp_path / "hats").mkdir()
    (tmp_path / "hats/a.toml").write_bytes(bom + HAT.encode())
    path = tmp_path / "loop.toml"
    text = '[loop]\nprompt = "x"\nhats = ["hats"]\n[tasks]\nfile = "t.json"\n'
    path.write_bytes(bom + text.encode())
    cfg = load_config(path)
    assert list(cfg.hats) == ["a"] and cfg.prompt == "x"
    assert tool_settings_from_project(tmp_path)["tasks_file"] == str(tmp_path / "t.json")


def test_hat_files_and_folders_load_and_a_duplicate_hat_is_refused(tmp_path: Path) -> None:
    """[loop] hats takes files and folders; the same hat twice names both files."""
    write(tmp_path / "hats/one.toml", HAT)
    write(tmp_path / "hats/two.toml", '[hats.b]\ntriggers = ["b.x"]\n')
    path = write(tmp_path / "loop.toml", '[loop]\nprompt = "x"\nhats = ["hats"]\n')
    assert sorted(load_config(path).hats) == ["a", "b"]
    write(tmp_path / "hats/three.toml", HAT)
    with pytest.raises(ConfigError, match="hat 'a' is also defined in"):
        load_config(path)


@pytest.mark.parametrize(
    "listed", [["hats", "hats/one.toml"], ["hats", "hats"], ["hats", "./hats/"]]
)
def test_a_hat_file_listed_twice_is_loaded_once(tmp_path: Path, listed: list[str]) -> None:
    """A folder and a file in it, or one folder twice, in [loop] hats (or --hats): each
    file is loaded once (before, its hats were said to be also defined in itself)."""
    write(tmp_path / "hats/one.toml", HAT)
    write(tmp_path / "hats/two.toml", '[hats.b]\ntriggers = ["b.x"]\n')
    entries = ", ".join(f'"{e}"' for e in listed)
    path = write(tmp_path / "loop.toml", f'[loop]\nprompt = "x"\nhats = [{entries}]\n')
    assert list(load_config(path).hats) == ["a", "b"]
    flags = [tmp_path / e for e in listed]
    assert list(load_config(path, hats=flags).hats) == ["a", "b"]


def test_hat_files_may_hold_only_hats(tmp_path: Path) -> None:
    """A stray [loop] table in a hat file is an unknown key of that file."""
    hat_file = write(tmp_path / "h.toml", HAT + '[loop]\nprompt = "y"\n')
    path = write(tmp_path / "loop.toml", '[loop]\nprompt = "x"\nhats = ["h.toml"]\n')
    with pytest.raises(ConfigError, match=f"{hat_file}: loop: unknown key"):
        load_config(path)


def test_command_line_overrides_win_and_prompt_file_is_read(tmp_path: Path) -> None:
    """Flags override [loop]; prompt_file is read relative to the config."""
    write(tmp_path / "PLAN.md", "from the file")
    path = write(
        tmp_path / "loop.toml", '[loop]\nprompt_file = "PLAN.md"\nmax_iterations = 5\n' + HAT
    )
    cfg = load_config(path, overrides={"max_iterations": 9, "completion_event": "ALL_DONE"})
    assert cfg.prompt == "from the file"
    assert cfg.loop.max_iterations == 9 and cfg.loop.completion_event == "ALL_DONE"


def test_prompt_and_prompt_file_together_are_an_error(tmp_path: Path) -> None:
    """The two forms of the objective exclude each other: both set is refused, whether
    the file exists or not (one of them would be silently ignored)."""
    path = write(tmp_path / "loop.toml", '[loop]\nprompt = "x"\nprompt_file = "P.md"\n' + HAT)
    with pytest.raises(ConfigError, match="prompt and prompt_file exclude each other"):
        load_config(path, root=tmp_path)
    write(tmp_path / "P.md", "from the file")
    with pytest.raises(ConfigError, match="prompt and prompt_file exclude each other"):
        load_config(path, root=tmp_path, overrides={"prompt": "given"})


def test_a_missing_prompt_is_an_error_that_says_how_to_give_one(tmp_path: Path) -> None:
    """No prompt, no prompt_file, no PROMPT.md: error naming loop.prompt."""
    path = write(tmp_path / "loop.toml", HAT)
    with pytest.raises(ConfigError, match=r"loop\.prompt: no prompt"):
        load_config(path, root=tmp_path)


@pytest.mark.parametrize(
    ("loop", "files", "where"),
    [
        ('prompt = ""\n', {}, "loop.toml: loop.prompt"),
        ('prompt = "  \\n"\n', {"PROMPT.md": "not used"}, "loop.toml: loop.prompt"),
        ("", {"PROMPT.md": ""}, "PROMPT.md"),
        ("", {"PROMPT.md": "\n\n   \n"}, "PROMPT.md"),
        ('prompt_file = "PLAN.md"\n', {"PLAN.md": " "}, "PLAN.md"),
    ],
)
def test_an_objective_of_only_white_space_is_none(
    tmp_path: Path, loop: str, files: dict[str, str], where: str
) -> None:
    """An empty (or blank) prompt, PROMPT.md or prompt_file is refused, naming where the
    empty objective is; no other source is taken in its place."""
    for name, text in files.items():
        write(tmp_path / name, text)
    path = write(tmp_path / "loop.toml", "[loop]\n" + loop + HAT)
    with pytest.raises(ConfigError) as err:
        load_config(path, root=tmp_path)
    assert str(err.value) == f"{tmp_path / where}: empty objective"


def test_backend_override_sets_every_hat_and_the_digest_changes(tmp_path: Path) -> None:
    """--backend claude applies to each hat; the config digest reflects it."""
    path = write(tmp_path / "loop.toml", '[loop]\nprompt = "x"\n' + HAT)
    plain = load_config(path)
    forced = load_config(path, overrides={"backend": "claude"})
    assert forced.hat_backend("a").type == "claude"
    assert plain.digest() != forced.digest()
    with pytest.raises(ConfigError, match="need per-hat settings"):
        load_config(path, overrides={"backend": "command"})


@pytest.mark.parametrize(
    ("loop", "key", "message"),
    [
        ('cancellation_event = "LOOP_COMPLETE"', "loop.cancellation_event", "must differ"),
        ('cancellation_event = "bad topic"', "loop.cancellation_event", "not a valid topic"),
        ('required_events = ["LOOP_COMPLETE"]', "loop.required_events", "cannot be one of"),
        ('required_events = ["a..b"]', "loop.required_events", "not a valid topic"),
        ("max_cost_usd = 0", "loop.max_cost_usd", "greater than 0"),
        ("max_tokens = 0", "loop.max_tokens", "expected a number at least 1, got 0"),
    ],
)
def test_completion_rules_and_budgets_are_validated(
    tmp_path: Path, loop: str, key: str, message: str
) -> None:
    """A bad completion rule or budget is an error naming the key."""
    path = write(tmp_path / "loop.toml", f'[loop]\nprompt = "x"\n{loop}\n' + HAT)
    with pytest.raises(ConfigError) as err:
        load_config(path, root=tmp_path)
    assert err.value.key == key and message in err.value.message


@pytest.mark.parametrize(
    ("loop", "event", "key", "message"),
    [
        ("", "task.start", "hats.a.triggers", "a hat cannot be triggered by the completion event"),
        ('cancellation_event = "halt"', "halt", "loop.cancellation_event", "must differ"),
        ('required_events = ["tests.ok"]', "tests.ok", "loop.required_events", "cannot be one"),
    ],
)
def test_a_completion_event_from_the_flag_that_the_config_refuses_names_the_flag(
    tmp_path: Path, loop: str, event: str, key: str, message: str
) -> None:
    """``--completion-event`` is what is wrong, not loop.toml: the error names the flag;
    the same value in loop.toml names the key."""
    path = write(tmp_path / "loop.toml", f'[loop]\nprompt = "x"\n{loop}\n' + HAT)
    with pytest.raises(UsageError) as flag:
        load_config(path, root=tmp_path, overrides={"completion_event": event})
    assert flag.value.message.startswith(f"--completion-event {event}: ")
    assert message in flag.value.message
    write(path, f'[loop]\nprompt = "x"\ncompletion_event = "{event}"\n{loop}\n' + HAT)
    with pytest.raises(ConfigError) as config:
        load_config(path, root=tmp_path)
    assert config.value.key == key and message in config.value.message


def test_a_completion_event_flag_against_the_files_rules_names_the_flag(tmp_path: Path) -> None:
    """--completion-event equal to the file's cancellation event, or to one of its required
    events, is the flag's error, naming the file's key it conflicts with."""
    path = write(
        tmp_path / "loop.toml",
        '[loop]\nprompt = "x"\ncancellation_event = "stop.now"\nrequired_events = ["a.b"]\n' + HAT,
    )
    with pytest.raises(UsageError) as err:
        load_config(path, overrides={"completion_event": "stop.now"})
    assert str(err.value) == (
        "--completion-event stop.now: the cancellation event must differ from the completion and "
        f"starting events (loop.cancellation_event in {path})"
    )
    with pytest.raises(UsageError, match=r"^--completion-event a.b: the completion event cannot"):
        load_config(path, overrides={"completion_event": "a.b"})


def test_a_hat_triggered_by_the_cancellation_event_is_refused(tmp_path: Path) -> None:
    """The cancellation event ends the run: no hat can take it."""
    text = (
        '[loop]\nprompt = "x"\ncancellation_event = "loop.cancel"\n'
        '[hats.a]\ntriggers = ["task.start", "loop.cancel"]\n'
    )
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / "loop.toml", text), root=tmp_path)
    assert err.value.key == "hats.a.triggers"


WAVE = """[loop]
prompt = "x"
starting_event = "review.start"
max_parallel = 2
[hats.coordinator]
triggers = ["review.start"]
publishes = ["review.perspective"]
[hats.reviewer]
triggers = ["review.perspective"]
publishes = ["review.done"]
concurrency = 3
[hats.synthesizer]
triggers = ["review.done"]
aggregate = { mode = "quorum", count = 2, timeout_seconds = 30 }
"""


def test_parallel_hats_configure_the_schedule(tmp_path: Path) -> None:
    """concurrency, max_parallel and aggregate become the engine's schedule."""
    from loop.engine.schedule import Aggregate, HatSchedule, schedule_of

    cfg = load_config(write(tmp_path / "loop.toml", WAVE), root=tmp_path)
    sched = schedule_of(cfg)
    assert sched.max_parallel == 2 and sched.parallel
    assert sched.of("reviewer") == HatSchedule(concurrency=3)
    assert sched.of("synthesizer").aggregate == Aggregate("quorum", 2, 30.0)
    assert sched.of("coordinator") == HatSchedule()
    assert sched.producers == {"synthesizer": frozenset({"reviewer"})}  # its wave's hats
    (tmp_path / "none" / ".git").mkdir(parents=True)  # no loop.toml up to a repository's root
    default = load_config(root=tmp_path / "none")
    assert not schedule_of(default).parallel


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ("concurrency = 3", "concurrency = 0", "hats.reviewer.concurrency", "at least 1, got 0"),
        ("max_parallel = 2", "max_parallel = 0", "loop.max_parallel", "at least 1, got 0"),
        ("count = 2, ", "", "hats.synthesizer.aggregate", "needs a count"),
        ('"quorum"', '"first"', "hats.synthesizer.aggregate", 'count is for mode "quorum"'),
        ('"quorum"', '"most"', "hats.synthesizer.aggregate.mode", "wait_for_all"),
        ("concurrency = 3", 'group_by = "topic"', "hats.reviewer", "group_by is for"),
        (
            '["review.done"]\naggr',
            '["review.done"]\nconcurrency = 2\naggr',
            "hats.synthesizer",
            "once per wave",
        ),
        ('publishes = ["review.done"]', "", "hats.synthesizer.aggregate", "no other hat lists"),
    ],
)
def test_parallel_settings_are_validated(
    tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    """A bad concurrency, max_parallel or aggregate is an error naming the key."""
    assert old in WAVE
    path = write(tmp_path / "loop.toml", WAVE.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path, root=tmp_path)
    assert key in str(err.value) and message in str(err.value)
