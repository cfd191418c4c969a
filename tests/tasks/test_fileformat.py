"""The task file's fragments: byte-identical dumps, sound splits, reuse of known tasks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from loop.tasks.fileformat import (
    dump_tasks,
    fragment,
    join_fragments,
    reuse_fragments,
    split_fragments,
)
from loop.tasks.models import Task

TEXT = st.text(st.characters(codec="utf-8"), max_size=20)
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@st.composite
def task_lists(draw: st.DrawFn) -> list[Task]:
    """Task lists with awkward text (newlines, braces, quotes, unicode) and unset fields."""
    count = draw(st.integers(0, 6))
    return [
        Task(
            id=f"id{i}" + draw(TEXT),
            name=draw(TEXT),
            description=draw(TEXT),
            status=draw(st.sampled_from(["todo", "in_progress", "done"])),
            resolution=draw(st.none() | TEXT),
            parent_id=draw(st.none() | TEXT),
            order=draw(st.integers(-5, 10**12)),
            created_at=T0 + timedelta(microseconds=draw(st.integers(0, 10**9))),
            updated_at=T0,
        )
        for i in range(count)
    ]


@settings(max_examples=200, deadline=None)
@given(task_lists())
def test_fragments_join_to_the_exact_dump(tasks: list[Task]) -> None:
    """Joining per-task fragments gives dump_tasks' bytes; splitting gives them back."""
    raw = dump_tasks(tasks)
    parts = [fragment(t) for t in tasks]
    assert join_fragments(parts) == raw
    assert (split_fragments(raw) or []) == parts


@settings(max_examples=100, deadline=None)
@given(task_lists(), task_lists())
def test_reused_fragments_parse_like_the_whole_file(old: list[Task], new: list[Task]) -> None:
    """Tasks rebuilt from fragments (known or new) equal the tasks of the new file."""
    old_parts = [fragment(t) for t in old]
    parts = split_fragments(dump_tasks(new)) or []
    result = reuse_fragments(parts, old_parts, old)
    assert result is not None
    tasks, changed = result
    assert tasks == new
    if changed is not None:
        assert changed == sorted(changed)
        unchanged = set(range(len(new))) - set(changed)
        assert all(tasks[i] is old[i] for i in unchanged)


def test_unchanged_fragments_reuse_the_same_task_objects() -> None:
    """Only the fragment that changed is parsed again: the others are the old objects."""
    old = [
        Task(id=f"t{i}", name=f"n{i}", status="todo", order=i, created_at=T0, updated_at=T0)
        for i in range(5)
    ]
    new = list(old)
    new[2] = old[2].model_copy(update={"name": "renamed"})
    result = reuse_fragments(
        split_fragments(dump_tasks(new)) or [], [fragment(t) for t in old], old
    )
    assert result is not None
    tasks, changed = result
    assert changed == [2]
    assert tasks == new
    assert [tasks[i] is old[i] for i in range(5)] == [True, True, False, True, True]


def test_invalid_fragment_is_not_reused() -> None:
    """A fragment that is not a valid task sends the caller to the whole-file parse."""
    old = [Task(id="a", name="a", status="todo", order=1, created_at=T0, updated_at=T0)]
    parts = [fragment(old[0]).replace(b'"todo"', b'"finished"')]
    assert reuse_fragments(parts, [fragment(old[0])], old) is None


def test_files_not_in_dump_form_do_not_split() -> None:
    """Compact or hand-edited JSON is not split (it takes the whole-file path)."""
    assert split_fragments(b"[]\n") is None
    assert split_fragments(b'[{"id": "x"}]') is None
    assert split_fragments(b"[\n  {\n  }\n]\n") is None
