"""The one in-progress leaf and the next task (pure rules in loop.tasks.focus)."""

from __future__ import annotations

from loop.tasks.focus import (
    active_path,
    chain_through,
    first_open_path,
    in_progress,
    make_current,
    next_task,
)
from loop.tasks.models import Task
from loop.tasks.tree import Forest
from tests.tasks._book import T0, Book


def _tree() -> tuple[Book, dict[str, str]]:
    """r > (a > (a1, a2), b); s."""
    b = Book()
    ids = {"r": b.add("r")}
    ids["a"] = b.add("a", ids["r"])
    ids["b"] = b.add("b", ids["r"])
    ids["a1"] = b.add("a1", ids["a"])
    ids["a2"] = b.add("a2", ids["a"])
    ids["s"] = b.add("s")
    return b, ids


def _names(tasks: list[Task]) -> list[str]:
    return [t.name for t in tasks]


def test_first_open_path_takes_the_first_unfinished_subtask_at_each_level() -> None:
    """From the roots: r, its first unfinished subtask a, then a1; done tasks are skipped."""
    b, ids = _tree()
    forest = Forest(b.tasks)
    assert _names(first_open_path(forest, None)) == ["r", "a", "a1"]
    assert _names(first_open_path(forest, ids["b"])) == []
    b.complete(ids["a1"])
    assert _names(first_open_path(Forest(b.tasks), ids["r"])) == ["a", "a2"]


def test_next_task_is_a_leaf_never_a_parent_with_open_subtasks() -> None:
    """Nothing started: the next task is a1, not r (startTask on a1 is accepted)."""
    b, ids = _tree()
    assert next_task(Forest(b.tasks)) == b.get(ids["a1"])
    b.start(ids["a1"])
    assert next_task(Forest(b.tasks)) == b.get(ids["a1"])  # the in-progress one counts


def test_next_task_skips_done_trees_and_ends_with_none() -> None:
    """After r's tree the next task is s; with everything done there is none."""
    b, ids = _tree()
    for name in ("a1", "a2", "b"):
        b.complete(ids[name])
    assert b.status(ids["r"]) == "done"
    assert next_task(Forest(b.tasks)) == b.get(ids["s"])
    b.complete(ids["s"])
    assert next_task(Forest(b.tasks)) is None


def test_next_task_may_be_a_parent_whose_subtasks_are_all_done() -> None:
    """A reopened parent whose subtasks are done is next: it is left to complete."""
    b, ids = _tree()
    for name in ("a1", "a2"):
        b.complete(ids[name])
    b.update(ids["a"], status="todo")
    assert next_task(Forest(b.tasks)) == b.get(ids["a"])


def test_in_progress_follows_chains_and_falls_back_for_hand_edited_lists() -> None:
    """In-progress tasks are found in execution order, even under a todo parent."""
    b, ids = _tree()
    b.start(ids["r"])
    assert _names(in_progress(Forest(b.tasks))) == ["r", "a", "a1"]
    # An in-progress task under a todo parent (a file edited by hand) is found too.
    b.tasks = [
        t.model_copy(update={"status": "in_progress"}) if t.id == ids["a2"] else t for t in b.tasks
    ]
    b.tasks = [t.model_copy(update={"status": "todo"}) if t.id == ids["a"] else t for t in b.tasks]
    assert _names(in_progress(Forest(b.tasks))) == ["r", "a1", "a2"]


def test_make_current_resets_every_other_in_progress_task() -> None:
    """Keeping s's chain resets r, a and a1 to todo and returns them in order."""
    b, ids = _tree()
    b.start(ids["r"])
    forest = Forest(b.tasks)
    forest.set(ids["s"], status="in_progress")
    reset = make_current(forest, chain_through(forest, ids["s"]), now=T0)
    assert _names(reset) == ["r", "a", "a1"]
    assert all(t.status == "todo" and t.updated_at == T0 for t in reset)
    assert _names(in_progress(forest)) == ["s"]


def test_chain_through_keeps_ancestors_and_in_progress_subtasks() -> None:
    """For a: its parent r, itself and its in-progress subtask a1 (not the todo a2)."""
    b, ids = _tree()
    b.start(ids["r"])
    assert chain_through(Forest(b.tasks), ids["a"]) == {ids["r"], ids["a"], ids["a1"]}


def test_active_path_is_the_chain_from_the_root() -> None:
    """The active path runs from the in-progress root down to the current task."""
    b, ids = _tree()
    assert active_path(Forest(b.tasks)) == []
    b.start(ids["r"])
    assert _names(active_path(Forest(b.tasks))) == ["r", "a", "a1"]
