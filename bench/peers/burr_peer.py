"""burr: two actions with transitions between them; local tracker or SQLite persister."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from burr.core import ApplicationBuilder, State, action, default, expr
from burr.core.persistence import SQLitePersister

from bench.stats import Stamps

_stamps = Stamps()


@action(reads=["n"], writes=["n"])
def ping(state: State) -> State:
    """One ping transition."""
    _stamps.hit()
    return state.update(n=state["n"] + 1)


@action(reads=["n"], writes=["n"])
def pong(state: State) -> State:
    """One pong transition."""
    _stamps.hit()
    return state.update(n=state["n"] + 1)


@action(reads=[], writes=[])
def done(state: State) -> State:
    """The end."""
    return state


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Run the ping-pong bare, with the local tracker, or with the SQLite persister."""
    global _stamps  # noqa: PLW0603 - the actions are module-level functions
    n = int(params["n"])
    mode = params["mode"]
    _stamps = Stamps()
    with tempfile.TemporaryDirectory(prefix="bench-burr-") as tmp:
        builder = (
            ApplicationBuilder()
            .with_actions(ping=ping, pong=pong, done=done)
            .with_transitions(
                ("ping", "done", expr(f"n >= {n}")),
                ("ping", "pong", default),
                ("pong", "done", expr(f"n >= {n}")),
                ("pong", "ping", default),
            )
            .with_state(n=0)
            .with_entrypoint("ping")
        )
        persister = None
        if mode == "tracker":
            builder = builder.with_tracker(
                "local", project="bench", params={"storage_dir": str(Path(tmp) / "burr")}
            )
        elif mode == "sqlite":
            persister = SQLitePersister(db_path=str(Path(tmp) / "state.db"))
            persister.initialize()
            builder = builder.with_state_persister(persister).with_identifiers(app_id="bench")
        app = builder.build()
        app.run(halt_after=["done"])
        if persister is not None:
            persister.connection.close()
    return _stamps.result()
