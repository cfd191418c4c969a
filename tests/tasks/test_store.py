"""The task stores: file (locked, atomic, never reads a bad file as empty) and memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loop import _fs
from loop.errors import PathError, StoreError, ToolError
from loop.tasks import operations
from loop.tasks.models import Task
from loop.tasks.store import FileTaskStore, MemoryTaskStore, dump_tasks, store_for
from loop.tools.base import ToolContext
from tests.tasks._book import T0, Book


def two_tasks() -> list[Task]:
    """A root and its subtask."""
    b = Book()
    r = b.add("root")
    b.add("child", r)
    return b.tasks


def test_missing_file_reads_empty_and_creates_nothing(tmp_path: Path) -> None:
    """A file that does not exist yet is an empty task list; reading creates nothing."""
    path = tmp_path / "sub" / "tasks.json"
    assert FileTaskStore(path).read() == []
    assert not path.parent.exists()


def test_change_writes_seed_field_names(tmp_path: Path) -> None:
    """The file is a JSON array of Task with the seed's names; unset fields are left out."""
    path = tmp_path / ".loop" / "tasks.json"
    store = FileTaskStore(path)
    tasks = two_tasks()
    store.change(lambda _old: (tasks, None))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, list)
    assert set(data[0]) == {
        "id",
        "name",
        "description",
        "status",
        "order",
        "createdAt",
        "updatedAt",
    }
    assert data[1]["parent_id"] == data[0]["id"]
    assert store.read() == tasks


def test_refused_change_writes_nothing(tmp_path: Path) -> None:
    """When the operation raises, the file keeps its bytes."""
    path = tmp_path / "tasks.json"
    store = FileTaskStore(path)
    store.change(lambda _old: (two_tasks(), None))
    before = path.read_bytes()

    def refuse(tasks: list[Task]) -> tuple[list[Task], None]:
        operations.delete(tasks, tasks[0].id)  # has a subtask: refused
        return tasks, None

    with pytest.raises(ToolError):
        store.change(refuse)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'[{"id": ', "invalid JSON"),
        (b'{"tasks": []}', "not a list of tasks"),
        (b'[{"id": "x"}]', "not a list of tasks"),
        (b"\xff\xfe", "invalid JSON"),
    ],
)
def test_bad_file_is_a_store_error_naming_it_and_left_unchanged(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    """Invalid JSON or a wrong schema is a StoreError naming the file; nothing is written."""
    path = tmp_path / "tasks.json"
    path.write_bytes(content)
    store = FileTaskStore(path)
    with pytest.raises(StoreError) as exc:
        store.read()
    assert str(path) in str(exc.value)
    assert fragment in str(exc.value)
    with pytest.raises(StoreError):
        store.change(lambda old: ([*old, *two_tasks()], None))
    assert path.read_bytes() == content


def test_bad_status_in_file_is_refused(tmp_path: Path) -> None:
    """A status outside the three values in the file is a schema error."""
    path = tmp_path / "tasks.json"
    data = json.loads(dump_tasks(two_tasks()))
    data[0]["status"] = "finished"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(StoreError, match="not a list of tasks"):
        FileTaskStore(path).read()


@pytest.mark.parametrize(
    ("key", "value"), [("order", "1"), ("order", 1.0), ("order", True), ("name", 5)]
)
def test_a_value_of_another_kind_in_the_file_is_refused(
    tmp_path: Path, key: str, value: object
) -> None:
    """Nothing in the file is converted: an order written as "1", 1.0 or true is a schema
    error naming the file, and the file is left as it is (not rewritten as 1)."""
    data = json.loads(dump_tasks(two_tasks()))
    data[0][key] = value
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a list of tasks") as exc:
        FileTaskStore(path).change(lambda old: (old, None))
    assert str(path) in str(exc.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("problem", ["duplicate", "dangling", "cycle"])
def test_broken_hierarchy_in_file_is_refused(tmp_path: Path, problem: str) -> None:
    """Duplicate ids, unknown parents and parent cycles make the file unusable."""
    data = json.loads(dump_tasks(two_tasks()))
    if problem == "duplicate":
        data[1]["id"] = data[0]["id"]
    elif problem == "dangling":
        data[1]["parent_id"] = "ghost"
    else:
        data[0]["parent_id"] = data[1]["id"]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(StoreError) as exc:
        FileTaskStore(path).read()
    assert str(path) in str(exc.value)


def test_tool_reports_bad_file_as_store_error_code(tmp_path: Path) -> None:
    """Through a tool, a bad file is ToolError store_error naming the file."""
    from loop.tasks.tools import TOOLS

    path = tmp_path / "tasks.json"
    path.write_text("not json", encoding="utf-8")
    create = next(t for t in TOOLS if t.name == "createTask")
    with pytest.raises(ToolError) as exc:
        create.run(ToolContext(root=tmp_path, tasks_file=path), {"name": "x"})
    assert exc.value.code == "store_error"
    assert str(path) in exc.value.message
    assert path.read_text(encoding="utf-8") == "not json"


@pytest.mark.parametrize(
    ("link", "list_code"),
    [("tasks.json", "invalid_path"), ("tasks.json.lock", None), (".", "invalid_path")],
)
def test_the_invalid_path_cases_tasks_md_lists(
    tmp_path: Path, link: str, list_code: str | None
) -> None:
    """invalid_path, as docs/tasks.md lists it: a link at the tasks file (every call), at
    its lock file (a change; a read takes no lock) or at a folder on the way below the
    project folder; and a path no system call takes."""
    from loop.tasks.tools import TOOLS

    by_name = {t.name: t for t in TOOLS}
    real = tmp_path / "real"
    real.mkdir()
    (real / "tasks.json").write_text("[]\n", encoding="utf-8")
    (real / "tasks.json.lock").write_text("", encoding="utf-8")
    folder = tmp_path / "project" / ".loop"
    if link == ".":
        folder.parent.mkdir()
        folder.symlink_to(real)
    else:
        folder.mkdir(parents=True)
        (folder / link).symlink_to(real / link)
    ctx = ToolContext(root=folder.parent, tasks_file=folder / "tasks.json")
    for tool, code in (("listTasks", list_code), ("createTask", "invalid_path")):
        if code is None:
            assert by_name[tool].run(ctx, {}).model_dump()["tasks"] == []
            continue
        with pytest.raises(ToolError) as exc:
            by_name[tool].run(ctx, {"name": "x"} if tool == "createTask" else {})
        assert exc.value.code == code
        assert "refusing to follow the symbolic link" in exc.value.message
    assert (real / "tasks.json").read_text(encoding="utf-8") == "[]\n"
    with pytest.raises(PathError, match="NUL"):
        ToolContext(root=tmp_path, tasks_file=Path("a\x00b.json"))


@pytest.mark.parametrize(
    ("failing", "errno_", "cause"),
    [("open", 2, "No such file or directory"), ("flock", 37, "No locks available")],
)
def test_lock_failure_is_a_store_error_naming_the_file_and_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, errno_: int, cause: str
) -> None:
    """When the lock file cannot be opened or locked, the change is a StoreError naming
    the tasks file, the lock file and the cause, and nothing is written."""

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(errno_, cause)

    # the lock file is opened through _fs.open_file (no links); flock is the kernel's
    if failing == "open":
        monkeypatch.setattr(_fs, "open_file", broken)
    else:
        monkeypatch.setattr(_fs.fcntl, failing, broken)
    path = tmp_path / "tasks.json"
    with pytest.raises(StoreError) as exc:
        FileTaskStore(path).change(lambda tasks: (two_tasks(), None))
    assert str(exc.value).startswith(f"{path}: cannot ")
    assert "tasks.json.lock" in str(exc.value)
    assert str(exc.value).endswith(cause)
    assert not path.exists()


def test_reads_see_changes_made_by_others(tmp_path: Path) -> None:
    """A file replaced by another writer is read again, even at the same size."""
    path = tmp_path / "tasks.json"
    store = FileTaskStore(path)
    tasks = two_tasks()
    store.change(lambda _old: (tasks, None))
    assert store.read()[0].name == "root"
    renamed = [tasks[0].model_copy(update={"name": "ROOT"}), tasks[1]]
    path.write_bytes(dump_tasks(renamed))  # same length, different bytes
    assert store.read()[0].name == "ROOT"


def test_memory_store_keeps_tasks_in_context_state() -> None:
    """Without a tasks file the tasks live in ctx.state['tasks'] of that context only."""
    ctx = ToolContext()
    store = store_for(ctx)
    assert isinstance(store, MemoryTaskStore)
    tasks = two_tasks()
    store.change(lambda _old: (tasks, None))
    assert ctx.state["tasks"] == tasks
    assert store_for(ToolContext()).read() == []


def test_memory_store_refused_change_keeps_old_list() -> None:
    """A refused change leaves the in-memory list as it was."""
    ctx = ToolContext()
    store = store_for(ctx)
    store.change(lambda _old: (two_tasks(), None))
    before = store.read()

    def boom(_tasks: list[Task]) -> tuple[list[Task], None]:
        raise ToolError("x", "refused")

    with pytest.raises(ToolError):
        store.change(boom)
    assert store.read() == before


WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from loop.tasks.tools import TOOLS
    from loop.tools.base import ToolContext

    path, me, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    tools = {t.name: t for t in TOOLS}
    ctx = ToolContext(tasks_file=path)
    root = tools["createTask"].run(ctx, {"name": f"root-{me}"}).task.id
    last = None
    for i in range(1, count):
        if i % 2:
            last = tools["createTask"].run(
                ctx, {"name": f"{me}-{i}", "parent_id": root}).task.id
        else:
            tools["updateTask"].run(ctx, {"id": last, "name": f"{me}-{i - 1}-renamed"})
    """
)


def test_four_processes_lose_no_update(tmp_path: Path) -> None:
    """4 processes x 250 operations (creates and renames) on one file lose nothing."""
    path = tmp_path / "tasks.json"
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), f"p{n}", "250"],
            cwd=Path(__file__).resolve().parents[2],
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=110)
        assert proc.returncode == 0, err.decode()
    tasks = FileTaskStore(path).read()
    roots = [t for t in tasks if t.parent_id is None]
    assert sorted(t.name for t in roots) == [f"root-p{n}" for n in range(4)]
    assert sorted(t.order for t in roots) == [1, 2, 3, 4]
    for root in roots:
        me = root.name.removeprefix("root-")
        kids = [t for t in tasks if t.parent_id == root.id]
        # 125 creates (odd i) and 124 renames (even i): the last create has no rename.
        expected = {f"{me}-{i}-renamed" for i in range(1, 248, 2)} | {f"{me}-249"}
        assert {t.name for t in kids} == expected
        assert sorted(t.order for t in kids) == list(range(1, 126))
    assert len(tasks) == 4 * 126


def many_tasks(count: int) -> list[Task]:
    """Roots with four subtasks each, built through the operations."""
    b = Book()
    root = ""
    for i in range(count):
        if i % 5 == 0:
            root = b.add(f"root {i}")
        else:
            b.add(f"task {i}", root)
    return list(b.tasks)


def test_file_changed_by_another_writer_is_reread(tmp_path: Path) -> None:
    """A task changed and one appended by another writer are there on the next read."""
    path = tmp_path / "tasks.json"
    tasks = many_tasks(50)
    path.write_bytes(dump_tasks(tasks))
    store = FileTaskStore(path)
    assert store.read() == tasks
    changed = list(tasks)
    changed[7] = changed[7].model_copy(update={"name": "renamed", "status": "done"})
    changed.append(changed[0].model_copy(update={"id": "new", "parent_id": changed[0].id}))
    path.write_bytes(dump_tasks(changed))
    got = store.read()
    assert got == changed
    out = operations.list_tasks(got, changed[0].id)
    assert "new" in [t.id for t in out.tasks]


def test_file_with_tasks_removed_by_another_writer_is_reread(tmp_path: Path) -> None:
    """Tasks deleted by another writer are gone on the next read."""
    path = tmp_path / "tasks.json"
    tasks = many_tasks(20)
    store = FileTaskStore(path)
    store.change(lambda _old: (tasks, None))
    kept = [t for t in tasks if t.id not in {tasks[3].id, tasks[12].id}]
    path.write_bytes(dump_tasks(kept))
    assert store.read() == kept


@pytest.mark.parametrize("problem", ["status", "duplicate", "dangling", "cycle", "garbage"])
def test_corruption_by_another_writer_is_found_after_a_cached_read(
    tmp_path: Path, problem: str
) -> None:
    """Corrupt content written after this process read the file is still a StoreError."""
    path = tmp_path / "tasks.json"
    tasks = many_tasks(20)
    store = FileTaskStore(path)
    store.change(lambda _old: (tasks, None))
    assert store.read() == tasks
    bad = list(tasks)
    if problem == "duplicate":
        bad.append(bad[4])
    elif problem == "dangling":
        bad[4] = bad[4].model_copy(update={"parent_id": "ghost"})
    elif problem == "cycle":
        bad[0] = bad[0].model_copy(update={"parent_id": bad[1].id})
    raw = dump_tasks(bad)
    if problem == "status":
        raw = raw.replace(b'"status": "todo"', b'"status": "finished"', 1)
    elif problem == "garbage":
        raw = raw.replace(b'"order": 2', b'"order": {"x": [1, 2]}', 1)
    path.write_bytes(raw)
    with pytest.raises(StoreError) as exc:
        store.read()
    assert str(path) in str(exc.value)
    with pytest.raises(StoreError):
        store.change(lambda old: (old[:1], None))
    assert path.read_bytes() == raw


def test_a_context_parses_a_file_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through one tool context, a file is parsed again only when its bytes changed (its
    own writes included: it keeps what it wrote); without a context, every read parses."""
    import loop.tasks.store as store_module

    path = tmp_path / "tasks.json"
    tasks = many_tasks(20)
    FileTaskStore(path).change(lambda _old: (tasks, None))
    parsed: list[int] = []
    real = store_module.parse_tasks

    def counted(raw: bytes, where: Path) -> store_module.TaskIndex:
        parsed.append(len(raw))
        return real(raw, where)

    monkeypatch.setattr(store_module, "parse_tasks", counted)
    ctx = ToolContext(root=tmp_path, tasks_file=path)
    assert store_for(ctx).read() == tasks
    assert store_for(ctx).read() == tasks
    store_for(ctx).change(lambda old: operations.update(old, tasks[6].id, name="new", now=T0))
    assert store_for(ctx).read()[6].name == "new"
    assert len(parsed) == 1
    path.write_bytes(dump_tasks(tasks))  # another writer
    assert store_for(ctx).read() == tasks
    assert len(parsed) == 2
    FileTaskStore(path).read()
    FileTaskStore(path).read()
    assert len(parsed) == 4
