"""``loop run``: run (or resume) a session of the loop."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from loop._log import live_line_allowed, log_format, use_colors
from loop.cli import prog_name
from loop.commands.common import add_path_argument, print_json, report_checks, run_async
from loop.config import load_config
from loop.config.backends import CLI_BACKENDS
from loop.config.stand_ins import stand_ins
from loop.engine.progress import render_summary
from loop.engine.resume import LimitOverrides, carried_flags
from loop.errors import LoopError, ToolError, UsageError
from loop.exits import EXIT_USAGE, REASON_COMPLETED

if TYPE_CHECKING:
    from loop.config import LoadedConfig
    from loop.engine.progress import RunSummary
    from loop.records import FlagValue
    from loop.session.recorder import Recorder

__all__ = ["add_config_options", "register", "wants_export"]

_Budget = TypeVar("_Budget", int, float)


def add_config_options(p: argparse.ArgumentParser) -> None:
    """The options that choose and override the configuration."""
    g = p.add_argument_group("configuration (flags override loop.toml)")
    add_path_argument(
        g,
        "--config",
        "-c",
        metavar="PATH",
        help="config file (default: loop.toml here or in a parent folder, else the built-in demo)",
    )
    add_path_argument(
        g,
        "--hats",
        metavar="PATH",
        action="append",
        help="hat file or folder (repeatable; replaces [loop] hats)",
    )
    given = g.add_mutually_exclusive_group()
    given.add_argument("--prompt", help="the objective (overrides [loop] prompt and prompt_file)")
    add_path_argument(
        given,
        "--prompt-file",
        metavar="PATH",
        help="read the objective from a file (overrides [loop] prompt and prompt_file)",
    )
    g.add_argument("--max-iterations", type=int, metavar="N")
    g.add_argument("--max-runtime", type=float, metavar="SECONDS", dest="max_runtime")
    g.add_argument("--max-consecutive-failures", type=int, metavar="N")
    g.add_argument("--max-cost-usd", type=float, metavar="USD", help="the run's budget in dollars")
    g.add_argument(
        "--max-tokens", type=int, metavar="N", help="the run's budget in tokens (input + output)"
    )
    g.add_argument(
        "--hat-max-cost-usd",
        type=_hat_budget(float),
        action="append",
        metavar="HAT=USD",
        help="a hat's budget in dollars (repeatable; overrides its max_cost_usd)",
    )
    g.add_argument(
        "--hat-max-tokens",
        type=_hat_budget(int),
        action="append",
        metavar="HAT=N",
        help="a hat's budget in tokens (repeatable; overrides its max_tokens)",
    )
    g.add_argument(
        "--max-wait",
        type=float,
        metavar="SECONDS",
        dest="max_wait",
        help="the longest wait for a rate or usage limit, per iteration",
    )
    g.add_argument("--completion-event", metavar="TOPIC")
    g.add_argument(
        "--backend",
        metavar="TYPE",
        choices=CLI_BACKENDS,
        help="run every hat on this backend (scripted: hats without scripted outputs get "
        "stand-ins that walk the topology to its completion)",
    )


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """``[loop]`` overrides from the command line."""
    out: dict[str, Any] = {
        **asdict(limit_overrides(args)),
        "completion_event": args.completion_event,
        "backend": args.backend,
    }
    if args.prompt is not None:
        if not args.prompt.strip():
            raise UsageError("--prompt: empty objective")
        out["prompt"] = args.prompt
    if args.prompt_file is not None:
        out["prompt_file"] = str(_readable_prompt_file(args.prompt_file))
    return out


def limit_overrides(args: argparse.Namespace) -> LimitOverrides:
    """The limits given on the command line (a resume changes the session's with them)."""
    return LimitOverrides(
        max_iterations=args.max_iterations,
        max_runtime_seconds=args.max_runtime,
        max_consecutive_failures=args.max_consecutive_failures,
        max_cost_usd=args.max_cost_usd,
        max_tokens=args.max_tokens,
        max_wait_seconds=args.max_wait,
        hat_max_cost_usd=_per_hat("--hat-max-cost-usd", args.hat_max_cost_usd),
        hat_max_tokens=_per_hat("--hat-max-tokens", args.hat_max_tokens),
    )


def _per_hat(flag: str, given: list[tuple[str, _Budget]] | None) -> dict[str, _Budget] | None:
    """The budgets a repeatable ``--hat-max-*`` flag gives, by hat (None: not given).

    Raises:
        UsageError: one hat given two different values (neither silently wins).
    """
    if not given:
        return None
    out: dict[str, _Budget] = {}
    for hat, value in given:
        if out.setdefault(hat, value) != value:
            raise UsageError(f"{flag}: hat {hat!r} given two values, {out[hat]} and {value}")
    return out


def _hat_budget(kind: type[float] | type[int]) -> Callable[[str], tuple[str, float]]:
    """The type of ``--hat-max-cost-usd`` (``kind`` float) or ``--hat-max-tokens`` (int):
    ``HAT=VALUE``, a hat's name and a budget above zero."""
    words = "a whole number of tokens, at least 1" if kind is int else "dollars, above 0"

    def parse(raw: str) -> tuple[str, float]:
        hat, sep, value = raw.partition("=")
        if not (sep and hat):
            raise argparse.ArgumentTypeError(f"expected HAT=VALUE, got {raw!r}")
        try:
            budget = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{hat}: expected {words}, got {value!r}") from None
        if not (budget > 0 and math.isfinite(budget)):
            raise argparse.ArgumentTypeError(f"{hat}: expected {words}, got {value!r}")
        return hat, budget

    return parse


def _readable_prompt_file(raw: str) -> Path:
    """``--prompt-file``'s file, resolved; a file that cannot be read as an objective
    (missing, not UTF-8, empty or only white space) is the flag's fault.

    Raises:
        UsageError: naming the flag (not the config, which has nothing to do with it).
    """
    path = Path(raw).resolve()
    if not path.exists():
        raise UsageError(f"--prompt-file {raw}: file not found")
    if not path.is_file():
        raise UsageError(f"--prompt-file {raw}: not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"--prompt-file {raw}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--prompt-file {raw}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise UsageError(f"--prompt-file {raw}: empty objective")
    return path


def load_from_args(
    args: argparse.Namespace,
    *,
    prompt: bool = True,
    carried: Mapping[str, FlagValue] | None = None,
) -> LoadedConfig:
    """Load the configuration the flags describe (``prompt``: see :func:`load_config`;
    ``carried``: the flags a resumed session was started with and is not given again)."""
    return load_config(
        Path(args.config) if args.config else None,
        hats=[Path(h) for h in args.hats] if args.hats else None,
        overrides={**overrides_from(args), **(carried or {})},
        prompt=prompt,
    )


def _resumed(args: argparse.Namespace, config: LoadedConfig) -> tuple[LoadedConfig, str]:
    """``run --resume [ID]``: the session it continues (the most recent one, or the one an
    id or a prefix names), found before anything is written, and the configuration with
    the flags that session last ran with that are not given again (a session started
    with ``--backend scripted`` resumes on it). A journal that cannot be read is left for
    the run to report.

    Raises:
        SessionError: there is no session to resume.
    """
    from loop.engine.journal import read_journal  # noqa: PLC0415 - resume only
    from loop.runner import RunOptions, resolve_session  # noqa: PLC0415 - heavy

    options = RunOptions(workdir=config.root, session_id=args.resume or None, resume=True)
    paths = resolve_session(config, options)
    try:
        records = read_journal(paths.journal, root=paths.trusted).records
    except LoopError:
        return config, paths.session_id
    carried = carried_flags(records, overrides_from(args))
    if not carried:
        return config, paths.session_id
    if not args.quiet:
        import structlog  # noqa: PLC0415 - logging is configured by now

        structlog.get_logger("loop.run").info("the session's flags hold", **carried)
    return load_from_args(args, carried=carried), paths.session_id


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run``."""
    p = sub.add_parser(
        "run",
        help="run the loop (or resume a session)",
        description="Run the loop until completion or a limit.",
    )
    add_config_options(p)
    s = p.add_argument_group("session").add_mutually_exclusive_group()
    s.add_argument("--session-id", metavar="ID", help="name the new session (default: generated)")
    s.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="ID",
        default=None,
        help="continue a stopped session (default: the most recent one)",
    )
    r = p.add_argument_group("recording")
    add_path_argument(r, "--record-session", metavar="FILE", help="record the session as JSONL")
    r.add_argument(
        "--record-max-bytes",
        type=_record_cap,
        metavar="N",
        help="stop recording at N bytes, at least 1024 (default: [recording] max_bytes, 100 MB)",
    )
    r.add_argument("--force", action="store_true", help="overwrite an existing recording")
    r.add_argument(
        "--no-redact",
        action="store_true",
        help="keep secret-looking environment values in the recording",
    )
    p.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the checks `doctor` makes (programs, modules, API keys, folders) before the run",
    )
    p.add_argument(
        "--export-experience",
        action="store_true",
        help="export the session as an experience when it ends",
    )
    o = p.add_argument_group("output")
    o.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="print each hat's output on stderr as it arrives, prefixed with the hat",
    )
    o.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no per-iteration progress, no live line, only warnings and errors in the log",
    )
    o.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour, and the live status line on a terminal (default: auto; "
        "NO_COLOR and TERM=dumb turn both off)",
    )
    o.add_argument(
        "--log-format",
        choices=["auto", "console", "json"],
        default="auto",
        help="log lines on stderr (default: console, or $HATLOOP_LOG_FORMAT)",
    )
    o.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=_run)


MIN_RECORD_BYTES = 1024  # the same floor as [recording] max_bytes


def _record_cap(raw: str) -> int:
    """``--record-max-bytes``: a whole number of bytes, at least the configured floor."""
    try:
        value = int(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {raw!r}") from exc
    if value < MIN_RECORD_BYTES:
        raise argparse.ArgumentTypeError(
            f"{value} is below the smallest cap, {MIN_RECORD_BYTES} bytes "
            "(leave the option out for the default, 100 MB)"
        )
    return value


def _recorder(
    args: argparse.Namespace, config: LoadedConfig, resumed: str | None
) -> list[Recorder]:
    """The recorder the flags ask for, checked and its file claimed now (created, or
    opened, and locked for this run): a refusal, another run that writes the file
    included, stops the run before it starts. ``resumed``: the id of the session a
    resume continues (it appends to the file, which must hold that session's recording
    if it holds one). The caller closes it."""
    if not args.record_session:
        given = [
            flag
            for flag, on in (
                ("--force", args.force),
                ("--no-redact", args.no_redact),
                ("--record-max-bytes", args.record_max_bytes is not None),
            )
            if on
        ]
        if given:  # a recording's options without a recording: surely a slip
            raise UsageError(f"{', '.join(given)}: only with --record-session FILE")
        return []
    from loop.session.recorder import Recorder  # noqa: PLC0415 - only when recording

    recorder = Recorder(
        Path(args.record_session),
        max_bytes=(
            config.recording.max_bytes if args.record_max_bytes is None else args.record_max_bytes
        ),
        force=args.force,
        append=resumed is not None,
        session_id=resumed,
        redact=config.recording.redact_secrets and not args.no_redact,
    )
    recorder.claim()  # checked is not enough: two runs may both find no file there
    if resumed is None:
        _warn_of_tool_state(config)
    return [recorder]


def _warn_of_tool_state(config: LoadedConfig) -> None:
    """Say what the tools hold before a new session is recorded: its replay starts in an
    empty folder, without it, so an agent's call that reads it replays otherwise."""
    import structlog  # noqa: PLC0415 - logging is configured by now

    from loop.runner import tool_context  # noqa: PLC0415 - on use
    from loop.session.target import tool_state_before  # noqa: PLC0415 - only when recording

    ctx = tool_context(config, config.root)
    held = tool_state_before(ctx.tasks_file, ctx.workspace, ctx.experiences_base)
    if held:
        structlog.get_logger("loop.run").warning(
            "recording: the tools already hold data that a replay starts without; a "
            "recorded call that reads it will replay otherwise",
            held="; ".join(held),
        )


def _warn_of_stuck_stand_ins(config: LoadedConfig) -> None:
    """Say before the run when the stand-ins of ``--backend scripted`` cannot complete it."""
    stuck = stand_ins(config.loop, config.hats).stuck
    if stuck:
        import structlog  # noqa: PLC0415 - logging is configured by now

        structlog.get_logger("loop.run").warning("stand-ins cannot complete", note=stuck)


def _live(args: argparse.Namespace) -> Any:
    """The live view the flags and the terminal ask for (a LiveExtension), or None.

    With JSON log lines, stderr is for machines: no live line, and ``-v`` output goes out
    as log events.
    """
    json_logs = log_format(args.log_format) == "json"
    live = not args.quiet and not json_logs and live_line_allowed(args.color)
    if not (live or args.verbose):
        return None
    from loop.commands.live import LiveExtension, LiveView  # noqa: PLC0415 - rich, on use

    view = LiveView(stream="stderr", live=live, colors=use_colors(args.color), log=json_logs)
    return LiveExtension(view, verbose=args.verbose)


def _run(args: argparse.Namespace) -> int:
    from loop.runner import RunOptions, run_loop, summary_dict  # noqa: PLC0415 - heavy

    if args.session_id == "":
        raise UsageError("--session-id: empty (leave it out for a generated id)")
    if args.record_session is not None and not args.record_session.strip():
        # ``--record-session "$REC"`` with REC unset: a CI job would pass unrecorded
        raise UsageError("--record-session: empty file name")
    if args.resume is not None and (args.prompt is not None or args.prompt_file is not None):
        flag = "--prompt" if args.prompt is not None else "--prompt-file"
        raise UsageError(
            f"{flag} with --resume: a resumed session keeps its objective (its recording "
            "and replay hold it); start a new session for another one"
        )
    config = load_from_args(args)
    resumed: str | None = None  # a resume's session, checked against its recording
    if args.resume is not None:
        config, resumed = _resumed(args, config)
    if config.flags.get("backend") == "scripted":
        _warn_of_stuck_stand_ins(config)
    if not args.no_preflight:
        from loop.session.preflight import preflight  # noqa: PLC0415 - on use

        hint = f"{prog_name()} doctor shows every check; run --no-preflight skips them"
        if report_checks(preflight(config), hint=hint):
            return EXIT_USAGE
    resume = args.resume is not None
    extra = _recorder(args, config, resumed)  # a recording that cannot be written stops here
    try:
        summary = completed = _completed_recording(config, resumed, extra)
        if summary is None:
            if not args.quiet:
                _announce(config)
            live = _live(args)
            options = RunOptions(
                workdir=config.root,
                session_id=resumed or args.resume or args.session_id or None,
                resume=resume,
                progress=not args.quiet,
                observer=live.observe if live is not None and args.verbose else None,
                limit_overrides=limit_overrides(args),
            )
            summary = run_async(run_loop, config, options, [*extra, *([live] if live else [])])
    finally:  # the session closed it; one that never started (refused) did not
        for recorder in extra:
            recorder.close()
    lines = [recorder.describe() for recorder in extra]
    ran = completed is None  # a session that had ended was exported as it ended
    if ran and wants_export(config, summary.reason, flag=args.export_experience):
        lines.append(_export(config, summary))
    if args.json:
        recording = [asdict(recorder.stats()) for recorder in extra]
        print_json(
            {
                **summary_dict(summary),
                "recording": recording[0] if recording else None,
                "extra": lines,
            }
        )
    else:
        print(render_summary(summary, lines))
    return int(summary.exit_code)


def _completed_recording(
    config: LoadedConfig, resumed: str | None, extra: list[Recorder]
) -> RunSummary | None:
    """``run --resume ID --record-session FILE`` on a session that has ended for good
    (completed or cancelled): FILE, its recording, completed from the journal, and no
    iteration run (:mod:`loop.session.complete`); the session's summary. ``None``: the
    session goes on as any resumed one."""
    if resumed is None or not extra:
        return None
    from loop.engine.schedule import schedule_of  # noqa: PLC0415 - resume only
    from loop.runner import RunOptions, resolve_session  # noqa: PLC0415 - heavy
    from loop.session.complete import complete_recording  # noqa: PLC0415 - resume only

    paths = resolve_session(
        config, RunOptions(workdir=config.root, session_id=resumed, resume=True)
    )
    return complete_recording(paths, extra[0], parallel=schedule_of(config).parallel)


def wants_export(config: LoadedConfig, reason: str, *, flag: bool) -> bool:
    """Whether a run that ended for ``reason`` is exported as an experience: always with
    ``--export-experience``; with ``[experience] export_on_complete`` when the loop
    completed (the section refuses it with ``enabled = false``)."""
    return flag or (config.experience.export_on_complete and reason == REASON_COMPLETED)


def _announce(config: LoadedConfig) -> None:
    """One line on stderr: the config file and the hats this run uses (or that it is the
    built-in demo, for want of a loop.toml)."""
    import structlog  # noqa: PLC0415 - logging is configured by now

    hats = ", ".join(f"{n} ({config.hat_backend(n).type})" for n in config.hats)
    log = structlog.get_logger("loop.run")
    if config.builtin:
        log.warning(
            "no loop.toml here or in a parent folder: running the built-in demo",
            hats=hats,
            start_your_own=f"{prog_name()} init",
        )
    else:
        log.info("config", file=config.source, root=str(config.root), hats=hats)


def _export(config: LoadedConfig, summary: RunSummary) -> str:
    from loop.experience.session_export import export_session  # noqa: PLC0415 - on use
    from loop.runner import tool_context  # noqa: PLC0415 - on use

    ctx = tool_context(config, config.root)
    try:
        result = export_session(ctx, Path(summary.session_dir))
    except LoopError as exc:  # the run's own result and exit code stand; say why, once
        code = f"{exc.code}: " if isinstance(exc, ToolError) else ""
        return f"experience export failed: {code}{exc.message}"
    return f"experience {result.session_id} exported"
