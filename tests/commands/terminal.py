"""The real CLI on a pseudo-terminal: what a person at a terminal sees, byte for byte."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

__all__ = ["Terminal"]

ROWS, COLUMNS = 40, 200  # wide: the status line is never cut to fit
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


class Terminal:
    """``python -m loop ARGS`` with stdin, stdout and stderr on one pseudo-terminal.

    :meth:`expect` reads until a pattern shows (or fails after ``timeout`` seconds);
    :meth:`finish` reads to the end and returns the exit code. ``screen`` holds every
    byte read so far.
    """

    def __init__(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loop", *args],
            cwd=cwd,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,  # the terminal is its controlling terminal
        )
        os.close(slave)
        self.master = master
        self.screen = b""

    def _read(self, until: float) -> bool:
        """Read what is there (waiting until ``until``); False at the end of the output."""
        ready, _, _ = select.select([self.master], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            return False
        self.screen += data
        return bool(data)

    def expect(self, pattern: str, timeout: float = 60) -> None:
        """Read until ``pattern`` (a regular expression) shows in :attr:`plain`."""
        regex = re.compile(pattern)
        until = time.monotonic() + timeout
        while not regex.search(self.plain):
            if time.monotonic() > until or not self._read(until):
                raise AssertionError(f"{pattern!r} never showed; the screen ends:\n{self.tail}")

    def finish(self, timeout: float = 120) -> int:
        """Read to the end of the output; the exit code."""
        until = time.monotonic() + timeout
        while self._read(until):
            if time.monotonic() > until:
                self.proc.kill()
                raise AssertionError(f"running after {timeout}s; the screen ends:\n{self.tail}")
        os.close(self.master)
        return self.proc.wait(timeout=timeout)

    @property
    def text(self) -> str:
        """The screen's bytes as text."""
        return self.screen.decode("utf-8", errors="replace")

    @property
    def plain(self) -> str:
        """:attr:`text` without its escape sequences (colours, cursor moves)."""
        return _ESCAPES.sub("", self.text)

    @property
    def tail(self) -> str:
        """The end of :attr:`plain`, for a failure's message."""
        return self.plain[-3000:]
