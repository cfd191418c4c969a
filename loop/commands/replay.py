"""``loop replay`` and ``loop schema``: recordings from the command line."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from loop._fs import atomic_write
from loop.commands.common import run_async
from loop.errors import EXIT_DIVERGED, EXIT_OK, EXIT_USAGE, LoopError

__all__ = ["collect_recordings", "junit_xml", "register"]

SUITE = "hatloop.replay"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay`` and ``schema``."""
    p = sub.add_parser(
        "replay",
        help="replay recordings through the real engine and compare",
        description="Replay each recording with the replay backend and the recorded "
        "configuration; report the first divergence. Exit 0 when all match, "
        "4 when one diverged, 2 on bad input.",
    )
    p.add_argument(
        "paths", nargs="+", metavar="FILE|DIR", help="recordings, or folders of *.jsonl recordings"
    )
    p.add_argument("--junit-xml", metavar="PATH", help="also write a JUnit XML report")
    p.add_argument("--log-format", choices=["auto", "console", "json"], default="auto")
    p.set_defaults(handler=_replay)

    sc = sub.add_parser("schema", help="print a file format's JSON Schema")
    sc.add_argument("format", choices=["recording"], help="which format")
    sc.set_defaults(handler=_schema)


# -- replay -------------------------------------------------------------------------------


def collect_recordings(paths: Iterable[str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Expand folders to their ``*.jsonl`` files: ``(recordings, problems)``."""
    found: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(path.glob("*.jsonl"))
            if not inside:
                problems.append((path, f"{path}: no recordings (*.jsonl) in this folder"))
            found.extend(inside)
        else:
            found.append(path)
    return found, problems


def _replay(args: argparse.Namespace) -> int:
    from loop.replay import ReplayResult, replay_recording  # noqa: PLC0415 - heavy

    files, problems = collect_recordings(args.paths)
    outcomes: list[tuple[Path, ReplayResult | str]] = list(problems)
    started = time.perf_counter()

    async def run_all() -> None:
        for path in files:
            try:
                outcome: ReplayResult | str = await replay_recording(path)
            except LoopError as exc:
                outcome = str(exc)
            outcomes.append((path, outcome))
            _print_outcome(outcome)

    for _, message in problems:
        print(f"ERROR    {message}")
    run_async(run_all)
    elapsed = time.perf_counter() - started
    passed = sum(1 for _, o in outcomes if not isinstance(o, str) and o.ok)
    diverged = sum(1 for _, o in outcomes if not isinstance(o, str) and not o.ok)
    errors = sum(1 for _, o in outcomes if isinstance(o, str))
    print(
        f"\n{len(outcomes)} recording(s): {passed} ok, {diverged} diverged, "
        f"{errors} error(s) in {elapsed:.2f}s"
    )
    if args.junit_xml:
        target = Path(args.junit_xml)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, junit_xml(outcomes, elapsed))
        print(f"JUnit XML written to {target}")
    if errors:
        return EXIT_USAGE
    return EXIT_DIVERGED if diverged else EXIT_OK


def _print_outcome(outcome: Any) -> None:
    if isinstance(outcome, str):
        print(f"ERROR    {outcome}")
        return
    print(outcome.summary())
    for warning in outcome.warnings:
        print(f"  warning: {warning}")
    if outcome.divergence is not None:
        print("\n".join("  " + line for line in outcome.divergence.render().splitlines()))


def junit_xml(outcomes: list[tuple[Path, Any]], elapsed: float) -> bytes:
    """A JUnit XML report: one test case per recording (failure = divergence)."""
    suite = ET.Element("testsuite", name=SUITE, tests=str(len(outcomes)), time=f"{elapsed:.3f}")
    failures = errors = 0
    for path, outcome in outcomes:
        case = ET.SubElement(suite, "testcase", classname=SUITE, name=str(path))
        if isinstance(outcome, str):
            errors += 1
            ET.SubElement(case, "error", message=outcome).text = outcome
            continue
        case.set("time", f"{outcome.duration:.3f}")
        if outcome.divergence is not None:
            failures += 1
            text = outcome.divergence.render()
            ET.SubElement(case, "failure", message=text.splitlines()[0]).text = text
        notes = list(outcome.warnings) + (
            [f"prefix only: {outcome.partial}"] if outcome.partial else []
        )
        if notes:
            ET.SubElement(case, "system-out").text = "\n".join(notes)
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites")
    root.append(suite)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


# -- schema -------------------------------------------------------------------------------


def _schema(args: argparse.Namespace) -> int:
    from loop.session.recording import recording_json_schema  # noqa: PLC0415 - on use

    print(json.dumps(recording_json_schema(), indent=2, ensure_ascii=False))
    return EXIT_OK
