"""``python -m loop``: the command line (``hatloop`` is the same entry point).

``emit`` is dispatched before anything heavy is imported: agents call it often.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "emit":
        from loop.emit import main as emit_main  # noqa: PLC0415 - the light path

        return emit_main(args[1:])
    from loop.cli import main as cli_main  # noqa: PLC0415 - the full CLI, imported on use

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
