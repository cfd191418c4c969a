"""Shared task indexes: an operation's forest over an index behaves like a fresh one."""

from __future__ import annotations

from hypothesis import given, settings

from loop.tasks.index import TaskIndex, TaskList, build_index, index_of
from loop.tasks.models import Task
from loop.tasks.summary import hierarchy_table, next_task, progress_summary
from loop.tasks.tree import Forest
from tests.tasks._book import Book
from tests.tasks.test_properties import OPS, apply


def same_index(got: TaskIndex, tasks: list[Task]) -> None:
    """``got`` indexes ``tasks`` exactly as a fresh build would."""
    fresh = build_index(tasks)
    assert list(got.tasks) == tasks
    assert got.by_id == fresh.by_id
    assert [got.pos[t.id] for t in tasks] == list(range(len(tasks)))
    assert {p: set(k) for p, k in got.children.items() if k} == {
        p: set(k) for p, k in fresh.children.items()
    }
    assert got.counts == fresh.counts
    for parent in [None, *(t.id for t in tasks)]:
        assert list(got.kids(parent)) == list(fresh.kids(parent))


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_operations_over_a_shared_index_match_fresh_ones(
    ops: list[tuple[str, int, int, int]],
) -> None:
    """Chained operations (each reusing the last index) give what plain lists give."""
    chained, plain = Book(), Book()
    for op in ops:
        apply(chained, op)
        plain.tasks = list(plain.tasks)  # a plain list: its forest builds a fresh index
        apply(plain, op)
        assert chained.tasks == plain.tasks
        carried = getattr(chained.tasks, "tree_index", None)
        if carried is not None:  # set once any operation has returned a list
            same_index(carried, list(chained.tasks))
        shared, fresh = Forest(chained.tasks), Forest(list(plain.tasks))
        assert progress_summary(shared) == progress_summary(fresh)
        assert next_task(shared) == next_task(fresh)
        for task in plain.tasks:
            assert hierarchy_table(shared, task.id) == hierarchy_table(fresh, task.id)


def test_a_changed_task_list_gets_a_fresh_index() -> None:
    """A TaskList whose contents no longer match its index is indexed again."""
    b = Book()
    r = b.add("root")
    b.add("child", r)
    tasks = b.tasks
    assert isinstance(tasks, TaskList)
    stale = tasks.tree_index
    tasks[1] = tasks[1].model_copy(update={"name": "renamed"})
    index = index_of(tasks)
    assert index is not stale
    assert index.by_id[tasks[1].id].name == "renamed"


def test_forest_changes_after_tasks_leave_the_returned_list_alone() -> None:
    """Changing a forest after tasks() never alters the index handed out with the list."""
    b = Book()
    r = b.add("root")
    c = b.add("child", r)
    forest = Forest(b.tasks)
    forest.set(c, name="first")
    first = forest.tasks()
    forest.set(c, name="second")
    forest.remove(c)
    assert first.tree_index is not None
    same_index(first.tree_index, list(first))
    assert first.tree_index.by_id[c].name == "first"
    assert [t.name for t in first.tree_index.kids(r)] == ["first"]
