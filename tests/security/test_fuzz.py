"""Property tests: the domain readers and the JSON loader on arbitrary content.

Whatever bytes a state file holds (written by hand, by an agent, or cut short), reading
it is a value or one of hatloop's own errors, never another exception; a refused
operation leaves every file as it was; nothing outside the project changes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from loop import _json
from loop.errors import LoopError, StoreError, ToolError
from loop.tasks.store import FileTaskStore
from loop.themes import ThemeService, Workspace
from loop.themes.lifecycle import StartPlan
from loop.tools.registry import call_tool
from tests.security.harness import HB1, Project, new_project, snapshot
from tests.security.test_links import START, exported, themes

FUZZ = settings(
    max_examples=150,
    deadline=None,  # a shared, busy machine: no timing is asserted
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
# text made of JSON's structural characters: unbalanced, deep, inside and outside strings
STRUCTURE = st.lists(
    st.sampled_from(["[", "]", "{", "}", '"', "\\", ":", ",", "1", "a", " ", "\n", '"k":']),
    max_size=3000,
).map("".join)
DEEP = st.tuples(st.integers(0, 20_000), st.sampled_from(["[", '{"a":', "[1,"])).map(
    lambda t: t[1] * t[0]
)
DOCUMENTS = st.one_of(
    st.binary(max_size=500),
    st.text(max_size=500),
    STRUCTURE,
    DEEP,
    JSON_VALUES.map(json.dumps),
)


@contextmanager
def project() -> Iterator[Project]:
    """A fresh project per example (pytest's tmp_path is one per test)."""
    with tempfile.TemporaryDirectory() as folder:
        yield new_project(Path(folder))


# --- the JSON loader ----------------------------------------------------------------------


@FUZZ
@given(DOCUMENTS, st.sampled_from([None, 1, 100, 200]))
def test_loads_returns_a_value_or_a_value_error(data: str | bytes, limit: int | None) -> None:
    """Never RecursionError, never anything but a ValueError; within the limit when given."""
    try:
        value = _json.loads(data, max_depth=limit)
    except ValueError as exc:
        assert "\n" not in _json.error_text(exc)
        return
    if limit is not None:
        assert not _json.too_deep(value, limit)


# --- the tasks file -----------------------------------------------------------------------

TASK = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "c"]),
        "name": st.text(max_size=5),
        "status": st.sampled_from(["todo", "in_progress", "done", "other"]),
        "order": st.integers(-2, 3) | st.text(max_size=2),
        "createdAt": st.just("2025-01-01T00:00:00Z"),
        "updatedAt": st.just("2025-01-01T00:00:00Z"),
    },
    optional={"parent_id": st.sampled_from(["a", "b", "c", "", None]), "x": JSON_VALUES},
)
TASK_FILES = st.one_of(
    DOCUMENTS.map(lambda d: d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass")),
    st.lists(TASK, max_size=4).map(lambda ts: json.dumps(ts, indent=2).encode()),
)


@FUZZ
@given(TASK_FILES)
def test_a_tasks_file_reads_as_tasks_or_a_store_error(raw: bytes) -> None:
    """Reading is tasks or a StoreError naming the file; a refused change writes nothing."""
    with project() as p:
        path = p.root / ".loop" / "tasks.json"
        path.parent.mkdir()
        path.write_bytes(raw)
        store = FileTaskStore(path, root=p.root)
        try:
            store.read()
        except StoreError as exc:
            assert "tasks.json" in exc.message
        try:
            call_tool(p.ctx, "createTask", {"name": "new"})
        except ToolError as exc:
            assert exc.code != "internal_error"
            assert path.read_bytes() == raw  # nothing lost, nothing half-written
        else:
            assert any(t.name == "new" for t in store.read())
        assert {f.name for f in path.parent.iterdir()} <= {
            ".tasks.json.tmp",
            "tasks.json",
            "tasks.json.lock",
        }
        p.check_outside()


# --- the start intent ---------------------------------------------------------------------

NAMES = st.sampled_from(
    ["x", "..", "", "a/b", "themebox", "artifacts", "x" * 300, "n\n", HB1, "stats"]
)
REL_PATHS = st.one_of(
    NAMES,
    st.sampled_from(
        [
            f"artifacts/theme_histories/{HB1}_start_x.md",
            f"artifacts/theme_histories/.{HB1}_start_x.md.tmp",
            f"artifacts/{HB1}_x",
            f"artifacts/{HB1}_x/histories",
            "artifacts",
            "artifacts/theme_histories",
            "themebox/001_theme.md",
            "../outside",
            "/etc",
            "stats/start_theme.intent.json",
        ]
    ),
)
# what an interrupted start at HB1 of part x, consuming themebox/001_theme.md, wrote
VALID_PLAN: dict[str, Any] = {
    "heartbeatId": HB1,
    "historyFile": f"artifacts/theme_histories/{HB1}_start_x.md",
    "historyTemp": f"artifacts/theme_histories/.{HB1}_start_x.md.tmp",
    "themeDirectory": f"artifacts/{HB1}_x",
    "createDirs": [f"artifacts/{HB1}_x", f"artifacts/{HB1}_x/histories"],
    "target": "001_theme.md",
    "processed": "processed.001_theme.md",
}
# valid plans, and plans with some fields replaced by hostile or foreign values
PLANS = st.fixed_dictionaries(
    {
        key: st.just(value) | (st.lists(REL_PATHS, max_size=4) if key == "createDirs" else NAMES)
        for key, value in VALID_PLAN.items()
    }
).map(json.dumps)
INTENTS = st.one_of(
    st.just(json.dumps(VALID_PLAN)),
    PLANS,
    DOCUMENTS.map(lambda d: d if isinstance(d, str) else d.decode("latin-1")),
    st.fixed_dictionaries(
        {
            "heartbeatId": st.sampled_from([HB1, "٢٠٢٥٠٨٠١١٢٠٠٠٠", HB1 + "\n", "x"]),
            "historyFile": REL_PATHS,
            "historyTemp": REL_PATHS,
            "themeDirectory": REL_PATHS,
            "createDirs": st.lists(REL_PATHS, max_size=4),
        },
        optional={"target": NAMES, "processed": NAMES, "version": st.integers()},
    ).map(json.dumps),
)


def _plan_paths(text: str) -> set[str] | None:
    """What a rollback of this intent may remove or rename (None: it is not a plan)."""
    try:
        plan = StartPlan.model_validate(json.loads(text))
    except (ValueError, ValidationError, LoopError, RecursionError):
        return None
    own = {plan.historyFile, plan.historyTemp, *plan.createDirs, "stats/start_theme.intent.json"}
    if plan.target:
        own |= {f"themebox/{plan.target}", f"themebox/{plan.processed}"}
    return own


def _contents(folder: Path) -> dict[str, bytes | None]:
    return {rel: data for rel, (_, data) in snapshot(folder).items() if rel != "."}


@settings(FUZZ, max_examples=100)
@given(INTENTS)
def test_a_leftover_intent_is_undone_or_refused_never_followed(text: str) -> None:
    """Repair removes only what that start could have created, or refuses naming the
    file; nothing else in the workspace and nothing outside changes."""
    with project() as p:
        themes(p)
        p.tool("start_theme", **START)
        intent = p.works / "stats" / "start_theme.intent.json"
        intent.write_text(text, encoding="utf-8", errors="surrogatepass")
        before = _contents(p.works)
        try:
            ThemeService(p.works, trusted_root=p.root).repair()
        except LoopError as exc:
            assert "start_theme.intent.json" in exc.message or isinstance(exc, ToolError)
            assert _contents(p.works) == before  # a refused intent changes nothing
        else:
            allowed = _plan_paths(text)
            assert allowed is not None, "an invalid intent was acted on"
            after = _contents(p.works)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            assert changed <= allowed, changed - allowed
        p.check_outside()


# --- the experience files -----------------------------------------------------------------

EXPERIENCE_FILES = st.sampled_from(
    ["summary.json", "manifest.json", "conversations_001.json", "thoughts.json"]
)
OPERATIONS: list[tuple[str, dict[str, Any]]] = [
    ("get_export_status", {"session_id": "s1"}),
    ("validate_experience", {"directory_path": ".loop/experiences/experience_s1"}),
    ("list_experiences", {}),
    (
        "export_experience_conversations",
        {
            "session_id": "s1",
            "batch_number": 2,
            "conversations_batch": [{"user_input": "u", "ai_response": "a", "reasoning": "r"}],
        },
    ),
    ("export_experience_finalize", {"session_id": "s1"}),
]


@settings(FUZZ, max_examples=100)
@given(EXPERIENCE_FILES, TASK_FILES, st.sampled_from(OPERATIONS))
def test_experience_files_of_any_content_never_crash_or_get_lost(
    name: str, raw: bytes, operation: tuple[str, dict[str, Any]]
) -> None:
    """Any content in an experience file: a result or a tool error; a refused call
    leaves every file as it was, a finalize never loses a conversation batch."""
    with project() as p:
        exported(p)
        folder = p.root / ".loop" / "experiences" / "experience_s1"
        (folder / name).write_bytes(raw)
        before = {f.name: f.read_bytes() for f in folder.iterdir() if not f.name.startswith(".")}
        tool, args = operation
        try:
            call_tool(p.ctx, tool, args)
        except ToolError as exc:
            assert exc.code != "internal_error"
            after = {f.name: f.read_bytes() for f in folder.iterdir() if not f.name.startswith(".")}
            assert after == before
        else:
            for batch in ("conversations_001.json", "thoughts.json"):
                if batch in before:
                    assert (folder / batch).read_bytes() == before[batch]
        p.check_outside()


# --- the heartbeat file -------------------------------------------------------------------


@FUZZ
@given(DOCUMENTS)
def test_any_heartbeat_file_is_read_or_refused(content: str | bytes) -> None:
    """Status never crashes; the next heartbeat replaces whatever the file held with an ID."""
    with project() as p:
        themes(p)
        path = p.works / "stats" / "current_heartbeat_id.txt"
        raw = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
        path.write_bytes(raw)
        ws = Workspace(p.works, p.root)
        try:
            call_tool(p.ctx, "get_theme_status", {})
        except ToolError as exc:
            assert exc.code == "store_error" and "current_heartbeat_id.txt" in exc.message
        new_id = ThemeService(p.works, trusted_root=p.root).heartbeat()
        assert path.read_text() == new_id + "\n" and len(new_id) == 14
        assert ws.kind(path) == "file"
        p.check_outside()
