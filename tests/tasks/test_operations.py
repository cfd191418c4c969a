"""Rules of createTask, getTask, listTasks, updateTask and deleteTask (pure operations)."""

from __future__ import annotations

import pytest

from loop.errors import ToolError
from loop.tasks import operations
from loop.tasks.models import MAX_ORDER, UpdateTaskInput
from tests.tasks._book import T0, Book


def code_of(exc: pytest.ExceptionInfo[ToolError]) -> str:
    """The ToolError's code."""
    return exc.value.code


# --- createTask -------------------------------------------------------------------------


def test_first_child_gets_order_1_and_next_gets_max_plus_one() -> None:
    """Unset order: 1 for the first sibling, then max sibling order + 1 (gaps kept)."""
    b = Book()
    root = b.add("root")
    a = b.add("a", root)
    c = b.add("c", root, order=5)
    d = b.add("d", root)
    assert (b.order(a), b.order(c), b.order(d)) == (1, 5, 6)


def test_orders_are_per_parent() -> None:
    """Siblings under another parent do not count for max + 1."""
    b = Book()
    r1, r2 = b.add("r1"), b.add("r2")
    b.add("x", r1)
    b.add("y", r1)
    assert b.order(b.add("z", r2)) == 1
    assert (b.order(r1), b.order(r2)) == (1, 2)


def test_order_zero_means_unset() -> None:
    """Order 0 is treated as unset (as the original does): placed after the last sibling."""
    b = Book()
    b.add("a")
    assert b.order(b.add("b", order=0)) == 2


def test_colliding_order_shifts_siblings_at_or_above() -> None:
    """A taken order moves every sibling with order >= it up by one; others stay."""
    b = Book()
    root = b.add("root")
    other = b.add("other-root")
    one, two, three = b.add("1", root), b.add("2", root), b.add("3", root)
    new = b.add("new", root, order=2)
    assert [b.order(x) for x in (one, new, two, three)] == [1, 2, 3, 4]
    assert b.order(other) == 2
    assert b.get(two).updated_at > T0


def test_free_order_is_used_as_given() -> None:
    """An order no sibling holds is kept as given, without shifting anything."""
    b = Book()
    a = b.add("a")
    c = b.add("c", order=10)
    assert (b.order(a), b.order(c)) == (1, 10)


@pytest.mark.parametrize("order", [-1, MAX_ORDER + 1, 2**70])
def test_order_out_of_range_refused(order: int) -> None:
    """A negative order, or one past MAX_ORDER, is invalid_order (the tools' input models
    refuse it first, as invalid_input)."""
    with pytest.raises(ToolError) as exc:
        Book().create("a", order=order)
    assert code_of(exc) == "invalid_order"


def test_orders_never_grow_past_max_order() -> None:
    """After a sibling at MAX_ORDER there is no room: appending, or inserting where the
    shift would push it past MAX_ORDER, is refused and changes nothing."""
    b = Book()
    b.add("first")
    b.add("top", order=MAX_ORDER)
    before = list(b.tasks)
    for order in (None, 1):
        with pytest.raises(ToolError) as exc:
            b.create("more", order=order)
        assert code_of(exc) == "invalid_order"
        assert "no room" in exc.value.message
    assert b.tasks == before
    assert b.order(b.add("gap", order=MAX_ORDER - 1)) == MAX_ORDER - 1  # a free order fits


def test_root_task_message_recommends_subtasks() -> None:
    """Creating a root task returns a message recommending subtasks; a subtask gets none."""
    b = Book()
    out = b.create("root")
    assert out.message is not None
    assert "subtask" in out.message
    assert out.task.id in out.message
    assert b.create("child", out.task.id).message is None


def test_create_fields_and_defaults() -> None:
    """A new task is todo, trimmed, with an empty description, a UUID slot and timestamps."""
    out = Book().create("  Write docs  ", description="  the README  ")
    task = out.task
    assert (task.name, task.description, task.status) == ("Write docs", "the README", "todo")
    assert task.resolution is None
    assert task.parent_id is None
    assert task.created_at == task.updated_at


def test_blank_name_refused() -> None:
    """A name that is empty after trimming is invalid_name."""
    with pytest.raises(ToolError) as exc:
        Book().create("   ")
    assert code_of(exc) == "invalid_name"


def test_unknown_parent_refused() -> None:
    """A parent_id that names no task is parent_not_found."""
    with pytest.raises(ToolError) as exc:
        Book().create("x", "nope")
    assert code_of(exc) == "parent_not_found"


def test_done_parent_refused() -> None:
    """A subtask cannot be added under a done task (it would be an open task under done)."""
    b = Book()
    root = b.add("root")
    b.complete(root)
    with pytest.raises(ToolError) as exc:
        b.add("late", root)
    assert code_of(exc) == "parent_done"


def test_operations_do_not_change_their_input() -> None:
    """Operations are pure: the list given is left as it was."""
    b = Book()
    root = b.add("root")
    b.add("a", root)
    before = list(b.tasks)
    snapshot = [t.model_dump() for t in before]
    operations.create(before, name="b", parent_id=root, order=1, new_id="x", now=T0)
    assert [t.model_dump() for t in before] == snapshot


# --- getTask / listTasks ----------------------------------------------------------------


def test_get_returns_task_and_refuses_unknown() -> None:
    """getTask returns the task; an unknown id is task_not_found."""
    b = Book()
    a = b.add("a")
    assert operations.get(b.tasks, a).task.name == "a"
    with pytest.raises(ToolError) as exc:
        operations.get(b.tasks, "nope")
    assert code_of(exc) == "task_not_found"


def test_list_all_is_depth_first_in_order() -> None:
    """Without a filter every task is listed, parents before subtasks, siblings by order."""
    b = Book()
    r2 = b.add("r2")
    r1 = b.add("r1", order=1)
    b.add("r1-b", r1)
    b.add("r1-a", r1, order=1)
    b.add("r2-a", r2)
    names = [t.name for t in operations.list_tasks(b.tasks).tasks]
    assert names == ["r1", "r1-a", "r1-b", "r2", "r2-a"]


def test_list_by_parent_gives_direct_subtasks_in_order() -> None:
    """With parent_id only the direct subtasks are listed, by order."""
    b = Book()
    r = b.add("r")
    x = b.add("x", r)
    b.add("deep", x)
    b.add("w", r, order=1)
    assert [t.name for t in operations.list_tasks(b.tasks, r).tasks] == ["w", "x"]


def test_list_unknown_parent_refused() -> None:
    """Filtering by an unknown parent is parent_not_found, not an empty list."""
    with pytest.raises(ToolError) as exc:
        operations.list_tasks([], "nope")
    assert code_of(exc) == "parent_not_found"


# --- updateTask -------------------------------------------------------------------------


def test_update_changes_only_given_fields() -> None:
    """Name and description change; everything else stays; updatedAt moves."""
    b = Book()
    a = b.add("a")
    before = b.get(a)
    after = b.update(a, name=" b ", description="d").task
    assert (after.name, after.description, after.status, after.order) == ("b", "d", "todo", 1)
    assert after.updated_at > before.updated_at
    assert after.created_at == before.created_at


def test_update_blank_name_refused() -> None:
    """An empty name is invalid_name."""
    b = Book()
    a = b.add("a")
    with pytest.raises(ToolError) as exc:
        b.update(a, name=" ")
    assert code_of(exc) == "invalid_name"


def test_update_invalid_status_refused() -> None:
    """A status outside todo/in_progress/done is invalid_status (operation and input)."""
    b = Book()
    a = b.add("a")
    with pytest.raises(ToolError) as exc:
        b.update(a, status="finished")
    assert code_of(exc) == "invalid_status"
    with pytest.raises(ToolError) as exc2:
        UpdateTaskInput.model_validate({"id": a, "status": "finished"})
    assert code_of(exc2) == "invalid_status"


def test_update_unknown_task_refused() -> None:
    """Updating an unknown id is task_not_found."""
    with pytest.raises(ToolError) as exc:
        Book().update("nope", name="x")
    assert code_of(exc) == "task_not_found"


def test_update_done_refused_while_subtasks_open() -> None:
    """Status done needs every subtask done, as completeTask does."""
    b = Book()
    r = b.add("r")
    b.add("a", r)
    with pytest.raises(ToolError) as exc:
        b.update(r, status="done")
    assert code_of(exc) == "subtasks_unfinished"


def test_update_done_with_resolution() -> None:
    """A leaf can be set done with a resolution."""
    b = Book()
    a = b.add("a")
    task = b.update(a, status="done", resolution="ok").task
    assert (task.status, task.resolution) == ("done", "ok")


def test_update_in_progress_starts_ancestors_and_reopens_done_ones() -> None:
    """A task set in_progress makes every ancestor in_progress, reopening done ones."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    b.complete(a)
    assert b.status(r) == "done"
    b.update(a, status="in_progress")
    assert (b.status(r), b.status(a)) == ("in_progress", "in_progress")
    assert b.get(r).resolution is None
    assert b.get(a).resolution is None


def test_update_todo_reopens_done_ancestors() -> None:
    """A done task set back to todo reopens its done ancestors as todo."""
    b = Book()
    r = b.add("r")
    m = b.add("m", r)
    a = b.add("a", m)
    b.complete(a)
    b.update(a, status="todo")
    assert [b.status(x) for x in (r, m, a)] == ["todo", "todo", "todo"]


def test_update_todo_refused_while_subtask_in_progress() -> None:
    """A task cannot go back to todo while a subtask is in progress."""
    b = Book()
    r = b.add("r")
    b.add("a", r)
    b.start(r)
    with pytest.raises(ToolError) as exc:
        b.update(r, status="todo")
    assert code_of(exc) == "subtasks_in_progress"


def test_update_resolution_on_open_task_refused() -> None:
    """A resolution belongs to done tasks; setting one on an open task is refused."""
    b = Book()
    a = b.add("a")
    with pytest.raises(ToolError) as exc:
        b.update(a, resolution="x")
    assert code_of(exc) == "invalid_resolution"


def test_update_reparent_to_self_or_descendant_is_a_cycle() -> None:
    """Moving a task under itself, its child or a deeper descendant is refused."""
    b = Book()
    r = b.add("r")
    c = b.add("c", r)
    g = b.add("g", c)
    gg = b.add("gg", g)
    for target in (r, c, g, gg):
        with pytest.raises(ToolError) as exc:
            b.update(r, parent_id=target)
        assert code_of(exc) == "cycle"
    assert b.get(r).parent_id is None


def test_update_reparent_to_unknown_parent_refused() -> None:
    """A new parent_id that names no task is parent_not_found."""
    b = Book()
    a = b.add("a")
    with pytest.raises(ToolError) as exc:
        b.update(a, parent_id="nope")
    assert code_of(exc) == "parent_not_found"


def test_update_reparent_places_after_last_sibling() -> None:
    """A moved task without an order goes after the new parent's last subtask."""
    b = Book()
    r1, r2 = b.add("r1"), b.add("r2")
    b.add("x", r2)
    b.add("y", r2)
    moved = b.update(r1, parent_id=r2).task
    assert (moved.parent_id, moved.order) == (r2, 3)


def test_update_empty_parent_moves_to_root() -> None:
    """parent_id "" (or None given explicitly) moves the task to the root."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    moved = b.update(a, parent_id="").task
    assert (moved.parent_id, moved.order) == (None, 2)
    c = b.add("c", r)
    assert b.update(c, parent_id=None).task.parent_id is None


def test_update_reparent_in_progress_task_starts_new_ancestors() -> None:
    """Moving an in-progress task keeps its new ancestors in progress; its old parent,
    left without an in-progress subtask, goes back to todo (one in-progress chain)."""
    b = Book()
    r1, r2 = b.add("r1"), b.add("r2")
    a = b.add("a", r1)
    b.start(r1)
    out = b.update(a, parent_id=r2)
    assert b.status(r2) == "in_progress"
    assert [t.id for t in out.reset_tasks] == [r1]
    assert b.status(r1) == "todo"


def test_update_to_in_progress_resets_the_previous_leaf() -> None:
    """Setting a task in progress by hand makes it the current one: the leaf in progress
    before goes back to todo, and so do its parents that are not shared."""
    b = Book()
    r = b.add("r")
    a, c = b.add("a", r), b.add("c", r)
    other = b.add("other")
    b.start(r)
    out = b.update(c, status="in_progress")
    assert [t.id for t in out.reset_tasks] == [a]
    assert [t.name for t in b.tasks if t.status == "in_progress"] == ["r", "c"]
    again = b.update(other, status="in_progress")
    assert [t.id for t in again.reset_tasks] == [r, c]
    assert [t.name for t in b.tasks if t.status == "in_progress"] == ["other"]
    assert b.update(other, name="renamed").reset_tasks == []


def test_update_order_collision_shifts_other_siblings() -> None:
    """A new order that is taken shifts the other siblings at or above it."""
    b = Book()
    x, y, z = b.add("x"), b.add("y"), b.add("z")
    b.update(z, order=1)
    assert [b.order(t) for t in (z, x, y)] == [1, 2, 3]


# --- deleteTask -------------------------------------------------------------------------


def test_delete_leaf() -> None:
    """A task without subtasks is deleted; the reply carries its id."""
    b = Book()
    a, c = b.add("a"), b.add("c")
    out = b.delete(a)
    assert (out.id, out.deleted_ids) == (a, [a])
    assert [t.id for t in b.tasks] == [c]


def test_delete_with_subtasks_refused_without_cascade() -> None:
    """A task with subtasks is refused (has_subtasks) unless cascade is asked for."""
    b = Book()
    r = b.add("r")
    b.add("a", r)
    with pytest.raises(ToolError) as exc:
        b.delete(r)
    assert code_of(exc) == "has_subtasks"
    assert len(b.tasks) == 2


def test_delete_cascade_removes_the_subtree_only() -> None:
    """cascade=True removes the task and every descendant, nothing else."""
    b = Book()
    r, other = b.add("r"), b.add("other")
    a = b.add("a", r)
    g = b.add("g", a)
    keep = b.add("keep", other)
    out = b.delete(r, cascade=True)
    assert set(out.deleted_ids) == {r, a, g}
    assert {t.id for t in b.tasks} == {other, keep}


def test_delete_unknown_refused() -> None:
    """Deleting an unknown id is task_not_found."""
    with pytest.raises(ToolError) as exc:
        Book().delete("nope")
    assert code_of(exc) == "task_not_found"
