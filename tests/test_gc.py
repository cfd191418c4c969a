"""The collector paused while a reader builds data that lives on (loop._gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from loop._gc import collector_paused
from loop.errors import RecordingError
from loop.session.reader import RecordingReader


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does, the collector runs again after it."""
    yield
    gc.enable()


def test_paused_in_the_block_and_running_again_after(collector: None) -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_in_the_block_restarts_it(collector: None) -> None:
    gc.enable()
    with pytest.raises(ValueError, match="boom"), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused(collector: None) -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_a_reader_leaves_the_collector_running_even_on_a_bad_recording(
    collector: None, tmp_path: Path
) -> None:
    gc.enable()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "iteration"}\n', encoding="utf-8")
    with pytest.raises(RecordingError):
        RecordingReader(bad)
    assert gc.isenabled()
