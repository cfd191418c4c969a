"""A stand-in for the Claude Code CLI that first hits a usage limit, then answers.

It prints the stream-json lines Claude Code prints when a subscription's usage window
refuses a request (a ``rate_limit_event`` with ``status: rejected`` and ``resetsAt``,
then an error ``result`` with ``api_error_status`` 429), and on later calls a result
that completes the loop. ``LIMITED_STATE`` names a folder: ``calls`` counts the calls,
``started-N`` holds when call N started (seconds since the epoch). ``LIMITED_RESET_IN``:
how far ahead the reset is (seconds).
"""

import json
import os
import sys
import time
from pathlib import Path

state = Path(os.environ["LIMITED_STATE"])
state.mkdir(parents=True, exist_ok=True)
calls_file = state / "calls"
calls = int(calls_file.read_text()) + 1 if calls_file.exists() else 1
calls_file.write_text(str(calls))
(state / f"started-{calls}").write_text(repr(time.time()))
sys.stdin.read()


def line(**item: object) -> None:
    print(json.dumps(item), flush=True)


line(type="system", subtype="init", session_id="fake", mcp_servers=[])
if calls == 1:
    reset = int(time.time() + float(os.environ.get("LIMITED_RESET_IN", "3")))
    info = {"status": "rejected", "resetsAt": reset, "rateLimitType": "five_hour"}
    line(type="rate_limit_event", rate_limit_info=info, session_id="fake")
    line(
        type="result",
        subtype="success",
        is_error=True,
        api_error_status=429,
        result="API Error: Request rejected (429) · You've hit your session limit",
        total_cost_usd=0,
        session_id="fake",
    )
    sys.exit(1)
line(
    type="result",
    subtype="success",
    is_error=False,
    result='done <event topic="LOOP_COMPLETE">after the wait</event>',
    total_cost_usd=0.01,
    usage={"input_tokens": 10, "output_tokens": 5},
    num_turns=1,
    session_id="fake",
)
