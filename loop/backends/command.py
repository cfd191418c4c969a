"""The command backend: any CLI, with the prompt on stdin, as an argument or in a file.

The child gets ``LOOP_EVENTS_FILE``, ``LOOP_SESSION_ID``, ``LOOP_ITERATION`` and
``LOOP_HAT`` (and the tool settings) in its environment, so it can run
``python -m loop emit``. A non-zero exit or a timeout is a failed iteration with the
reason recorded; the child's whole process group is killed on timeout or cancel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop._fs import open_file, write_all
from loop.backends._process import last_line, run_process, stop_reason
from loop.backends.base import Backend, BackendRequest, BackendResult, child_env, effective_timeout
from loop.config.backends import DEFAULT_MAX_OUTPUT, CommandConfig

__all__ = ["CommandBackend", "build_argv"]

PROMPT_PLACEHOLDER = "{prompt}"
PROMPT_FILE_PLACEHOLDER = "{prompt_file}"


def build_argv(
    command: Sequence[str], prompt_via: str, prompt: str, prompt_file: Path | None
) -> tuple[list[str], bytes | None]:
    """The argv and stdin for one run (pure; placeholders replaced or appended)."""
    argv = list(command)
    if prompt_via == "stdin":
        return argv, prompt.encode("utf-8")
    if prompt_via == "arg":
        if PROMPT_PLACEHOLDER in argv:
            return [prompt if a == PROMPT_PLACEHOLDER else a for a in argv], None
        return [*argv, prompt], None
    assert prompt_file is not None
    if PROMPT_FILE_PLACEHOLDER in argv:
        return [str(prompt_file) if a == PROMPT_FILE_PLACEHOLDER else a for a in argv], None
    return [*argv, str(prompt_file)], None


class CommandBackend(Backend):
    """Runs a CLI once per iteration."""

    kind = "command"
    own_timeout = True  # run_process stops the child at the timeout and keeps its output
    watches_output = True  # its stdout lines, as they arrive (-v); idle_timeout_seconds

    def __init__(
        self,
        command: Sequence[str],
        *,
        prompt_via: str = "stdin",
        env: dict[str, str] | None = None,
        timeout_seconds: float | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
    ) -> None:
        self.command = list(command)
        self.prompt_via = prompt_via
        self.env = dict(env or {})
        self.timeout_seconds = timeout_seconds
        self.max_output_bytes = max_output_bytes

    @classmethod
    def from_config(cls, config: CommandConfig) -> CommandBackend:
        """Build from TOML settings."""
        return cls(
            config.command,
            prompt_via=config.prompt_via,
            env=config.env,
            timeout_seconds=config.timeout_seconds,
            max_output_bytes=config.max_output_bytes,
        )

    async def run(self, request: BackendRequest) -> BackendResult:
        """Run the command; exit 0 is success, anything else a failure with its reason."""
        prompt_file = None
        if self.prompt_via == "file":  # a new file in the attempt's folder, never a link
            prompt_file = request.iteration_dir / "prompt.md"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            fd = open_file(prompt_file, flags, root=request.root, create_folders=True)
            try:
                write_all(fd, request.prompt.encode("utf-8"))
            finally:
                os.close(fd)
        argv, stdin = build_argv(self.command, self.prompt_via, request.prompt, prompt_file)
        timeout = effective_timeout(self.timeout_seconds, request.timeout_seconds)
        proc = await run_process(
            argv,
            stdin=stdin,
            env=child_env(request, self.env),
            cwd=request.workdir,
            timeout=timeout,
            max_output_bytes=self.max_output_bytes,
            watch=self.watch(request),
            on_start=request.on_child,
            stop_grace=self.stop_grace_seconds,
        )
        output = proc.stdout.decode("utf-8", errors="replace")
        meta: dict[str, Any] = {"stderr_tail": last_line(proc.stderr)} if proc.stderr else {}
        if proc.truncated:
            meta["truncated"] = True
        if (stopped := stop_reason(proc, timeout)) is not None:
            res = BackendResult.failed(stopped, output=output, exit_code=proc.returncode)
        elif proc.returncode != 0:
            why = f"exit status {proc.returncode}"
            if proc.stderr:
                why += f": {last_line(proc.stderr)}"
            res = BackendResult.failed(why, output=output, exit_code=proc.returncode)
        else:
            res = BackendResult(output=output, exit_code=0)
        res.meta.update(meta)
        return res
