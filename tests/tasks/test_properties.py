"""Property tests: random operation sequences keep the hierarchy's invariants."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loop.errors import ToolError
from loop.tasks.focus import next_task
from loop.tasks.models import Task, task_list_adapter
from loop.tasks.store import FileTaskStore
from loop.tasks.tools import TOOLS
from loop.tasks.tree import Forest, integrity_problem
from loop.tools.base import ToolContext
from tests.tasks._book import Book

KINDS = [
    "create",
    "create_sub",
    "start",
    "complete",
    "update_status",
    "reparent",
    "order",
    "delete",
    "delete_cascade",
]
STATUS = ["todo", "in_progress", "done"]
# Creates weigh more, so that sequences build deep trees before they change them.
WEIGHTED = ["create", "create_sub", "create_sub", "create_sub", *KINDS]
OPS = st.lists(
    st.tuples(st.sampled_from(WEIGHTED), st.integers(0, 50), st.integers(0, 50), st.integers(0, 4)),
    min_size=1,
    max_size=40,
)


def check_invariants(tasks: list[Task]) -> None:
    """Unique sibling orders, no cycles, done parents only have done subtasks, every
    in-progress task's ancestors are in progress, and the in-progress tasks form one
    chain (so at most one leaf task is in progress)."""
    assert integrity_problem(tasks) is None
    by_id = {t.id: t for t in tasks}
    orders = Counter((t.parent_id, t.order) for t in tasks)
    assert max(orders.values(), default=1) == 1, orders
    busy = Counter(t.parent_id for t in tasks if t.status == "in_progress")
    assert max(busy.values(), default=1) == 1, busy  # one in-progress root, one child each
    for t in tasks:
        parent = by_id.get(t.parent_id) if t.parent_id else None
        if parent is not None and parent.status == "done":
            assert t.status == "done", (parent.name, t.name, t.status)
        if t.status == "in_progress":
            up = t.parent_id
            while up is not None:
                assert by_id[up].status == "in_progress", (t.name, by_id[up].name)
                up = by_id[up].parent_id
        if t.status != "done":
            assert t.resolution is None


def pick(tasks: list[Task], i: int) -> str | None:
    """The i-th task's id (modulo the count), or None when there are none."""
    return tasks[i % len(tasks)].id if tasks else None


def apply(b: Book, op: tuple[str, int, int, int]) -> None:
    """Apply one random operation; refusals (ToolError) are allowed and change nothing."""
    kind, i, j, k = op
    a, other = pick(b.tasks, i), pick(b.tasks, j)
    before = [t.model_dump() for t in b.tasks]
    try:
        if kind in ("create", "create_sub"):  # a subtask of nothing is a root task
            b.add(f"t{b.n + 1}", a if kind == "create_sub" else None, order=k or None)
        elif kind == "start" and a:
            b.start(a)
        elif kind == "complete" and a:
            b.complete(a, "ok")
        elif kind == "update_status" and a:
            b.update(a, status=STATUS[k % 3])
        elif kind == "reparent" and a:
            b.update(a, parent_id=other if k else "", order=k or None)
        elif kind == "order" and a:
            b.update(a, order=k)
        elif kind in ("delete", "delete_cascade") and a:
            b.delete(a, cascade=kind == "delete_cascade")
    except ToolError:
        assert [t.model_dump() for t in b.tasks] == before


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_random_sequences_keep_invariants(ops: list[tuple[str, int, int, int]]) -> None:
    """After every operation of a random sequence the invariants hold."""
    b = Book()
    for op in ops:
        apply(b, op)
        check_invariants(b.tasks)


def _run_tool(
    ctx: ToolContext, tools: dict[str, Any], op: tuple[str, int, int, int], ids: list[str]
) -> None:
    kind, i, j, k = op
    a = ids[i % len(ids)] if ids else None
    other = ids[j % len(ids)] if ids else None
    stored = ctx.tasks_file.read_bytes() if ctx.tasks_file.exists() else None
    try:
        if kind in ("create", "create_sub"):
            args: dict[str, Any] = {"name": f"n{len(ids)}", "order": k}
            if kind == "create_sub" and a:
                args["parent_id"] = a
            ids.append(tools["createTask"].run(ctx, args).task.id)
        elif kind == "start" and a:
            tools["startTask"].run(ctx, {"id": a})
        elif kind == "complete" and a:
            tools["completeTask"].run(ctx, {"id": a, "resolution": "ok"})
        elif kind == "update_status" and a:
            tools["updateTask"].run(ctx, {"id": a, "status": STATUS[k % 3]})
        elif kind == "reparent" and a:
            tools["updateTask"].run(ctx, {"id": a, "parent_id": other if k else ""})
        elif kind == "order" and a:
            tools["updateTask"].run(ctx, {"id": a, "order": k})
        elif kind in ("delete", "delete_cascade") and a:
            out = tools["deleteTask"].run(ctx, {"id": a, "cascade": kind == "delete_cascade"})
            for gone in out.deleted_ids:
                ids.remove(gone)
    except ToolError:  # a refused call leaves the file as it was, byte for byte
        assert (ctx.tasks_file.read_bytes() if ctx.tasks_file.exists() else None) == stored


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_file_always_parses_and_keeps_invariants(ops: list[tuple[str, int, int, int]]) -> None:
    """Through the tools on a real file, the file parses after every operation."""
    tools = {t.name: t for t in TOOLS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.json"
        ctx = ToolContext(root=Path(tmp), tasks_file=path)
        ids: list[str] = []
        for op in ops:
            _run_tool(ctx, tools, op, ids)
            # Parse the bytes afresh (not through the store's cache of what it wrote).
            tasks = task_list_adapter().validate_json(path.read_bytes()) if path.exists() else []
            check_invariants(tasks)
            assert FileTaskStore(path).read() == tasks  # the store's cached version is the file
            assert sorted(t.id for t in tasks) == sorted(ids)


def unfinished_leaves_in_order(tasks: list[Task]) -> list[Task]:
    """Brute force: unfinished tasks without an unfinished subtask, depth first by order."""
    forest = Forest(tasks)
    open_kids = Counter(t.parent_id for t in tasks if t.status != "done")
    return [
        t
        for t, _ in forest.walk()
        if t.status != "done"
        and open_kids[t.id] == 0
        and all(a.status != "done" for a in forest.ancestors(t.id))
    ]


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_next_task_is_the_first_unfinished_leaf_and_start_accepts_it(
    ops: list[tuple[str, int, int, int]],
) -> None:
    """In any state: the next task is the first unfinished leaf in execution order (the
    in-progress one included); startTask accepts it, and afterwards the in-progress tasks
    are exactly the path from its root down to the one leaf being worked on."""
    b = Book()
    for op in ops:
        apply(b, op)
        upcoming = next_task(Forest(b.tasks))
        leaves = unfinished_leaves_in_order(b.tasks)
        assert upcoming == (leaves[0] if leaves else None)
        assert (upcoming is None) == all(t.status == "done" for t in b.tasks)
        if upcoming is None:
            continue
        trial = Book()
        trial.tasks = list(b.tasks)
        out = trial.start(upcoming.id)  # never blocked_by_earlier_sibling
        current = out.subtask or out.task
        assert current.id == upcoming.id
        path = {current.id, *(a.id for a in Forest(trial.tasks).ancestors(current.id))}
        assert {t.id for t in trial.tasks if t.status == "in_progress"} == path
        assert {t.id for t in out.reset_tasks}.isdisjoint(path)
        check_invariants(trial.tasks)


@settings(max_examples=200, deadline=None)
@given(OPS, st.integers(0, 50))
def test_start_leaves_one_in_progress_leaf(ops: list[tuple[str, int, int, int]], i: int) -> None:
    """Whatever task a successful startTask names, afterwards exactly the path to the task
    it reports as current is in progress, and every task it reset is todo."""
    b = Book()
    for op in ops:
        apply(b, op)
    target = pick(b.tasks, i)
    if target is None:
        return
    before = {t.id: t.status for t in b.tasks}
    try:
        out = b.start(target)
    except ToolError:
        return
    current = out.subtask or out.task
    forest = Forest(b.tasks)
    assert not any(k.status != "done" for k in forest.children(current.id))
    path = {current.id, *(a.id for a in forest.ancestors(current.id))}
    assert {t.id for t in b.tasks if t.status == "in_progress"} == path
    assert all(before[t.id] == "in_progress" and b.status(t.id) == "todo" for t in out.reset_tasks)
    check_invariants(b.tasks)
