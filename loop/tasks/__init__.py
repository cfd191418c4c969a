"""Hierarchical tasks with ordered execution and progress: the task domain.

Layers, from the inside out:

* :mod:`loop.tasks.models`: the ``Task`` model and the seven tools' inputs and outputs;
* :mod:`loop.tasks.index`, :mod:`loop.tasks.tree`, :mod:`loop.tasks.operations`,
  :mod:`loop.tasks.execution`, :mod:`loop.tasks.summary`: pure decisions over a task
  list (no I/O, no clock), on indexes shared between operations;
* :mod:`loop.tasks.store`: the ``Task[]`` JSON file (locked, atomic) or memory;
* :mod:`loop.tasks.tools`: ``TOOLS``, served by the CLI, the MCP server and the bus,
  and ``BUS``, how hats request them with ``task.*`` events;
* :mod:`loop.tasks.extension`: progress after changes, the prompt section, the
  completion guard. The ``task`` command is :mod:`loop.commands.task`.
"""
