"""A folder of recordings as one regression suite: which recordings (and which shard of
them), the outcome of each, the summary and the JUnit XML file.

Pure: no processes and no replays here. :class:`ReplayJob` and :class:`ReplayOutcome`
are the typed records a worker process reads and writes (one JSON line each, see
:mod:`loop.commands.replay_worker`); the command (:mod:`loop.commands.replay`) prints
the outcomes in the order of the recordings (:class:`InOrder`), whatever order they
finish in, and sums them up (:func:`summary_lines`, :func:`exit_code`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar
from xml.etree import ElementTree as ET

from pydantic import BaseModel, ConfigDict

from loop.errors import UsageError
from loop.exits import EXIT_DIVERGED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from loop.session.discover import Found, RecordingRule

__all__ = [
    "SUITE",
    "InOrder",
    "ReplayJob",
    "ReplayOutcome",
    "Shard",
    "collect_recordings",
    "exit_code",
    "junit_xml",
    "outcome_lines",
    "parse_jobs",
    "summary_lines",
]

SUITE = "hatloop.replay"
SLOWEST = 3  # the summary names this many of the slowest recordings
NAMED_SKIPPED = 3  # and this many of the .jsonl files it skipped

Status = Literal["passed", "diverged", "error", "crashed"]
T = TypeVar("T")


class ReplayJob(BaseModel):
    """One recording to replay: its place in the run's order and its path; the
    extensions of the user's own the replay takes part (``--extension``, made anew for
    each recording), imported from ``where``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    path: str
    extensions: tuple[str, ...] = ()
    where: str = "."


class ReplayOutcome(BaseModel):
    """How one recording went.

    ``passed`` and ``diverged`` come from a replay; ``error`` is bad input (the one-line
    message, exit code 2); ``crashed`` is a worker process that died or a replay that
    raised something unexpected (exit code 1).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    path: str
    status: Status
    line: str  # the row printed for it: "ok ...", "DIVERGED ...", "ERROR ..."
    detail: str = ""  # the readable diff, or the error message
    warnings: list[str] = []
    partial: str | None = None
    duration: float = 0.0

    @property
    def notes(self) -> list[str]:
        """Warnings and the prefix-only note: what a passing replay still has to say."""
        return [*self.warnings, *([f"prefix only: {self.partial}"] if self.partial else [])]


# -- which recordings -----------------------------------------------------------------------


def collect_recordings(paths: Iterable[str]) -> Found:
    """The recordings to replay: the files named, and what the folders named hold.

    A folder is walked with its sub-folders, and its ``.jsonl`` files are told apart by
    the rule the pytest plugin uses (:class:`~loop.session.discover.RecordingRule`): the
    ones that are no recording are skipped (the summary counts them). Files keep the
    order they are named in; a file named twice is replayed once, however it is named (a
    relative or an absolute path, a link: the same file is one). A file named on its own
    is always replayed: one missing or no recording is bad input (its own ``ERROR`` row).

    Raises:
        UsageError: a folder holds no recording, or cannot be read: the command names a
            folder of recordings that has none, so nothing is replayed.
    """
    rule = RecordingRule()
    found = Found()
    seen: set[tuple[int, int] | str] = set()
    skipped: dict[tuple[int, int] | str, Path] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            try:
                inside = rule.find(path)
            except OSError as exc:
                raise UsageError(
                    f"{exc.filename or path}: cannot read the folder: {exc.strerror or exc}"
                ) from None
            if not inside.recordings:
                raise UsageError(f"no recordings in {path} ({_none_found(inside.skipped)})")
            for item in inside.skipped:
                skipped.setdefault(_file_key(item), item)
        else:
            inside = Found([path])
        for item in inside.recordings:
            key = _file_key(item)
            if key not in seen:
                seen.add(key)
                found.recordings.append(item)
    found.skipped.extend(item for key, item in skipped.items() if key not in seen)
    return found


def _none_found(skipped: Sequence[Path]) -> str:
    if not skipped:
        return "no *.jsonl file in that folder or below it"
    return f"none of its {len(skipped)} *.jsonl file(s) starts with a recording header"


def _file_key(path: Path) -> tuple[int, int] | str:
    """What names one file however it is spelled (``a.jsonl``, ``$PWD/a.jsonl``, through a
    link): its device and inode; a path that cannot be read, its absolute form."""
    try:
        st = path.stat()
    except OSError:
        return os.path.abspath(path)  # noqa: PTH100 - lexical, for a file that is not there
    return (st.st_dev, st.st_ino)


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): every ``count``-th recording from ``index``.

    The same arguments give the same list of recordings on every machine, so shards
    1..N of it are disjoint and together hold every recording exactly once.
    """

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` with ``1 <= K <= N``.

        Raises:
            UsageError: anything else (one line).
        """
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise UsageError(f"--shard {text!r}: expected K/N, for example --shard 1/4")
        index, count = int(match[1]), int(match[2])
        if count < 1 or not 1 <= index <= count:
            raise UsageError(f"--shard {text}: K must be between 1 and N (N >= 1)")
        return cls(index, count)

    def select(self, items: Sequence[T]) -> list[T]:
        """This shard's items (round-robin, so the shards differ by one at most)."""
        return list(items[self.index - 1 :: self.count])

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_jobs(text: str, cpus: int | None) -> int:
    """``--jobs``: a number of worker processes; ``0`` or ``auto`` is the CPU count.

    Raises:
        UsageError: not a number >= 0 nor ``auto``.
    """
    value = text.strip().lower()
    if value == "auto":
        return max(1, cpus or 1)
    if not value.isdigit():
        raise UsageError(f"--jobs {text!r}: expected a number of processes or 'auto'")
    return int(value) or max(1, cpus or 1)


# -- in order -------------------------------------------------------------------------------


class InOrder:
    """Releases outcomes in index order, whatever order they arrive in."""

    def __init__(self, first: int = 0) -> None:
        self._next = first
        self._held: dict[int, ReplayOutcome] = {}

    def add(self, outcome: ReplayOutcome) -> list[ReplayOutcome]:
        """Hold ``outcome``; return the outcomes that are now next in order."""
        self._held[outcome.index] = outcome
        ready = []
        while self._next in self._held:
            ready.append(self._held.pop(self._next))
            self._next += 1
        return ready


# -- what it comes to -----------------------------------------------------------------------


def outcome_lines(outcome: ReplayOutcome) -> list[str]:
    """The row of one recording, its warnings, and its diff (indented)."""
    lines = [outcome.line]
    lines += [f"  warning: {w}" for w in outcome.warnings]
    if outcome.status == "diverged":
        lines += ["  " + line for line in outcome.detail.splitlines()]
    return lines


def _count(outcomes: Sequence[ReplayOutcome], *statuses: Status) -> int:
    return sum(1 for o in outcomes if o.status in statuses)


def exit_code(outcomes: Sequence[ReplayOutcome]) -> int:
    """2 if any was bad input, else 1 if a worker crashed, else 4 if any diverged, else 0."""
    if _count(outcomes, "error"):
        return EXIT_USAGE
    if _count(outcomes, "crashed"):
        return EXIT_FAILED
    return EXIT_DIVERGED if _count(outcomes, "diverged") else EXIT_OK


def summary_lines(
    outcomes: Sequence[ReplayOutcome],
    elapsed: float,
    *,
    jobs: int,
    shard: Shard | None = None,
    total: int | None = None,
    skipped: Sequence[str] = (),
) -> list[str]:
    """The one summary: counts, wall and replay time, the files skipped, the slowest,
    what went wrong.

    ``total`` is how many recordings there were to replay, when fewer were (interrupted);
    ``skipped``, the ``.jsonl`` files of the folders that are no recording.
    """
    done = len(outcomes)
    errors = _count(outcomes, "error", "crashed")
    head = (
        f"{done} recording(s): {_count(outcomes, 'passed')} passed, "
        f"{_count(outcomes, 'diverged')} diverged, {errors} error(s) "
        f"in {elapsed:.2f}s"
    )
    spent = sum(o.duration for o in outcomes)
    head += f" ({jobs} job{'s' if jobs != 1 else ''}, {spent:.2f}s of replays"
    head += f", shard {shard})" if shard else ")"
    lines = [head]
    if total is not None and total != done:
        lines.append(f"interrupted: {total - done} of {total} recording(s) not replayed")
    if skipped:
        named = ", ".join(skipped[:NAMED_SKIPPED])
        more = len(skipped) - NAMED_SKIPPED
        lines.append(
            f"skipped {len(skipped)} *.jsonl file(s) in folders that hold no recording: "
            + named
            + (f" and {more} more" if more > 0 else "")
        )
    timed = sorted((o for o in outcomes if o.duration > 0), key=lambda o: (-o.duration, o.index))
    if len(timed) > 1:
        lines.append(
            "slowest: " + ", ".join(f"{o.path} {o.duration:.2f}s" for o in timed[:SLOWEST])
        )
    for label, statuses in (("diverged", ("diverged",)), ("errors", ("error", "crashed"))):
        names = [o.path for o in outcomes if o.status in statuses]
        if names:
            lines.append(f"{label}: " + ", ".join(names))
    return lines


def junit_xml(
    outcomes: Sequence[ReplayOutcome], elapsed: float, *, shard: Shard | None = None
) -> bytes:
    """A JUnit XML report: one test case per recording, in the run's order.

    A divergence is a ``<failure>`` carrying the readable diff; bad input and a crashed
    worker are an ``<error>``; warnings and prefix-only notes go to ``<system-out>``.
    """
    suite = ET.Element("testsuite", name=SUITE, tests=str(len(outcomes)), time=f"{elapsed:.3f}")
    if shard is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="shard", value=str(shard))
    for outcome in sorted(outcomes, key=lambda o: o.index):
        case = ET.SubElement(suite, "testcase", classname=SUITE, name=outcome.path)
        case.set("time", f"{outcome.duration:.3f}")
        if outcome.status in ("error", "crashed"):
            text = outcome.detail or outcome.line
            ET.SubElement(case, "error", message=text.splitlines()[0]).text = text
        elif outcome.status == "diverged":
            text = outcome.detail or outcome.line
            ET.SubElement(case, "failure", message=text.splitlines()[0]).text = text
        if outcome.notes:
            ET.SubElement(case, "system-out").text = "\n".join(outcome.notes)
    suite.set("failures", str(_count(outcomes, "diverged")))
    suite.set("errors", str(_count(outcomes, "error", "crashed")))
    root = ET.Element("testsuites")
    root.append(suite)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"
