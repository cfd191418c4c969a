"""``python -m loop``: the command line (``hatloop`` is the same entry point).

``emit`` is dispatched before anything heavy is imported: agents call it often.
"""

from __future__ import annotations

import signal
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code.

    Called as the process's entry (``argv`` None), a Ctrl-C that comes once the command
    has ended (a second one, while the first one's exit was under way) changes nothing:
    the exit code is the command's (130 for the first Ctrl-C), never a death by SIGINT.
    """
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "emit":
        from loop.emit import main as emit_main  # noqa: PLC0415 - the light path

        code = emit_main(args[1:])
    else:
        from loop.cli import main as cli_main  # noqa: PLC0415 - the full CLI, imported on use

        code = cli_main(args)
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    sys.exit(main())
