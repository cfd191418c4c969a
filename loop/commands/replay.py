"""``loop replay`` and ``loop schema``: recordings from the command line.

``replay`` takes files and folders, keeps this machine's shard of them (``--shard K/N``),
replays them in this process or in ``--jobs N`` worker processes
(:mod:`loop.commands.replay_pool`), prints one row per recording in the order of the
recordings whatever order they finish in, then one summary; ``--junit FILE`` writes
one JUnit XML file. Live progress goes to stderr: a counter redrawn in place on a
terminal, a plain line every tenth of the way otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from loop._fs import atomic_write
from loop._log import live_line_allowed
from loop.commands.common import add_path_argument, check_output_file, run_interruptible
from loop.commands.replay_suite import (
    InOrder,
    ReplayJob,
    ReplayOutcome,
    Shard,
    collect_recordings,
    exit_code,
    junit_xml,
    outcome_lines,
    parse_jobs,
    summary_lines,
)
from loop.errors import InputError
from loop.exits import EXIT_OK

__all__ = ["Progress", "cpu_count", "register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay`` and ``schema``."""
    p = sub.add_parser(
        "replay",
        help="replay recordings through the real engine and compare",
        description="Replay each recording with the replay backend and the recorded "
        "configuration; report the first divergence of each. Exit 0 when all match, "
        "4 when one diverged, 2 on bad input, 1 when a worker process died, 130 when "
        "interrupted.",
    )
    add_path_argument(
        p,
        "paths",
        nargs="+",
        metavar="FILE|DIR",
        help="recordings, or folders of them (with their sub-folders; a *.jsonl file in a "
        "folder that holds no recording is skipped)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        default="1",
        metavar="N",
        help="replay in N worker processes (0 or 'auto': one per CPU; default 1: in this "
        "process, one after the other)",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="replay only shard K of N (1 <= K <= N): every N-th recording from the K-th, "
        "in the order they are listed (for a CI matrix of N machines)",
    )
    add_path_argument(
        p,
        "--junit",
        "--junit-xml",
        dest="junit",
        metavar="FILE",
        help="also write one JUnit XML file (one test case per recording)",
    )
    p.add_argument(
        "--extension",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="an extension of your own that took part in the recorded runs (it published "
        "events between iterations): a class or function that makes one, imported from "
        "this folder, made anew for each recording (repeatable)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only the recordings that diverged or failed, and the summary",
    )
    p.add_argument("--log-format", choices=["auto", "console", "json"], default="auto")
    p.set_defaults(handler=_replay)

    sc = sub.add_parser("schema", help="print a file format's JSON Schema")
    sc.add_argument("format", choices=["recording"], help="which format")
    sc.set_defaults(handler=_schema)


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask where there is one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# -- progress -------------------------------------------------------------------------------


class Progress:
    """Live progress on ``err``; the rows go to ``out``.

    On a terminal (:func:`live_line_allowed`) a counter is redrawn in place, and taken
    away while a row is printed. Otherwise a plain line is written at the start and each
    time another tenth of the recordings is done. One recording shows no progress.
    """

    def __init__(self, total: int, workers: int, *, out: TextIO, err: TextIO, live: bool) -> None:
        self.total, self.workers = total, workers
        self.out, self.err = out, err
        self.live = live and total > 1
        self.quiet = total <= 1  # one recording: its row is all the progress there is
        self.done = self.passed = self.diverged = self.errors = 0
        self._step = 0
        self._shown = False

    def start(self) -> None:
        """Say what is about to run."""
        how = f"{self.workers} worker processes" if self.workers > 1 else "this process"
        if not (self.live or self.quiet):
            self._line(f"replay: {self.total} recording(s) in {how}")
        self._draw()

    def tick(self, outcome: ReplayOutcome) -> None:
        """Count one finished recording."""
        self.done += 1
        if outcome.status == "passed":
            self.passed += 1
        elif outcome.status == "diverged":
            self.diverged += 1
        else:
            self.errors += 1
        step = self.done * 10 // max(1, self.total)
        if not (self.live or self.quiet) and step > self._step:
            self._step = step
            self._line(f"replay: {self._counts()}")
        self._draw()

    def rows(self, lines: list[str]) -> None:
        """Print rows on ``out`` (under the counter, which is redrawn after them)."""
        if not lines:
            return
        self._erase()
        self.out.write("".join(line + "\n" for line in lines))
        self.out.flush()
        self._draw()

    def close(self) -> None:
        """Take the counter away."""
        self._erase()
        self.live = False

    def _counts(self) -> str:
        return (
            f"{self.done}/{self.total} done: {self.passed} passed, {self.diverged} diverged, "
            f"{self.errors} error(s)"
        )

    def _line(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def _draw(self) -> None:
        if self.live and self.total:
            self.err.write(f"\r\x1b[K[{self._counts()}]")
            self.err.flush()
            self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._shown = False


# -- replay ---------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    # the engine, imported when recordings are replayed (not for --help)
    from loop.commands.replay_pool import replay_all  # noqa: PLC0415 - start-up
    from loop.extensions import extensions_from  # noqa: PLC0415 - start-up

    shard = Shard.parse(args.shard) if args.shard else None
    jobs = parse_jobs(args.jobs, cpu_count())
    if args.junit:  # written after the last replay: checked before the first
        check_output_file(Path(args.junit), "--junit")
    where = str(Path.cwd())
    extensions_from(args.extension, where=Path(where), option="--extension")  # one line now
    found = collect_recordings(args.paths)
    files, skipped = found.recordings, [str(p) for p in found.skipped]
    selected = shard.select(files) if shard is not None else files
    outcomes: list[ReplayOutcome] = []
    named = tuple(args.extension)
    todo = [
        ReplayJob(index=i, path=str(p), extensions=named, where=where)
        for i, p in enumerate(selected)
    ]
    workers = min(jobs, len(todo))
    used = max(1, workers)  # what the summary says: --jobs 100000 on 3 recordings runs 3
    progress = Progress(
        len(todo), workers, out=sys.stdout, err=sys.stderr, live=live_line_allowed()
    )
    order = InOrder()
    if shard is not None:
        print(f"shard {shard}: {len(selected)} of {len(files)} recording(s)", file=sys.stderr)

    def on_outcome(outcome: ReplayOutcome) -> None:
        outcomes.append(outcome)
        progress.tick(outcome)
        for ready in order.add(outcome):
            if not (args.quiet and ready.status == "passed"):
                progress.rows(outcome_lines(ready))

    started = time.perf_counter()
    progress.start()
    try:
        run_interruptible(replay_all, todo, workers, on_outcome)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the summary so far, exit 130
        progress.close()
        elapsed = time.perf_counter() - started
        _summary(outcomes, elapsed, jobs=used, shard=shard, total=len(todo), skipped=skipped)
        raise
    progress.close()
    elapsed = time.perf_counter() - started
    _summary(outcomes, elapsed, jobs=used, shard=shard, skipped=skipped)
    if args.junit:
        target = Path(args.junit)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, junit_xml(outcomes, elapsed, shard=shard))
        except OSError as exc:  # changed since the check: one line, not a traceback
            raise InputError(
                f"{target}: cannot write the JUnit XML: {exc.strerror or exc}"
            ) from None
        print(f"JUnit XML written to {target}")
    return exit_code(outcomes)


def _summary(
    outcomes: list[ReplayOutcome],
    elapsed: float,
    *,
    jobs: int,
    shard: Shard | None,
    total: int | None = None,
    skipped: list[str],
) -> None:
    lines = summary_lines(
        sorted(outcomes, key=lambda o: o.index),
        elapsed,
        jobs=jobs,
        shard=shard,
        total=total,
        skipped=skipped,
    )
    print("\n" + "\n".join(lines), flush=True)


# -- schema -------------------------------------------------------------------------------


def _schema(args: argparse.Namespace) -> int:
    from loop.session.recording import recording_json_schema  # noqa: PLC0415 - on use

    print(json.dumps(recording_json_schema(), indent=2, ensure_ascii=False))
    return EXIT_OK
