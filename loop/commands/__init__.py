"""CLI commands, one module per command group (each has ``register``).

The top of the layers: a command parses, calls, renders and returns an exit code
(:mod:`loop.cli` assembles them). A tool command (``task``, ``theme``, ``experience``)
imports its own domain only, so it starts fast; :mod:`loop.commands.tools` turns a
domain's ``TOOLS`` into subcommands.
"""
