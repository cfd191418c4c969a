"""Malformed journal records: every reader says which file, which line and what is wrong.

A real session's journal is damaged one record at a time (a field missing or of the wrong
shape, an unknown kind, another format version); ``status``, ``run --resume``, ``show``
and ``export`` each end with exit 2 and one line naming ``journal.jsonl:LINE``, never a
traceback, and nothing on disk changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.cli import main
from loop.testing import make_config, run_hats, scripted, tag

Record = dict[str, Any]

# The session below journals: 1 session.start, 2 iteration.start, 3 iteration.end,
# 4 hat.exhausted (the second planner run is over its max_activations), 5 session.end.
SESSION = "damaged"


def _drop(key: str) -> Callable[[Record], Record]:
    return lambda r: {k: v for k, v in r.items() if k != key}


def _set(key: str, value: Any) -> Callable[[Record], Record]:
    return lambda r: {**r, key: value}


def _event_topic(field: str, value: Any) -> Callable[[Record], Record]:
    def change(r: Record) -> Record:
        events = [dict(e) for e in r[field]]
        events[0]["topic"] = value
        return {**r, field: events}

    return change


# (line, what the change does, the change, a word the message must have)
CASES: list[tuple[int, str, Callable[[Record], Record], str]] = [
    (3, "iteration.end without hat", _drop("hat"), "hat"),
    (3, "a text iteration", _set("iteration", "three"), "iteration"),
    (3, "a fractional iteration", _set("iteration", 1.5), "iteration"),
    (3, "a boolean iteration", _set("iteration", True), "iteration"),
    (3, "published is a number", _set("published", 5), "published"),
    (3, "elapsed is text", _set("elapsed", "soon"), "elapsed"),
    (3, "an integer topic", _event_topic("events", 5), "topic"),
    (3, "a status neither ok nor failed", _set("status", "maybe"), "status"),
    (3, "an unknown field", _set("colour", "blue"), "colour"),
    (3, "consumed holds text", _set("consumed", ["a"]), "consumed"),
    (1, "hats as a list", _set("hats", []), "hats"),
    (1, "another journal format", _set("schema_version", 99), "version 99"),
    (2, "iteration.start without triggers", _drop("triggers"), "triggers"),
    (4, "hat.exhausted without event", _drop("event"), "event"),
    (5, "session.end with a text count", _set("iterations", "2"), "iterations"),
    (2, "an unknown kind", _set("kind", "iteration.middle"), "iteration.middle"),
    (3, "not an object", lambda r: [r], "object"),  # type: ignore[list-item, return-value]
]


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The lines of a real session's journal, with every record kind but resume."""
    folder = tmp_path_factory.mktemp("corpus")
    cfg = make_config(
        {
            "planner": {
                "triggers": ["task.start", "plan.again"],
                "publishes": ["plan.again"],
                "max_activations": 1,
            }
        },
        folder=folder,
    )
    outputs = scripted(tag("plan.again", "once more"))
    summary, _ = anyio_run(run_hats(cfg, {"planner": outputs}, workdir=folder, session_id="s"))
    assert summary.reason == "no_pending_events"
    lines = (folder / ".loop/sessions/s/journal.jsonl").read_text(encoding="utf-8").splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds == [
        "session.start",
        "iteration.start",
        "iteration.end",
        "hat.exhausted",
        "session.end",
    ]
    return lines


def anyio_run(coro: Any) -> Any:
    import anyio

    async def run() -> Any:
        return await coro

    return anyio.run(run, backend="asyncio")


def _damage(root: Path, lines: list[str], line: int, change: Callable[[Record], Record]) -> Path:
    """A project in ``root`` whose session journal has record ``line`` changed."""
    damaged = list(lines)
    damaged[line - 1] = json.dumps(change(json.loads(lines[line - 1])))
    folder = root / ".loop/sessions" / SESSION
    folder.mkdir(parents=True)
    path = folder / "journal.jsonl"
    path.write_text("\n".join(damaged) + "\n", encoding="utf-8")
    (root / "loop.toml").write_text(
        '[loop]\nprompt = "p"\n[backend]\ntype = "scripted"\n'
        '[hats.planner]\ntriggers = ["task.start", "plan.again"]\n',
        encoding="utf-8",
    )
    return path


COMMANDS = {
    "status": ["status", SESSION],
    "run --resume": ["run", "-q", "--resume", SESSION],
    "show": ["show", SESSION],
    "export": ["export", SESSION],
}


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_malformed_record_is_one_line_naming_file_and_line(
    journal: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    command: str,
    case: tuple[int, str, Callable[[Record], Record], str],
) -> None:
    """Exit 2, one line on stderr with journal.jsonl:LINE and the field; the file intact."""
    line, what, change, word = case
    path = _damage(tmp_path, journal, line, change)
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    code = main(COMMANDS[command])
    err = capsys.readouterr().err
    assert code == 2, (what, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"journal.jsonl:{line}" in err or f"journal.jsonl: line {line}:" in err, err
    assert word in err, err
    assert path.read_bytes() == before


def test_a_real_process_prints_no_traceback(journal: list[str], tmp_path: Path) -> None:
    """Through python -m loop: exit 2 and one line for status, resume and export alike."""
    _damage(tmp_path, journal, 3, _set("elapsed", "soon"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_"))}
    for args in COMMANDS.values():
        proc = subprocess.run(
            [sys.executable, "-m", "loop", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1 and "journal.jsonl" in proc.stderr
