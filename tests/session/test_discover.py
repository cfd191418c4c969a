"""Which .jsonl files are recordings to run: the first bytes of a file, the folder it is
in, and the walk of a folder (the rule `replay DIR` and the pytest plugin share)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio

from loop.session.discover import SNIFF_BYTES, RecordingRule, starts_recording
from tests.session.test_recorder import LOOP_TOML, record_session

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "recordings" / "default.jsonl").read_text(encoding="utf-8")


def test_a_recording_is_told_by_its_first_bytes(tmp_path: Path) -> None:
    """A hatloop header as the first line, and nothing else, starts a recording; of a
    first line longer than what is read, how it begins decides (the rest is not read)."""
    past = "x" * SNIFF_BYTES
    cases = {
        "recording.jsonl": GOOD,
        "other_version.jsonl": '{"kind": "header", "schema_version": 99}\n',
        "crlf.jsonl": '{"kind": "header", "schema_version": 4}\r\n',
        "bom.jsonl": "\ufeff" + GOOD,
        "long.jsonl": '{"kind":"header","config":{"prompt":"' + past + '"},"schema_version":4}\n',
        "long_spaced.jsonl": '{ "kind" : "header", "pad": "' + past + "\n",  # never parsed
        "long_other.jsonl": '{"kind":"speech","pad":"' + past + '"}\n',
        "long_kind_later.jsonl": '{"pad":"' + past + '","kind":"header"}\n',
        "no_version.jsonl": '{"kind": "header", "text": "Introduction", "level": 1}\n',
        "audio.jsonl": '{"file": "a.wav", "duration": 3.2, "kind": "speech"}\n',
        "header_later.jsonl": '{"file": "a.wav"}\n' + GOOD,
        "list.jsonl": "[1, 2]\n",
        "text.jsonl": "not json\n",
        "conflict.jsonl": "<<<<<<< HEAD\n" + GOOD,
        "empty.jsonl": "",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    (tmp_path / "folder.jsonl").mkdir()
    os.mkfifo(tmp_path / "fifo.jsonl")  # never waited on: it is not a regular file
    found = sorted(p.name for p in tmp_path.iterdir() if starts_recording(p))
    assert found == [
        "bom.jsonl",
        "crlf.jsonl",
        "long.jsonl",
        "long_spaced.jsonl",
        "other_version.jsonl",
        "recording.jsonl",
    ]


def test_a_recording_with_a_large_prompt_starts_a_recording(tmp_path: Path) -> None:
    """The recorder writes the whole configuration, prompt included, into the header, and
    begins it with its kind: a header of several times what is read is still told."""
    prompt = "Reverse the words of a sentence. " * (3 * SNIFF_BYTES // 30)
    toml = LOOP_TOML.replace('"Reverse the words of a sentence."', json.dumps(prompt))
    path = anyio.run(lambda: record_session(tmp_path, toml=toml))[0]
    with path.open("rb") as fh:
        header = fh.readline()
    assert len(header) > 3 * SNIFF_BYTES
    assert header.startswith(b'{"kind":"header",')
    assert starts_recording(path)


def test_a_folder_with_a_recording_claims_its_other_jsonl_files(tmp_path: Path) -> None:
    """Beside a recording, an empty, merge-conflicted or torn .jsonl is claimed (its replay
    fails) rather than left out; in a folder without one, a .jsonl is another project's."""
    suite, data = tmp_path / "suite", tmp_path / "data"
    suite.mkdir()
    data.mkdir()
    (suite / "a.jsonl").write_text(GOOD, encoding="utf-8")
    (suite / "b.jsonl").write_text("<<<<<<< HEAD\n" + GOOD + "=======\n>>>>>>> x\n")
    (suite / "c.jsonl").write_text("", encoding="utf-8")
    (suite / "d.jsonl").write_text(GOOD[: len(GOOD) // 3], encoding="utf-8")
    (data / "clips.jsonl").write_text('{"file": "a.wav"}\n', encoding="utf-8")
    (data / "empty.jsonl").write_text("", encoding="utf-8")
    rule = RecordingRule()
    assert [rule.claims(suite / n) for n in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl")] == [
        True,
        True,
        True,
        True,
    ]
    assert not rule.claims(data / "clips.jsonl")
    assert not rule.claims(data / "empty.jsonl")
    assert (rule.holds_recording(suite), rule.holds_recording(data)) == (True, False)


def test_a_folder_is_walked_in_pytests_order(tmp_path: Path) -> None:
    """Sub-folders are walked, each folder's entries sorted by name (a folder among the
    files, as pytest visits them), hidden folders left out, a folder reached again through
    a link walked once; files that are no recording are listed apart."""
    root = tmp_path / "recordings"
    for folder in ("b", "b/deep", "c", ".git", "data"):
        (root / folder).mkdir(parents=True)
    for name in ("a.jsonl", "b-x.jsonl", "b/one.jsonl", "b/deep/two.jsonl", "c/three.jsonl"):
        (root / name).write_text(GOOD, encoding="utf-8")
    (root / "c" / "broken.jsonl").write_text("", encoding="utf-8")
    (root / ".git" / "hidden.jsonl").write_text(GOOD, encoding="utf-8")
    (root / ".hidden.jsonl").write_text(GOOD, encoding="utf-8")  # a hidden file is a file
    (root / "data" / "clips.jsonl").write_text('{"file": "a.wav"}\n', encoding="utf-8")
    (root / "notes.txt").write_text(GOOD, encoding="utf-8")
    (root / "b" / "up").symlink_to(root, target_is_directory=True)  # a loop: walked once
    found = RecordingRule().find(root)
    assert [p.relative_to(root).as_posix() for p in found.recordings] == [
        ".hidden.jsonl",
        "a.jsonl",
        "b/deep/two.jsonl",
        "b/one.jsonl",
        "b-x.jsonl",
        "c/broken.jsonl",
        "c/three.jsonl",
    ]
    assert found.skipped == [root / "data" / "clips.jsonl"]
