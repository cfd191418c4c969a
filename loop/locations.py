"""Where hatloop's state lives by default, and the variables that tell a child where it is.

The defaults are relative to the folder a loop runs in (``[loop] sessions_dir``,
``[tasks] file``, ``[themes] workspace`` and ``[experience] base_directory`` change
them). A child process of an iteration (an agent, ``python -m loop emit``, the stdio
MCP server) finds the session and the tools' files through the ``ENV_*`` variables.
This module imports nothing: the light ``emit`` command reads it too.

>>> DEFAULT_SESSIONS_DIR, ENV_EVENTS_FILE
('.loop/sessions', 'LOOP_EVENTS_FILE')
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_EXPERIENCES_DIR",
    "DEFAULT_SESSIONS_DIR",
    "DEFAULT_TASKS_FILE",
    "DEFAULT_WORKSPACE",
    "ENV_ATTEMPT",
    "ENV_EVENTS_FILE",
    "ENV_EXPERIENCES_DIR",
    "ENV_HAT",
    "ENV_ITERATION",
    "ENV_ITERATION_DIR",
    "ENV_MCP_TOKEN",
    "ENV_MCP_URL",
    "ENV_PYTHON",
    "ENV_RUN_ID",
    "ENV_SESSION_DIR",
    "ENV_SESSION_ID",
    "ENV_TASKS_FILE",
    "ENV_WORKSPACE",
    "TOOL_SERVER_VARIABLES",
]

# Default locations, relative to the loop's folder.
DEFAULT_SESSIONS_DIR = ".loop/sessions"
DEFAULT_TASKS_FILE = ".loop/tasks.json"
DEFAULT_WORKSPACE = ".loop/works"
DEFAULT_EXPERIENCES_DIR = ".loop/experiences"

# The variables of an iteration's child processes.
ENV_EVENTS_FILE = "LOOP_EVENTS_FILE"  # the iteration's events file (emit appends to it)
ENV_SESSION_ID = "LOOP_SESSION_ID"
ENV_ITERATION = "LOOP_ITERATION"
ENV_ITERATION_DIR = "LOOP_ITERATION_DIR"  # the attempt's own folder (the events file's)
ENV_ATTEMPT = "LOOP_ATTEMPT"  # which run of the iteration (1, unless a crash stopped one)
# the run that started the child: its tool calls are made only while that run holds the
# session (the run writes it into the session's lock)
ENV_RUN_ID = "LOOP_RUN_ID"
ENV_HAT = "LOOP_HAT"
ENV_SESSION_DIR = "LOOP_SESSION_DIR"
ENV_PYTHON = "LOOP_PYTHON"  # the interpreter running the loop
ENV_TASKS_FILE = "FILE_PATH"  # the name the task tools' specification gives it
ENV_WORKSPACE = "LOOP_WORKSPACE"
ENV_EXPERIENCES_DIR = "LOOP_EXPERIENCES_DIR"
ENV_MCP_URL = "LOOP_MCP_URL"  # the session's MCP endpoint
ENV_MCP_TOKEN = "LOOP_MCP_TOKEN"  # the variable's name; the iteration's secret is its value

# What hatloop's stdio MCP server needs to find the session's files (passed when known).
TOOL_SERVER_VARIABLES = (
    ENV_EVENTS_FILE,
    ENV_ITERATION_DIR,
    ENV_SESSION_ID,
    ENV_ITERATION,
    ENV_ATTEMPT,
    ENV_HAT,
    ENV_SESSION_DIR,
    ENV_RUN_ID,
    ENV_TASKS_FILE,
    ENV_WORKSPACE,
    ENV_EXPERIENCES_DIR,
)
