"""A session's tool calls on replay: made again through the tools, compared, and shown.

Real loops whose agents call hatloop's tools (real subprocesses over the CLI, the SDK's
client over the session's MCP endpoint, hats' bus requests) are recorded, then replayed:
the replay reproduces the tool state each iteration saw and reports a changed call.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loop.backends.base import Backend
from loop.backends.command import CommandBackend
from loop.backends.python_hat import HatContext, PythonBackend
from loop.cli import main
from loop.config import LoadedConfig, McpSection
from loop.records import CallError, ToolCall
from loop.replay import replay_recording
from loop.runner import RunOptions, run_loop
from loop.session.calls import PathMap, compare_calls
from loop.session.recorder import Recorder
from loop.testing import make_config, scripted, tag
from tests.commands.helpers import loop
from tests.test_replay import edit, its

REPO = Path(__file__).resolve().parents[2]
TOOLS_AGENT = REPO / "recordings" / "agents" / "tools_agent.py"
RESEARCH_AGENT = Path(__file__).parent / "agents" / "research_agent.py"


async def record(
    config: LoadedConfig, backends: dict[str, Backend], folder: Path, name: str = "rec.jsonl"
) -> Path:
    """Run ``config`` with ``backends`` in ``folder``, recorded; return the recording."""
    path = folder / name
    options = RunOptions(workdir=folder, progress=False, handle_signals=False, backends=backends)
    summary = await run_loop(config, options, [Recorder(path)])
    assert summary.reason == "completed", summary
    return path


def calls_of(path: Path) -> list[list[dict[str, Any]]]:
    """The tool calls of each recorded iteration."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r["tool_calls"] for r in its(records)]


# -- the tools agent: task, theme and experience tools over the CLI and MCP ----------------


# the sync tests that use it ask for anyio_backend too: with it, anyio's plugin runs this
# async fixture whichever test asks first (under xdist, a sync one may)
@pytest.fixture(scope="module")
async def tools_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of the tools agent (recordings/agents/tools_agent.py), recorded."""
    folder = tmp_path_factory.mktemp("tools")
    config = make_config(
        {
            "planner": {"triggers": ["task.start"], "publishes": ["plan.ready"]},
            "worker": {
                "triggers": ["plan.ready", "work.next", "loop.completion_rejected"],
                "publishes": ["work.next", "LOOP_COMPLETE"],
            },
        },
        folder=folder,
        extensions=True,
        max_iterations=10,
    )
    # command hats: served when asked; with the tools served, themes are on (load_config
    # decides so for [mcp] serve = true): the loop's heartbeat is each iteration's first call
    config = replace(
        config,
        mcp=McpSection(serve=True),
        themes=config.themes.model_copy(update={"enabled": True}),
    )
    agent = CommandBackend([sys.executable, str(TOOLS_AGENT)], timeout_seconds=120)
    return await record(config, {"planner": agent, "worker": agent}, folder)


async def test_an_agents_cli_and_mcp_calls_are_recorded_and_replay_exactly(
    tools_recording: Path,
) -> None:
    """Every call of the three domains, over both ways an agent reaches the tools, and the
    loop's own heartbeat, is in its iteration's line; the replay makes them again and
    gets the same results (ids, times, paths mapped to the replay's folder)."""
    calls = calls_of(tools_recording)
    made = {(c["tool"], c["channel"]) for it in calls for c in it}
    assert {
        ("createTask", "cli"),
        ("createTask", "mcp"),
        ("listTasks", "mcp"),
        ("startTask", "mcp"),
        ("completeTask", "cli"),
        ("get_theme_status", "cli"),
        ("preview_next_theme", "cli"),
        ("start_theme", "mcp"),
        ("export_experience_init", "mcp"),
        ("export_experience_conversations", "cli"),
        ("export_experience_finalize", "cli"),
        ("theme_heartbeat", "loop"),
    } <= made
    assert all(it[0]["tool"] == "theme_heartbeat" for it in calls)  # every iteration's first
    start_theme = next(c for it in calls for c in it if c["tool"] == "start_theme")
    assert start_theme["error"]["code"] == "theme_file_not_found"  # recorded as it failed
    result = await replay_recording(tools_recording)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == len(calls) == 4


def test_an_edited_tool_result_diverges_with_a_readable_diff(
    tools_recording: Path, capsys: pytest.CaptureFixture[str], anyio_backend: str
) -> None:
    """A recorded result the tools do not give again: the replay exits 4 and names the
    iteration, the call and the field, expected against actual."""

    def rename(records: list[dict[str, Any]]) -> None:
        created = its(records)[0]["tool_calls"][1]
        created["result"]["task"]["name"] = "Release 2.0"

    edited = edit(tools_recording, rename)
    code = main(["replay", str(edited)])
    out = capsys.readouterr().out
    assert code == 4
    assert (
        "  diverged at iteration 1: hat planner: tool call 2 of 7 differs (createTask via cli)\n"
        '    expected: createTask {"description": "ship it", "name": "Release 1.0"}\n'
        '              result.task.name: "Release 2.0"\n'
        '    actual  : createTask {"description": "ship it", "name": "Release 1.0"}\n'
        '              result.task.name: "Release 1.0"\n'
    ) in out


def test_show_lists_an_iterations_calls(
    tools_recording: Path, capsys: pytest.CaptureFixture[str], anyio_backend: str
) -> None:
    """`show --iteration N`: each call on a line, with its channel, input and outcome."""
    assert main(["show", str(tools_recording), "-i", "1"]) == 0
    out = capsys.readouterr().out
    assert "  tool calls  theme_heartbeat via loop {} → ok\n" in out
    assert (
        '              createTask via cli {"description": "ship it", "name": "Release 1.0"} → ok\n'
        in out
    )
    assert "→ error theme_file_not_found: stage 1/5 (target) failed" in out


# -- the research loop of the issue: tasks over the CLI, completion gated on them ---------


async def test_a_research_loop_gated_on_its_tasks_replays(tmp_path: Path) -> None:
    """The agent plans with `python -m loop task ...` and claims completion early at
    iteration 4: the gate refused it when recorded, and refuses it on replay too (the
    task store is the recorded one), so the replay does not diverge."""
    config = make_config(
        {
            "researcher": {
                "triggers": ["task.start", "research.step", "loop.completion_rejected"],
                "publishes": ["research.step", "RESEARCH_COMPLETE"],
            }
        },
        folder=tmp_path,
        extensions=True,
        completion_event="RESEARCH_COMPLETE",
        max_iterations=8,
    )
    agent = CommandBackend([sys.executable, str(RESEARCH_AGENT)], timeout_seconds=60)
    path = await record(config, {"researcher": agent}, tmp_path)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    iterations = its(records)
    assert len(iterations) == 5
    assert not iterations[3]["completed"]
    assert "RESEARCH_COMPLETE refused: 2 task(s) still open" in iterations[3]["notes"][0]
    agent_calls = [c for c in iterations[0]["tool_calls"] if c["channel"] == "cli"]
    assert [c["tool"] for c in agent_calls] == ["createTask"] * 4
    result = await replay_recording(path)
    assert result.ok, result.divergence and result.divergence.render()
    assert (result.actual_iterations, result.actual_reason) == (5, "completed")

    def forget_the_agents_calls(records: list[dict[str, Any]]) -> None:  # as it once was
        for it in its(records):
            it["tool_calls"] = [c for c in it["tool_calls"] if c["channel"] != "cli"]

    # without them the task store stays empty and the early claim completes the loop
    result = await replay_recording(edit(path, forget_the_agents_calls))
    assert result.divergence is not None
    assert (result.divergence.iteration, result.divergence.what) == (
        5,
        "the replayed loop ended early",
    )
    assert result.divergence.actual == ["loop terminated: completed"]


# -- a hat's bus request with a minted id --------------------------------------------------


def completer(ctx: HatContext) -> str:
    """Completes the task whose creation triggered it, by its id."""
    created = next(e.payload for e in ctx.triggers if e.topic == "task.created")
    ctx.emit("task.start", {"id": created["task"]["id"]})
    ctx.emit("task.complete", {"id": created["task"]["id"], "resolution": "done"})
    ctx.emit("work.done", created["task"]["id"])
    return "completed it"


async def test_a_recorded_task_complete_by_id_replays_as_the_same_reply(tmp_path: Path) -> None:
    """A task created by a hat's bus request gets the same id on replay, so a recorded
    ``task.complete {"id": ...}`` is answered ``task.completed``, as recorded (not
    ``task.error``), and the replay asks for no iteration past the recording's end."""
    config = make_config(
        {
            "planner": {"triggers": ["task.start"], "publishes": ["task.create"]},
            "worker": {"triggers": ["task.created"], "publishes": ["work.done"]},
            "closer": {"triggers": ["work.done"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
        extensions=True,
        max_iterations=6,
    )
    backends: dict[str, Backend] = {
        "planner": scripted(tag("task.create", {"name": "write it"})),
        "worker": PythonBackend(f"{__name__}:completer"),
        "closer": scripted(tag("LOOP_COMPLETE", "all done")),
    }
    path = await record(config, backends, tmp_path)
    worker = its([json.loads(x) for x in path.read_text().splitlines()])[1]
    # themes unused (no heartbeat): the worker's two requests are its only calls
    replies = [(c["tool"], c["channel"], c["error"]) for c in worker["tool_calls"]]
    assert replies == [("startTask", "bus", None), ("completeTask", "bus", None)]
    result = await replay_recording(path)
    assert result.ok, result.divergence and result.divergence.render()
    assert result.actual_iterations == 3


# -- commands that are not generated from a tool: theme heartbeat, export -----------------

COMMAND_HAT = """\
[loop]
prompt = "go"

[backend]
type = "command"
command = ["sh", "agent.sh"]

"""


def _recorded_and_replayed(folder: Path, toml: str, agent: str) -> list[list[dict[str, Any]]]:
    """Run the command hat's ``agent`` (sh) recorded with the CLI, replay the recording
    with the CLI; return the recorded calls of each iteration."""
    (folder / "loop.toml").write_text(COMMAND_HAT + toml, encoding="utf-8")
    (folder / "agent.sh").write_text(agent, encoding="utf-8")
    ran = loop("run", "-q", "--record-session", "r.jsonl", cwd=folder)
    assert ran.returncode == 0, ran.stderr
    replayed = loop("replay", "r.jsonl", cwd=folder)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    return calls_of(folder / "r.jsonl")


def test_an_agents_theme_heartbeat_is_a_call_of_its_iteration_and_replays(
    tmp_path: Path,
) -> None:
    """`theme heartbeat` run by an agent is journaled like its other commands (it is the
    heartbeat tool, over the CLI), so the replay makes it again and the theme the agent
    starts next gets the same start ID. Before, the call went unrecorded: the replayed
    start took the loop's own heartbeat ID, a second earlier, and diverged."""
    toml = (
        '[themes]\nenabled = true\n\n[hats.w]\ntriggers = ["task.start"]\n'
        'publishes = ["LOOP_COMPLETE"]\n'
    )
    agent = (
        '"$LOOP_PYTHON" -m loop theme heartbeat >/dev/null\n'
        '"$LOOP_PYTHON" -m loop theme start --theme-name S --theme-directory-part s '
        "--reason r >/dev/null\n"
        "echo '<event topic=\"LOOP_COMPLETE\">done</event>'\n"
    )
    [calls] = _recorded_and_replayed(tmp_path, toml, agent)
    assert [(c["tool"], c["channel"], c["input"]) for c in calls] == [
        ("theme_heartbeat", "loop", {}),
        ("theme_heartbeat", "cli", {"interrupts": False}),
        ("start_theme", "cli", {"reason": "r", "themeDirectoryPart": "s", "themeName": "S"}),
    ]
    loops, agents, started = (c["result"] for c in calls)
    assert agents["heartbeatId"] > loops["heartbeatId"]
    assert started["themeStartId"] == agents["heartbeatId"]


def test_an_agents_export_is_the_tool_calls_it_makes_and_replays(tmp_path: Path) -> None:
    """`export SESSION` run by an agent is the experience tool calls it makes, each one
    journaled as a call of the iteration; the replay makes them again, so the experience
    the export wrote is there when the next iteration lists the experiences. Before, the
    export went unrecorded and the replayed list found none."""
    toml = (
        "[experience]\nenabled = true\n\n[hats.w]\n"
        'triggers = ["task.start", "step"]\npublishes = ["step", "LOOP_COMPLETE"]\n'
    )
    agent = """\
case "$LOOP_ITERATION" in
1) "$LOOP_PYTHON" -m loop emit step one ;;
2) "$LOOP_PYTHON" -m loop export "$LOOP_SESSION_ID" --session-id myexp >/dev/null
   "$LOOP_PYTHON" -m loop emit step two ;;
*) "$LOOP_PYTHON" -m loop experience list >/dev/null
   "$LOOP_PYTHON" -m loop emit LOOP_COMPLETE done ;;
esac
"""
    first, export, listing = _recorded_and_replayed(tmp_path, toml, agent)
    assert first == []
    assert [(c["tool"], c["channel"]) for c in export] == [
        ("get_export_status", "cli"),
        ("export_experience_init", "cli"),
        ("export_experience_conversations", "cli"),
        ("export_experience_thoughts", "cli"),
        ("export_experience_finalize", "cli"),
    ]
    assert all(c["error"] is None and c["input"]["session_id"] == "myexp" for c in export)
    [listed] = listing
    assert listed["tool"] == "list_experiences"
    directories = [s["directory"] for s in listed["result"]["directory_summaries"]]
    assert [Path(d).name for d in directories] == ["experience_myexp"]


# -- pure parts ---------------------------------------------------------------------------


def _call(**fields: Any) -> ToolCall:
    return ToolCall(**{"tool": "createTask", "channel": "cli", "input": {}, "ts": 0.0, **fields})


def test_paths_of_the_recorded_run_are_mapped_longest_first() -> None:
    """Inside any text of a call (input, result, error), the deepest location wins."""
    paths = PathMap.of(
        {
            "root": (Path("/home/u/proj"), Path("/tmp/r")),
            "experiences": (Path("/home/u/proj/.loop/exp"), Path("/tmp/r/x")),
        }
    )
    call = _call(
        input={"directory_path": "/home/u/proj/.loop/exp/experience_1"},
        result={"files": ["/home/u/proj/a.md", 3]},
        error=CallError(code="c", message="see /home/u/proj/b", details={"f": "/home/u/proj"}),
    )
    mapped = paths.call(call)
    assert mapped.input == {"directory_path": "/tmp/r/x/experience_1"}
    assert mapped.result == {"files": ["/tmp/r/a.md", 3]}
    assert mapped.error is not None
    assert (mapped.error.message, mapped.error.details) == ("see /tmp/r/b", {"f": "/tmp/r"})


def test_calls_that_agree_are_no_divergence() -> None:
    """The same tool, channel, input and outcome (times aside) agree."""
    assert compare_calls([_call(result={"a": 1})], [_call(result={"a": 1}, ts=5.0)]) is None


def test_a_different_call_is_shown_whole() -> None:
    """Another tool, channel or input: each call on one line."""
    what, want, got = compare_calls(
        [_call(input={"name": "a"}, result={})], [_call(channel="mcp", input={"name": "a"})]
    ) or ("", [], [])
    assert what == "tool call 1 of 1 differs (createTask via cli)"
    assert want == ['createTask via cli {"name": "a"} -> ok']
    assert got == ['createTask via mcp {"name": "a"} -> ok']


def test_an_error_instead_of_a_result_names_both() -> None:
    """The outcome's differing fields, an absent one said so."""
    _, want, got = compare_calls(
        [_call(result={"task": {"id": "1"}})],
        [_call(error=CallError(code="task_not_found", message="no"))],
    ) or ("", [], [])
    assert want[1:] == ["error: (absent)", 'result: {"task": {"id": "1"}}']
    assert got[1:] == ['error: {"code": "task_not_found", "message": "no"}', "result: (absent)"]


def test_missing_or_extra_calls_are_listed() -> None:
    """A different number of calls: both lists, one line per call."""
    what, want, got = compare_calls([_call(), _call(tool="getTask")], [_call()]) or ("", [], [])
    assert what == "tool calls differ: 2 recorded, 1 made"
    assert len(want) == 2 and len(got) == 1
