"""What the agent-CLI backends (``claude``, ``gemini``, ``codex``) share as backends.

Each runs one CLI process per iteration, prompt on stdin, and reads its JSON-lines
stream: the same capabilities (it stops its child at the timeout itself and keeps what
the child printed; it hands the agent's text and tool calls on as they arrive; the agent
gets hatloop's tools unless ``mcp = false``) and the same way to start the child. A
subclass names its settings and its stream reader, builds the argv and the environment
(``prepare``) and reads the result (``run``). The pure helpers are in
:mod:`loop.backends._agent`.
"""

from __future__ import annotations

from typing import ClassVar, Generic, Self, TypeVar

from loop.backends._process import ProcessResult, run_process
from loop.backends.base import Backend, BackendRequest, OutputReader
from loop.config.backends import AgentCliConfig

__all__ = ["AgentCliBackend"]

ConfigT = TypeVar("ConfigT", bound=AgentCliConfig)


class AgentCliBackend(Backend, Generic[ConfigT]):
    """A backend that runs an agent CLI once per iteration."""

    own_timeout = True  # run_process stops the CLI at the timeout and keeps its output
    watches_output = True  # the agent's text and tool calls, as they arrive
    # An agent told to stop may go on acting: Claude Code with an MCP server, sent
    # SIGTERM, sends its tool's result to the model and runs the next tool for as long
    # as the grace lasts. Its iteration is over: nothing of it may act any more.
    stop_grace_seconds = 0.0
    reader: ClassVar[type[OutputReader]] = OutputReader  # how its stdout is read for -v

    def __init__(self, config: ConfigT) -> None:
        self.config = config
        self.timeout_seconds = config.timeout_seconds
        self.uses_loop_tools = config.mcp  # the agent gets hatloop's tools unless mcp = false

    @classmethod
    def from_config(cls, config: ConfigT) -> Self:
        """Build from TOML settings."""
        return cls(config)

    def output_reader(self) -> OutputReader:
        """A reader of one run's stdout (:attr:`reader`)."""
        return self.reader()

    async def run_cli(
        self,
        request: BackendRequest,
        argv: list[str],
        env: dict[str, str],
        *,
        timeout: float | None,
        output_files: bool = False,
    ) -> ProcessResult:
        """Run the CLI once with the prompt on stdin, its output watched.

        Raises:
            BackendUnavailable: the CLI program is missing or not executable.
        """
        return await run_process(
            argv,
            stdin=request.prompt.encode("utf-8"),
            env=env,
            cwd=request.workdir,
            timeout=timeout,
            max_output_bytes=self.config.max_output_bytes,
            output_files=output_files,
            watch=self.watch(request),
            on_start=request.on_child,
            stop_grace=self.stop_grace_seconds,
        )
