"""Which signals stop a command gracefully (``loop._signals``)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from loop._signals import stop_signals


@pytest.fixture
def sighup() -> Iterator[None]:
    """Put this process's SIGHUP action back after the test."""
    saved = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, saved)


def _own_handler(signum: int, frame: Any) -> None:
    """A program's own SIGHUP handler (reloading its settings, say)."""


@pytest.mark.usefixtures("sighup")
@pytest.mark.parametrize(
    ("action", "hup"),
    [(signal.SIG_DFL, True), (signal.SIG_IGN, False), (_own_handler, False)],
    ids=["default", "ignored-nohup", "the-program's-own"],
)
def test_sighup_stops_only_where_it_would_kill(action: Any, hup: bool) -> None:
    """SIGINT and SIGTERM always; SIGHUP only while its action is the default (to die):
    not under nohup, nor in a program that handles it itself."""
    signal.signal(signal.SIGHUP, action)
    stops = stop_signals()
    assert stops[:2] == (signal.SIGINT, signal.SIGTERM)
    assert (signal.SIGHUP in stops) is hup
