"""``python -m loop``: the command line (``hatloop`` is the same entry point).

``emit`` is dispatched before anything heavy is imported: agents call it often.
"""

from __future__ import annotations

import signal
import sys

from loop._signals import early_signals, take_early
from loop.exits import EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code.

    Called as the process's entry (``argv`` None), a SIGTERM or a SIGHUP that comes
    while the command starts (its modules still being imported, before it takes the
    signals it handles) stops it as a Ctrl-C does: ``error: interrupted``, exit 130, not
    a silent death by the signal. A stop signal that comes once the command has ended (a
    second one, while the first one's exit was under way) changes nothing: the exit code
    is the command's (130 for the first), never a death by the signal.
    """
    args = sys.argv[1:] if argv is None else argv
    taken: list[signal.Signals] = []
    if args and args[0] == "emit":
        from loop.emit import main as emit_main  # noqa: PLC0415 - the light path

        code = emit_main(args[1:])
    else:
        if argv is None:
            taken = early_signals()
        try:  # a signal may come as soon as the first of them is taken
            take_early(taken)
            from loop.cli import main as cli_main  # noqa: PLC0415 - the full CLI, on use

            code = cli_main(args)
        except KeyboardInterrupt:  # before the CLI could catch it: while it was imported
            print("error: interrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
    if argv is None:
        for signum in (signal.SIGINT, *taken):
            signal.signal(signum, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
