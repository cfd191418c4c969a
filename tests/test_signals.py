"""Which signals stop a command gracefully (``loop._signals``)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import loop.__main__ as entry
from loop import _signals
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


def test_a_stop_signal_while_the_early_handlers_are_set_is_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGTERM that comes while the command sets its early handlers (SIGTERM's taken,
    SIGHUP's not yet) is ``error: interrupted``, exit 130, as one a moment later is: the
    KeyboardInterrupt it raises there is caught, not a traceback and a death."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    real = signal.signal

    def arrives_while_set(signum: int, handler: Any) -> Any:
        before = real(signum, handler)
        if handler is _signals.early_stop:
            handler(signal.SIGTERM, None)  # the signal comes now, as in a loaded machine
        return before

    monkeypatch.setattr(sys, "argv", ["loop", "task", "list"])
    monkeypatch.setattr(_signals.signal, "signal", arrives_while_set)
    try:
        assert entry.main() == 130
    finally:
        for signum, action in saved.items():
            real(signum, action)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: interrupted"
