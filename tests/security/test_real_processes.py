"""A sample of the corpus through real processes: ``python -m loop`` and ``loop mcp``.

The in-process corpus runs the same entry points; these cases show that a real command
line (argv bytes, stdout, stderr, exit status) and a real MCP stdio server behave the
same way: one error line or one structured error, nothing outside touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.security.harness import SECRET, Project, new_project
from tests.security.test_links import START, themes

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("LOOP_", "HATLOOP_", "FILE_"))}
THEME_START = ["theme", "start", "--theme-name", "t", "--reason", "r"]


def _plant_themebox(p: Project) -> None:
    themes(p)
    p.plant(".loop/works/themebox", "dir")


def _plant_lock(p: Project) -> None:
    p.plant(".loop/tasks.json.lock", "missing")


def _bad_toml(p: Project) -> None:
    (p.root / "loop.toml").write_bytes(b"[loop]\nprompt = '\xff'\n")


CASES: list[tuple[str, Any, list[str]]] = [
    ("long part", themes, [*THEME_START, "--theme-directory-part", "x" * 300]),
    ("session id with a newline", None, ["run", "--session-id", "n1\n", "-q"]),
    ("lock linked outside", _plant_lock, ["task", "create", "t"]),
    ("themebox linked outside", _plant_themebox, ["theme", "preview"]),
    ("long directory", None, ["experience", "validate", "x" * 300]),
    ("deep emit", None, ["emit", "t.x", "[" * 50_000, "--json"]),
    ("loop.toml not UTF-8", _bad_toml, ["task", "list"]),
    ("record cap 0", None, ["run", "--record-session", "r.jsonl", "--record-max-bytes", "0"]),
]


@pytest.mark.parametrize(("prepare", "argv"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_real_command_line(prepare: Any, argv: list[str], tmp_path: Path) -> None:
    """Exit 2, exactly one ``error:`` line on stderr, no traceback, nothing outside."""
    project = new_project(tmp_path)
    if prepare is not None:
        prepare(project)
    env = {**ENV, "LOOP_EVENTS_FILE": str(project.root / "events.jsonl")}
    proc = subprocess.run(
        [sys.executable, "-m", "loop", *argv],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([x for x in proc.stderr.splitlines() if x.startswith("error:")]) == 1, proc.stderr
    project.check_outside(proc.stdout, proc.stderr)
    assert not (project.works / "stats" / "start_theme.intent.json").exists()


async def test_a_real_mcp_server(tmp_path: Path) -> None:
    """Over stdio: hostile arguments and a planted link are structured tool errors."""
    project = new_project(tmp_path)
    _plant_themebox(project)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "loop", "mcp"], env=ENV, cwd=project.root
    )
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("start_theme", {**START, "themeDirectoryPart": "x" * 300}, "invalid_path"),
        ("start_theme", {**START, "activityContent": "[" * 50_000}, "invalid_input"),
        ("preview_next_theme", {}, "invalid_path"),
        ("get_export_status", {"session_id": "s1\n"}, "invalid_session_id"),
        ("validate_experience", {"directory_path": "x" * 300}, "invalid_path"),
        ("end_theme", {**START, "themeStartId": "٢٠٢٥٠٨٠١١٢٠٠٠٠"}, "invalid_input"),
    ]
    async with Client(server) as client:
        for name, args, code in calls:
            result = await client.call_tool(name, args)
            assert result.is_error, name
            block = result.content[0]
            assert isinstance(block, TextContent)
            assert SECRET not in block.text
            assert json.loads(block.text)["error"]["code"] == code, block.text
    project.check_outside()
