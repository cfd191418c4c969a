"""Sessions after (or beside) the run: recordings, the stored sessions, one typed view.

It owns everything that reads a session back: the recording format and its writer
(the :class:`~loop.session.recorder.Recorder` extension; secrets are kept out by
:mod:`loop.redact`, as they are out of the journal), the streaming reader, the list
and status of the sessions on disk, and the view ``show``, ``events`` and ``report``
work on. It imports the engine (the journal's records and folder), never the domains.

* :mod:`loop.session.recording`, :mod:`~loop.session.recorder`, :mod:`~loop.session.reader`:
  the recording's format (with its JSON Schema), its writer and its reader;
* :mod:`loop.session.discover`: which ``.jsonl`` files of a folder are recordings (one
  rule for ``replay DIR`` and the pytest plugin);
* :mod:`loop.session.store`: session ids, the list of sessions, each one's status;
* :mod:`loop.session.view`, :mod:`~loop.session.load`: a journal or a recording as one
  typed :class:`~loop.session.view.SessionView`;
* :mod:`loop.session.tools`: ``emit_event`` and ``get_session_status`` for agents.
"""
