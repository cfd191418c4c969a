"""`loop schema recording`: the recording format's JSON Schema."""

from __future__ import annotations

import json
import re
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


def test_the_format_table_in_the_docs_lists_every_kind_and_field() -> None:
    """docs/recording.md's format table has a row for each kind of line the schema has,
    naming every field of that kind (and each marker), so the docs follow the records."""
    from loop.session.recording import recording_json_schema

    text = (REPO / "docs" / "recording.md").read_text(encoding="utf-8")
    table = text[text.index("## The format") :]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `(\w+)`[^|]*\| (.*) \|$", table, re.MULTILINE)}
    defs = recording_json_schema()["$defs"]
    kinds = {
        d["properties"]["kind"]["const"]: d
        for d in defs.values()
        if "const" in d.get("properties", {}).get("kind", {})
    }
    assert sorted(kinds) == sorted(rows)
    for kind, definition in kinds.items():
        missing = [
            f for f in definition["properties"] if f != "kind" and f"`{f}`" not in rows[kind]
        ]
        assert not missing, (kind, missing)
    for marker in defs["MarkerRecord"]["properties"]["marker"]["enum"]:
        assert f"`{marker}`" in rows["marker"], marker
    for field in defs["HatTopology"]["properties"]:
        assert f"`{field}`" in rows["header"], field
