"""The scripted backend: canned outputs, one per activation of the hat.

Deterministic and instant: the default preset runs on it, and so do tests. The
output for a hat's n-th activation is ``outputs[n]``; the activation number comes
from the session journal, so a resumed session carries on where it was. Running
past the end is a failed iteration that says so, or, with ``repeat_last``, the last
output again (a stand-in answers every activation).
"""

from __future__ import annotations

import json
from pathlib import Path

from loop.backends.base import Backend, BackendRequest, BackendResult
from loop.config.backends import ScriptedConfig
from loop.errors import ConfigError

__all__ = ["ScriptedBackend"]


class ScriptedBackend(Backend):
    """Serves ``outputs`` in order, indexed by the hat's activation count."""

    kind = "scripted"
    uses_files = False  # no child process: no events folder to prepare
    instant = True  # awaits nothing
    writes_events = False  # its outputs are its only channel: no events file to read

    def __init__(self, outputs: list[str], *, repeat_last: bool = False) -> None:
        self.outputs = list(outputs)
        self.repeat_last = repeat_last

    @classmethod
    def from_config(cls, config: ScriptedConfig) -> ScriptedBackend:
        """Build from TOML settings; ``outputs_file`` holds a JSON list of strings."""
        outputs = list(config.outputs)
        if config.outputs_file:
            path = Path(config.outputs_file)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ConfigError(f"cannot read scripted outputs: {exc}", file=path) from exc
            if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
                raise ConfigError(
                    "scripted outputs file must hold a JSON list of strings", file=path
                )
            outputs.extend(data)
        return cls(outputs, repeat_last=config.repeat_last)

    async def run(self, request: BackendRequest) -> BackendResult:
        """Return the output for this activation, or past the end the last one again
        (``repeat_last``) or a failure."""
        index = request.activation
        if index >= len(self.outputs) and self.repeat_last and self.outputs:
            index = len(self.outputs) - 1
        if index >= len(self.outputs):
            return BackendResult.failed(
                f"scripted outputs exhausted: hat {request.hat!r} has {len(self.outputs)} "
                f"output(s), activation {index + 1} asked for one more"
            )
        return BackendResult(output=self.outputs[index])
