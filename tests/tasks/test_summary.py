"""Progress tables, the next task and the active path."""

from __future__ import annotations

import pytest

from loop.tasks import summary
from loop.tasks.summary import active_path, hierarchy_table, next_task, progress_summary
from loop.tasks.tree import Forest
from tests.tasks._book import Book


def test_empty_summary() -> None:
    """No tasks: zero counts, 0%, a table with only its header."""
    s = progress_summary(Forest([]))
    assert (s.total_tasks, s.completion_percentage) == (0, 0)
    assert s.table.count("\n") == 1


def test_leaf_progress_is_all_or_nothing_in_hierarchy() -> None:
    """In the hierarchy table a leaf shows '-' subtasks and 0% or 100%."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    b.add("c", r)
    b.complete(a)
    lines = hierarchy_table(Forest(b.tasks), r).splitlines()
    assert lines[2:] == [
        "| r | todo | 1/2 | 50% |",
        "| └ a | done | - | 100% |",
        "| └ c | todo | - | 0% |",
    ]


def test_table_cells_escape_pipes_and_newlines() -> None:
    """A name with | or a newline cannot break the Markdown table."""
    b = Book()
    r = b.add("a|b\nc")
    b.add("x", r)
    row = progress_summary(Forest(b.tasks)).table.splitlines()[2]
    assert row == "| a\\|b c | todo | 0/1 | 0% |"


def test_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_ROWS the table stops and says how many rows were left out."""
    b = Book()
    roots = [b.add(f"r{i}") for i in range(5)]
    for r in roots:
        b.add("x", r)
    monkeypatch.setattr(summary, "MAX_ROWS", 2)
    table = progress_summary(Forest(b.tasks)).table
    assert table.count("| r") == 2
    assert table.endswith("… 3 more parent tasks not shown")


def test_next_task_is_first_unfinished_leaf_in_execution_order() -> None:
    """next_task walks depth first by order, skips done subtrees and names a leaf; the
    in-progress leaf counts."""
    b = Book()
    r1, r2 = b.add("r1"), b.add("r2")
    x = b.add("x", r1)
    y = b.add("y", r1)
    assert next_task(Forest(b.tasks)) == b.get(x)  # not r1, which was never started
    b.start(r1)
    assert next_task(Forest(b.tasks)) == b.get(x)  # in progress, still next
    b.complete(x)
    assert next_task(Forest(b.tasks)) == b.get(y)
    b.complete(y)
    assert next_task(Forest(b.tasks)) == b.get(r2)


def test_next_task_offers_in_progress_parent_with_all_subtasks_done() -> None:
    """An in-progress task whose subtasks are all done is next (to be completed)."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    b.update(a, status="done")
    b.update(r, status="in_progress")
    assert next_task(Forest(b.tasks)) == b.get(r)


def test_active_path_follows_in_progress_chain() -> None:
    """The active path is the in-progress chain from the root to the deepest task."""
    b = Book()
    r = b.add("r")
    a = b.add("a", r)
    a1 = b.add("a1", a)
    assert active_path(Forest(b.tasks)) == []
    b.start(r)
    assert [t.id for t in active_path(Forest(b.tasks))] == [r, a, a1]
