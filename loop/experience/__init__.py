"""The experience domain: export, list and validate AI experiences.

An experience is a folder ``experience_<session_id>/`` under the configured base:
``manifest.json``, ``conversations_NNN.json`` batches and ``thoughts.json``. There is
no export manager: every tool derives the export's state from those files.

Modules: ``tools`` (the registered tools), ``export`` (the write tools), ``validation``,
``listing``, ``schemas`` (file formats), ``models`` (tool I/O), ``layout`` (paths, ids,
limits, status), ``guides`` (agent guides, en/ja), ``session_export`` and ``journal``
(a loop session becomes an experience). ``BUS`` in ``tools`` is how hats request them
with ``experience.*`` events; the ``experience`` command is :mod:`loop.commands.experience`.
"""
