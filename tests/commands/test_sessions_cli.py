"""``status`` and ``sessions`` as a user runs them: unknown ids, prefixes, corrupt journals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.commands.test_cli import loop


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two completed sessions (``demo-one``, ``demo-two``) and one corrupt journal."""
    root = tmp_path_factory.mktemp("sessions")
    for sid in ("demo-one", "demo-two"):
        res = loop("run", "-q", "--session-id", sid, cwd=root)
        assert res.returncode == 0, res.stderr
    bad = root / ".loop/sessions/broken"
    bad.mkdir()
    (bad / "journal.jsonl").write_text("garbage{\n{}\n", encoding="utf-8")
    return root


def test_status_of_an_unknown_session_is_a_one_line_error_with_exit_2(project: Path) -> None:
    """`status nope`: exit 2 and one line on stderr, with or without --json."""
    for extra in ((), ("--json",)):
        res = loop("status", "nope-at-all", *extra, cwd=project)
        assert res.returncode == 2, res
        assert res.stdout == ""
        assert res.stderr.splitlines() == ["error: unknown session 'nope-at-all' in .loop/sessions"]


def test_sessions_lists_the_others_and_flags_a_corrupt_journal(project: Path) -> None:
    """One corrupt journal: the others are listed, that one is `unreadable` with why."""
    res = loop("sessions", cwd=project)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["SESSION", "STATUS", "ITERATIONS", "ENDED", "BY", "LAST", "HAT"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows == {"demo-one": "completed", "demo-two": "completed", "broken": "unreadable"}
    assert "warning: session broken is unreadable: " in res.stderr
    assert "corrupt journal line" in res.stderr
    data = json.loads(loop("sessions", "--json", cwd=project).stdout)
    broken = next(d for d in data if d["session_id"] == "broken")
    assert broken["status"] == "unreadable" and "corrupt journal line" in broken["error"]


def test_a_unique_prefix_names_a_session_an_ambiguous_one_is_refused(project: Path) -> None:
    """Like git: a unique prefix is the session; a shared one lists the candidates; too
    short a prefix is not looked up."""
    st = json.loads(loop("status", "demo-t", "--json", cwd=project).stdout)
    assert st["session_id"] == "demo-two" and st["status"] == "completed"
    shared = loop("status", "demo", cwd=project)
    assert shared.returncode == 2
    assert shared.stderr.strip() == (
        "error: session id prefix 'demo' is ambiguous: demo-one, demo-two"
    )
    short = loop("status", "dem", cwd=project)
    assert short.returncode == 2
    assert "a prefix needs at least 4 characters" in short.stderr
    shown = loop("show", "demo-o", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "demo-one" in shown.stdout
