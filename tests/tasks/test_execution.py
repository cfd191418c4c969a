"""Rules of startTask and completeTask (pure operations)."""

from __future__ import annotations

import pytest

from loop.errors import ToolError
from loop.tasks.execution import AUTO_RESOLUTION
from loop.tasks.models import CompleteTaskInput
from tests.tasks._book import Book


def tree() -> tuple[Book, dict[str, str]]:
    """root > (a > (a1, a2 > (a2x)), b)."""
    b = Book()
    ids: dict[str, str] = {}
    ids["root"] = b.add("root")
    ids["a"] = b.add("a", ids["root"])
    ids["b"] = b.add("b", ids["root"])
    ids["a2"] = b.add("a2", ids["a"])
    ids["a1"] = b.add("a1", ids["a"], order=1)
    ids["a2x"] = b.add("a2x", ids["a2"])
    return b, ids


# --- startTask --------------------------------------------------------------------------


def test_start_descends_to_deepest_first_unfinished_subtask() -> None:
    """Starting the root starts the first subtask by order, recursively, to the deepest."""
    b, ids = tree()
    out = b.start(ids["root"])
    assert out.task.id == ids["root"]
    assert out.subtask is not None
    assert out.subtask.id == ids["a1"]
    assert [b.status(ids[n]) for n in ("root", "a", "a1", "a2", "a2x", "b")] == [
        "in_progress",
        "in_progress",
        "in_progress",
        "todo",
        "todo",
        "todo",
    ]
    assert {t.id for t in out.started_tasks} == {ids["root"], ids["a"], ids["a1"]}


def test_start_message_says_what_was_started_automatically() -> None:
    """The reply's message names the auto-started deepest subtask."""
    b, ids = tree()
    out = b.start(ids["root"])
    assert out.message is not None
    assert "Automatically started 2 nested subtask(s)" in out.message
    assert "'a1'" in out.message


def test_start_hierarchy_summary_is_a_table_of_the_tree() -> None:
    """hierarchy_summary is a Markdown table with every task of the tree, depth first."""
    b, ids = tree()
    table = b.start(ids["root"]).hierarchy_summary
    assert table is not None
    lines = table.splitlines()
    assert lines[0] == "| Task Name | Status | Subtasks | Progress |"
    names = [line.split("|")[1].strip(" └") for line in lines[2:]]
    assert names == ["root", "a", "a1", "a2", "a2x", "b"]
    assert "| root | in_progress | 0/2 | 0% |" in lines


def test_start_skips_done_subtasks_when_descending() -> None:
    """The descent takes the first subtask that is not done."""
    b, ids = tree()
    b.start(ids["a1"])
    b.complete(ids["a1"])
    out = b.start(ids["root"])
    assert out.subtask is not None
    assert out.subtask.id == ids["a2x"]
    assert b.status(ids["a2"]) == "in_progress"


def test_start_leaf_starts_its_ancestors() -> None:
    """Starting a leaf makes it and every ancestor in_progress; there is no subtask."""
    b, ids = tree()
    out = b.start(ids["a1"])
    assert out.subtask is None
    assert [b.status(ids[n]) for n in ("root", "a", "a1")] == ["in_progress"] * 3
    assert out.message is not None
    assert "parent task(s)" in out.message


def test_start_refused_while_earlier_sibling_unfinished() -> None:
    """A task whose lower-order sibling is not done cannot start; blockers are listed."""
    b, ids = tree()
    with pytest.raises(ToolError) as exc:
        b.start(ids["b"])
    assert exc.value.code == "blocked_by_earlier_sibling"
    blockers = exc.value.details["blocking_tasks"]
    assert [x["id"] for x in blockers] == [ids["a"]]
    assert "'a'" in exc.value.message
    assert b.status(ids["b"]) == "todo"


def test_start_refusal_shows_each_blocker_with_its_description() -> None:
    """Each blocking task is listed with its description (capped in the message, whole in
    the details); one without a description says so."""
    b = Book()
    long = "step " * 100
    first = b.create("first", description="parse the config").task.id
    second = b.create("second", description=long).task.id
    third = b.add("third")
    last = b.add("last")
    with pytest.raises(ToolError) as exc:
        b.start(last)
    message = exc.value.message
    assert "(order 1, todo, at the root" in message
    assert f"id {first}): 'parse the config'" in message
    assert f"id {second}): 'step step" in message
    assert long.strip() not in message and "…" in message
    assert f"id {third}): no description" in message
    details = exc.value.details["blocking_tasks"]
    assert [d["description"] for d in details] == ["parse the config", long.strip(), ""]


def test_start_refused_when_an_ancestors_earlier_sibling_is_unfinished() -> None:
    """The order check covers every level: a grandchild under a later sibling waits too."""
    b, ids = tree()
    bx = b.add("bx", ids["b"])
    with pytest.raises(ToolError) as exc:
        b.start(bx)
    assert exc.value.code == "blocked_by_earlier_sibling"
    assert [x["id"] for x in exc.value.details["blocking_tasks"]] == [ids["a"]]
    with pytest.raises(ToolError) as exc2:
        b.start(ids["a2x"])  # a2x's parent a2 comes after a1
    assert [x["id"] for x in exc2.value.details["blocking_tasks"]] == [ids["a1"]]


def test_start_allowed_once_earlier_siblings_are_done() -> None:
    """After the earlier sibling is done, the later one starts."""
    b, ids = tree()
    b.start(ids["a1"])
    b.complete(ids["a1"])
    out = b.start(ids["a2"])
    assert out.subtask is not None
    assert out.subtask.id == ids["a2x"]


def test_start_done_task_refused() -> None:
    """A done task cannot be started again (task_already_done)."""
    b = Book()
    a = b.add("a")
    b.complete(a)
    with pytest.raises(ToolError) as exc:
        b.start(a)
    assert exc.value.code == "task_already_done"


def test_start_in_progress_task_again_changes_nothing() -> None:
    """Starting a task already in progress is allowed, starts nothing new and says so
    plainly (not "started 0 nested subtasks")."""
    b, ids = tree()
    b.start(ids["root"])
    before = list(b.tasks)
    out = b.start(ids["root"])
    assert (out.started_tasks, out.reset_tasks) == ([], [])
    assert out.subtask is not None
    assert out.subtask.id == ids["a1"]
    assert b.tasks == before
    assert out.message is not None
    assert out.message.startswith("'root' is already in progress; nothing changed.")
    assert "0 nested" not in out.message
    assert "Its current subtask is 'a1'" in out.message
    leaf = b.start(ids["a1"])
    assert leaf.message == (
        "'a1' is already in progress; nothing changed. Work on it now, then call "
        "completeTask on it."
    )


def test_start_walks_down_to_a_subtask_added_before_the_current_one() -> None:
    """A subtask inserted first under an in-progress parent is started by a new start of
    the parent, and the previous leaf goes back to todo."""
    b, ids = tree()
    b.start(ids["root"])
    a0 = b.add("a0", ids["a"], order=1)
    out = b.start(ids["root"])
    assert out.subtask is not None and out.subtask.id == a0
    assert [t.id for t in out.reset_tasks] == [ids["a1"]]
    assert out.message is not None
    assert out.message.startswith("'root' was already in progress.")
    assert "Automatically started 1 nested subtask(s)" in out.message


def test_start_resets_the_previous_in_progress_leaf() -> None:
    """R > (RX, RA, RB): with RA in progress, starting RX resets RA to todo (one leaf)."""
    b = Book()
    r = b.add("R")
    ra = b.add("RA", r)
    b.add("RB", r)
    b.start(r)
    rx = b.add("RX", r, order=1)
    out = b.start(rx)
    assert [t.id for t in out.reset_tasks] == [ra]
    assert b.status(ra) == "todo"
    assert [t.name for t in b.tasks if t.status == "in_progress"] == ["R", "RX"]
    assert out.message is not None
    assert out.message.endswith("reset to todo: 'RA'.")


def test_start_in_another_tree_resets_the_whole_previous_chain() -> None:
    """Starting a task of another root resets the previous root, its path and its leaf."""
    b, ids = tree()
    b.start(ids["root"])
    other = b.add("other", order=1)  # runs before root
    out = b.start(other)
    assert [t.id for t in out.reset_tasks] == [ids["root"], ids["a"], ids["a1"]]
    assert [t.name for t in b.tasks if t.status == "in_progress"] == ["other"]


def test_start_parent_with_all_subtasks_done_says_complete_it() -> None:
    """A parent whose subtasks are all done is started with no subtask; told to complete."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    b.complete(a)
    b.update(r, status="todo")
    out = b.start(r)
    assert out.subtask is None
    assert out.message is not None
    assert "completeTask" in out.message


def test_start_unknown_refused() -> None:
    """Starting an unknown id is task_not_found."""
    with pytest.raises(ToolError) as exc:
        Book().start("nope")
    assert exc.value.code == "task_not_found"


# --- completeTask -----------------------------------------------------------------------


def test_complete_requires_a_resolution() -> None:
    """A blank resolution is refused in the operation; a missing one by the input model."""
    b = Book()
    a = b.add("a")
    with pytest.raises(ToolError) as exc:
        b.complete(a, "  ")
    assert exc.value.code == "resolution_required"
    for args in ({"id": a}, {"id": a, "resolution": None}, {"id": a, "resolution": ""}):
        with pytest.raises(ToolError) as exc2:
            CompleteTaskInput.model_validate(args)
        assert exc2.value.code == "resolution_required"
    assert b.status(a) == "todo"


def test_complete_refused_while_subtasks_unfinished() -> None:
    """A task with unfinished subtasks is refused; the message and details list them."""
    b, ids = tree()
    with pytest.raises(ToolError) as exc:
        b.complete(ids["a"])
    assert exc.value.code == "subtasks_unfinished"
    assert {x["id"] for x in exc.value.details["subtasks"]} == {ids["a1"], ids["a2"]}
    assert "'a1'" in exc.value.message
    assert "'a2'" in exc.value.message


def test_complete_done_task_refused() -> None:
    """Completing a task twice is task_already_done."""
    b = Book()
    a = b.add("a")
    b.complete(a)
    with pytest.raises(ToolError) as exc:
        b.complete(a)
    assert exc.value.code == "task_already_done"


def test_complete_sets_resolution_trimmed() -> None:
    """The task becomes done with its resolution."""
    b = Book()
    a = b.add("a")
    out = b.complete(a, "  shipped  ")
    assert out.task is not None
    assert (out.task.status, out.task.resolution) == ("done", "shipped")


def test_complete_auto_completes_parents_recursively() -> None:
    """The last open subtask completes its parent, and that parent's parent, upwards."""
    b = Book()
    r = b.add("r")
    m = b.add("m", r)
    leaf = b.add("leaf", m)
    out = b.complete(leaf)
    assert [t.id for t in out.auto_completed_parents] == [m, r]
    assert all(t.status == "done" for t in out.auto_completed_parents)
    assert b.get(r).resolution == AUTO_RESOLUTION
    assert out.next_task_id is None
    assert "No open tasks remain" in out.message


def test_complete_does_not_complete_parent_with_open_subtasks() -> None:
    """A parent with another open subtask stays open; auto_completed_parents is empty."""
    b, ids = tree()
    out = b.complete(ids["a1"])
    assert out.auto_completed_parents == []
    assert b.status(ids["a"]) == "todo"


def test_complete_stops_auto_completion_at_first_open_ancestor() -> None:
    """Auto completion climbs only while every subtask of the parent is done."""
    b, ids = tree()
    b.complete(ids["a1"])
    out = b.complete(ids["a2x"])
    assert [t.id for t in out.auto_completed_parents] == [ids["a2"], ids["a"]]
    assert b.status(ids["root"]) == "todo"


def test_complete_next_task_is_the_next_in_order() -> None:
    """next_task_id names the next unfinished leaf in execution order; the message too."""
    b, ids = tree()
    b.start(ids["root"])
    out = b.complete(ids["a1"])
    assert out.next_task_id == ids["a2x"]  # a2's first subtask: a leaf, not a2 itself
    assert "'a2x'" in out.message
    out = b.complete(ids["a2x"])
    assert out.next_task_id == ids["b"]


def test_complete_next_task_moves_to_next_root() -> None:
    """When a whole tree is done, the next task is the next root."""
    b = Book()
    r1 = b.add("r1")
    r2 = b.add("r2")
    x = b.add("x", r1)
    out = b.complete(x)
    assert [t.id for t in out.auto_completed_parents] == [r1]
    assert out.next_task_id == r2


def test_complete_progress_summary_counts_and_table() -> None:
    """The progress summary counts every task and has one row per parent task."""
    b, ids = tree()
    b.start(ids["root"])
    out = b.complete(ids["a1"])
    s = out.progress_summary
    assert s is not None
    assert (s.total_tasks, s.completed_tasks, s.in_progress_tasks, s.todo_tasks) == (6, 1, 2, 3)
    assert s.completion_percentage == 17
    lines = s.table.splitlines()
    assert lines[0] == "| Task Name | Status | Subtasks | Progress |"
    assert lines[2:] == [
        "| root | in_progress | 0/2 | 0% |",
        "| a | in_progress | 1/2 | 50% |",
        "| a2 | todo | 0/1 | 0% |",
    ]


def test_complete_unknown_refused() -> None:
    """Completing an unknown id is task_not_found."""
    with pytest.raises(ToolError) as exc:
        Book().complete("nope")
    assert exc.value.code == "task_not_found"


def test_complete_never_says_none_remain_while_tasks_are_open() -> None:
    """Open tasks under a parent marked done (a hand-edited file) are counted, not hidden."""
    b = Book()
    root = b.add("root")
    a, s, t = b.add("a", root), b.add("sibling", root), b.add("todo", root)
    b.tasks = [
        x.model_copy(update={"status": "done" if x.id == root else "in_progress"})
        if x.id in (root, a, s)
        else x
        for x in b.tasks
    ]
    out = b.complete(a)
    assert out.next_task_id is None
    assert "No open tasks remain" not in out.message
    assert "2 task(s) still open: 1 in progress, 1 todo." in out.message
    assert b.status(s) == "in_progress" and b.status(t) == "todo"


def test_complete_counts_what_is_still_open() -> None:
    """The message says how many tasks are still open alongside the next one."""
    b, ids = tree()
    b.start(ids["root"])
    out = b.complete(ids["a1"])
    assert out.next_task_id == ids["a2x"]
    assert "5 task(s) still open: 2 in progress, 3 todo." in out.message


def test_a_unique_id_prefix_names_a_task_like_git() -> None:
    """start, complete, update, get, delete and a parent_id take a unique prefix (4+
    characters); a shared one is ambiguous_id listing the candidates; a short one is
    not looked up."""
    b = Book()
    root = b.add("root")  # ids t1, t2...: give them uuid-like ids
    b.tasks = [t.model_copy(update={"id": "f969" + t.id}) for t in b.tasks]
    root = "f969" + root
    kid = b.create("kid", "f969t").task  # the parent by a prefix: stored whole
    assert kid.parent_id == root
    b.tasks = [t.model_copy(update={"id": "abcd-kid"}) if t.id == kid.id else t for t in b.tasks]
    b.tasks = [
        t.model_copy(update={"parent_id": root}) if t.id == "abcd-kid" else t for t in b.tasks
    ]
    out = b.start("f969")
    assert out.task.id == root and out.subtask is not None and out.subtask.id == "abcd-kid"
    done = b.complete("abcd")
    assert done.task is not None and done.task.id == "abcd-kid"
    assert b.status(root) == "done"
    other = b.add("other")
    b.tasks = [t.model_copy(update={"id": "abcd-other"}) if t.id == other else t for t in b.tasks]
    with pytest.raises(ToolError) as ambiguous:
        b.start("abcd")
    assert ambiguous.value.code == "ambiguous_id"
    assert ambiguous.value.details["candidates"] == ["abcd-kid", "abcd-other"]
    with pytest.raises(ToolError) as short:
        b.start("abc")
    assert short.value.code == "task_not_found"
