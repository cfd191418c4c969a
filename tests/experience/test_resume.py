"""An export killed with SIGKILL after batch 2 resumes from get_export_status (seed 000)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from loop.tools.base import ToolContext
from tests.experience.helpers import SUMMARY, call, conversations

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import structlog
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    from loop.experience.tools import TOOLS
    from loop.tools.base import ToolContext

    tools = {t.name: t for t in TOOLS}
    ctx = ToolContext(root=Path(sys.argv[1]), experiences_base=Path("exp"))
    summary = json.loads(sys.argv[2])
    tools["export_experience_init"].run(ctx, {"session_id": "killed", "summary": summary})
    for n in (1, 2):
        batch = [{"user_input": f"b{n}q{i}", "ai_response": "a", "reasoning": "r"}
                 for i in range(50)]
        tools["export_experience_conversations"].run(
            ctx, {"session_id": "killed", "batch_number": n, "conversations_batch": batch})
    print("batch 2 written", flush=True)
    sys.stdin.read()  # wait to be killed
    """
)


def _batch(n: int) -> list[dict[str, str]]:
    return [{"user_input": f"b{n}q{i}", "ai_response": "a", "reasoning": "r"} for i in range(50)]


def test_killed_export_resumes_at_batch_three(ctx: ToolContext, tmp_path: Path) -> None:
    """After kill -9, status says in_progress/next 3; resending 2 is safe; finalize is valid."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), json.dumps(SUMMARY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "batch 2 written"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()

    status = call(ctx, "get_export_status", session_id="killed")
    assert status["status"] == "in_progress"
    assert status["next_batch_number"] == 3
    assert status["created_files"] == [
        "conversations_001.json",
        "conversations_002.json",
        "summary.json",
    ]
    directory = Path(status["directory_path"])
    assert not list(directory.glob(".*.tmp"))

    # The resuming agent is unsure batch 2 arrived: resending it unchanged is accepted.
    again = call(
        ctx,
        "export_experience_conversations",
        session_id="killed",
        batch_number=2,
        conversations_batch=_batch(2),
    )
    assert again["already_existed"] is True
    call(
        ctx,
        "export_experience_conversations",
        session_id="killed",
        batch_number=status["next_batch_number"],
        conversations_batch=conversations(7),
    )
    call(ctx, "export_experience_thoughts", session_id="killed", thoughts={"reflections": "ok"})
    final = call(ctx, "export_experience_finalize", session_id="killed")
    assert final["total_conversations"] == 107
    assert call(ctx, "get_export_status", session_id="killed")["status"] == "completed"
    report = call(ctx, "validate_experience", directory_path=str(directory))
    assert report["valid"] is True, report["errors"]


RACER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import structlog
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    from loop.errors import ToolError
    from loop.experience.tools import TOOLS

    from loop.tools.base import ToolContext

    tool = next(t for t in TOOLS if t.name == "export_experience_conversations")
    ctx = ToolContext(root=Path(sys.argv[1]), experiences_base=Path("exp"))
    batch = [{"user_input": f"from {sys.argv[2]}", "ai_response": "a", "reasoning": "r"}]
    sys.stdin.readline()  # start together
    try:
        out = tool.run(
            ctx, {"session_id": "race", "batch_number": 1, "conversations_batch": batch}
        )
        print("overwritten" if out.overwritten else "written", flush=True)
    except ToolError as exc:
        print(exc.code, flush=True)
    """
)


def test_racing_writers_of_one_batch_get_one_winner(ctx: ToolContext, tmp_path: Path) -> None:
    """Four processes sending different batch 1s at once: the lock serialises them, so one
    writes the batch and three overwrite it in turn; the file is one whole batch."""
    call(ctx, "export_experience_init", session_id="race", summary=SUMMARY)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for n in range(4)
    ]
    outcomes = []
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    for racer in racers:
        out, _ = racer.communicate(timeout=60)
        outcomes.append(out.strip())
    assert sorted(outcomes) == ["overwritten"] * 3 + ["written"]
    written = json.loads((tmp_path / "exp/experience_race/conversations_001.json").read_text())
    assert written["batch_info"]["count"] == 1
    assert written["conversations"][0]["user_input"] in {f"from {n}" for n in range(4)}
