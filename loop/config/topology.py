"""The hat topology, in pure code: validation, the event flow, likely mistakes."""

from __future__ import annotations

from loop.config.models import LoadedConfig
from loop.errors import ConfigError, UsageError
from loop.events import is_reserved, patterns_overlap, topic_matches

__all__ = ["edges", "validate_topology", "warnings_for"]


def validate_topology(cfg: LoadedConfig) -> None:
    """Cross-checks: hats exist, triggers unambiguous, the starting event handled."""
    if not cfg.hats:
        raise ConfigError(
            "no hats defined: add [hats.NAME] tables or [loop] hats files",
            file=cfg.source,
            key="hats",
        )
    claimed: dict[str, str] = {}
    for name, hat in cfg.hats.items():
        where = cfg.hat_sources.get(name, cfg.source)
        for trig in hat.triggers:
            if trig in claimed:  # the bare `*` too: the first hat would take all it routes
                raise ConfigError(
                    f"trigger {trig!r} is claimed by hats {claimed[trig]!r} and "
                    f"{name!r} (each trigger may route to one hat)",
                    file=where,
                    key=f"hats.{name}.triggers",
                )
            claimed[trig] = name
        if cfg.loop.cancellation_event in hat.triggers:
            raise ConfigError(
                "a hat cannot be triggered by the cancellation event (it ends the run)",
                file=where,
                key=f"hats.{name}.triggers",
            )
    _check_completion_event(cfg)
    _check_aggregates(cfg)
    if cfg.loop.fallback_hat and cfg.loop.fallback_hat not in cfg.hats:
        raise ConfigError(
            f"fallback hat {cfg.loop.fallback_hat!r} is not defined",
            file=cfg.source,
            key="loop.fallback_hat",
        )
    start = cfg.loop.starting_event
    if not any(topic_matches(t, start) for h in cfg.hats.values() for t in h.triggers):
        raise ConfigError(
            f"no hat is triggered by the starting event {start!r}",
            file=cfg.source,
            key="loop.starting_event",
        )


def _check_aggregates(cfg: LoadedConfig) -> None:
    """An aggregating hat needs a wave: hats whose ``publishes`` can trigger it."""
    for name, hat in cfg.hats.items():
        if hat.aggregate is None:
            continue
        if not any(
            patterns_overlap(p, t)
            for other, spec in cfg.hats.items()
            if other != name
            for p in spec.publishes
            for t in hat.triggers
        ):
            raise ConfigError(
                "an aggregating hat waits for the hats that publish its triggers, and no "
                "other hat lists one of them in its publishes",
                file=cfg.hat_sources.get(name, cfg.source),
                key=f"hats.{name}.aggregate",
            )


def _check_completion_event(cfg: LoadedConfig) -> None:
    """No hat is triggered by the completion event. Given by ``--completion-event``, the
    flag is what is wrong, so the error names it (``loop.toml`` may be fine). (The rules
    between ``[loop]`` keys, the cancellation and required events among them, are
    :class:`~loop.config.sections.LoopSection`'s.)

    Raises:
        UsageError: the flag gave the completion event.
        ConfigError: ``loop.toml`` did, naming the key.
    """
    event = cfg.loop.completion_event
    for name, hat in cfg.hats.items():
        if event in hat.triggers:
            message = "a hat cannot be triggered by the completion event"
            if "completion_event" in cfg.flags:
                raise UsageError(
                    f"--completion-event {event}: {message} (it triggers hat {name!r})"
                )
            raise ConfigError(
                message, file=cfg.hat_sources.get(name, cfg.source), key=f"hats.{name}.triggers"
            )


def edges(config: LoadedConfig) -> list[tuple[str, str, str]]:
    """``(from_hat, topic, to_hat)`` for every published topic some hat triggers on."""
    out = []
    for name, hat in config.hats.items():
        for topic in hat.publishes:
            for other, o in config.hats.items():
                if any(t != "*" and topic_matches(t, topic) for t in o.triggers):
                    out.append((name, topic, other))
    return out


def warnings_for(config: LoadedConfig) -> list[str]:
    """Topology problems that are legal but probably mistakes."""
    warns = []
    comp = config.loop.completion_event
    for name, hat in config.hats.items():
        for topic in hat.publishes:
            if topic in (comp, config.loop.cancellation_event) or is_reserved(topic, comp):
                continue
            if not any(topic_matches(t, topic) for o in config.hats.values() for t in o.triggers):
                warns.append(f"hat {name!r} publishes {topic!r} but no hat is triggered by it")
    reached = {config.loop.starting_event}
    hats_reached: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, hat in config.hats.items():
            if name in hats_reached:
                continue
            if any(topic_matches(t, r) for t in hat.triggers for r in reached):
                hats_reached.add(name)
                reached.update(hat.publishes)
                changed = True
    for name in config.hats:
        if name not in hats_reached:
            warns.append(f"hat {name!r} cannot be reached from {config.loop.starting_event!r}")
    if not any(comp in h.publishes for h in config.hats.values()):
        warns.append(f"no hat lists {comp!r} in publishes: the loop may never complete")
    for topic in config.loop.required_events:
        if not any(topic_matches(p, topic) for h in config.hats.values() for p in h.publishes):
            warns.append(
                f"required event {topic!r} is in no hat's publishes: the loop may never complete"
            )
    return warns
