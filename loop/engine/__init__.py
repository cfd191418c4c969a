"""The engine: one session's loop, as pure decisions and a thin async driver.

It owns the loop's rules (when the loop stops, what an iteration's outcome is; which hat
an event goes to is :mod:`loop.routing`'s, below the config, so that the config
reasons with the same rule) and the journal that makes a session durable and resumable. It imports
config and backends, never the session tools, the domains or the commands.

* :mod:`loop.engine.decide`, :mod:`~loop.engine.state`: pure code: limits and
  termination, the reducer over journal records;
* :mod:`loop.engine.prompt`, :mod:`~loop.engine.collect`, :mod:`~loop.engine.records`:
  pure code: a hat's prompt, the events an iteration produced, the records to write;
* :mod:`loop.engine.driver`: the async driver that runs those decisions;
* :mod:`loop.engine.invoke`: calling a backend (environment, emit file, timeout);
* :mod:`loop.engine.journal`, :mod:`~loop.engine.session_dir`: the journal file and
  the session's folder (layout, run lock, latest pointer);
* :mod:`loop.engine.lifecycle`: the loop's own events on the bus;
* :mod:`loop.engine.progress`: progress on stderr and the closing summary.
"""
