"""`loop show` (a recording's timeline) and `loop schema recording`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema
import pytest

from loop.cli import main
from tests.session.test_recorder import record_session

REPO = Path(__file__).resolve().parents[2]


def test_show_prints_the_timeline_and_the_footer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One row per iteration (hat, duration, status, cost, events) and the footer line."""
    path = anyio.run(record_session, tmp_path)[0]
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"recording  {path}" in out
    assert "schema 1 · hatloop" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[1] for r in rows] == ["planner", "builder", "reviewer", "builder", "reviewer"]
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert all(r[2].endswith("s") and r[3] == "ok" and r[4] == "-" for r in rows)
    assert rows[2][-1] == "review.rejected"
    assert "end   completed after 5 iteration(s)" in out
    assert "(exit 0) · 6 records · 0 write failure(s)" in out


def test_show_marks_failures_cost_and_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed iteration shows its reason, a cost shows in dollars, the cap marker shows."""
    src = REPO / "recordings" / "command.jsonl"
    records = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    records[1]["cost_usd"] = 0.0123
    records.insert(
        -1,
        {
            "kind": "marker",
            "marker": "cap_reached",
            "ts": 1.0,
            "message": "recording stopped: the next record would pass the cap",
        },
    )
    records[-1]["cap_reached"] = True
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "$0.0123" in out
    assert "failed: exit status 3" in out
    assert "--  cap_reached: recording stopped" in out
    assert "size cap reached" in out


def test_show_of_a_torn_recording_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recording cut off mid-write shows what it has, says it has no footer, and warns."""
    data = (REPO / "recordings" / "default.jsonl").read_bytes()
    path = tmp_path / "t.jsonl"
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1] + b'{"kind":"foo')
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(no footer: the recording was cut off)" in out
    assert "warning: " in out
    assert "torn last line" in out


def test_show_of_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or non-JSONL file is a one-line error and exit 2."""
    assert main(["show", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl: recording not found" in capsys.readouterr().err
    (tmp_path / "t.txt").write_text("just text\n")
    assert main(["show", str(tmp_path / "t.txt")]) == 2
    assert "t.txt:1: not a JSONL recording" in capsys.readouterr().err


def test_schema_recording_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """`loop schema recording` prints a JSON Schema that every committed line satisfies."""
    assert main(["schema", "recording"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["$defs"]) >= {
        "HeaderRecord",
        "IterationRecord",
        "MarkerRecord",
        "FooterRecord",
    }
    assert "schema_version" in schema["$defs"]["HeaderRecord"]["properties"]
    jsonschema.Draft202012Validator.check_schema(schema)
    recordings = sorted((REPO / "recordings").glob("*.jsonl"))
    assert recordings
    for path in recordings:
        for line in path.read_text(encoding="utf-8").splitlines():
            jsonschema.validate(json.loads(line), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"kind": "iteration", "iteration": 0}, schema)
