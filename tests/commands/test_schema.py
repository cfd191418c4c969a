"""`loop schema recording`: the recording format's JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from loop.cli import main

REPO = Path(__file__).resolve().parents[2]


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
