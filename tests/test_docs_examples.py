"""The configuration the docs show is one a run accepts: configuration.md's complete
``loop.toml`` and its hat file, written out as the docs name them, load and validate."""

from __future__ import annotations

import re
from pathlib import Path

from loop.config import load_config
from loop.config.topology import warnings_for

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
# a fenced TOML block whose first line names its file: "# loop.toml", "# hats/x.toml"
_NAMED = re.compile(r"^```toml\n# (\S+\.toml)\b[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _examples() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _NAMED.finditer(DOC.read_text(encoding="utf-8"))}


def test_the_documented_configuration_loads_as_written(tmp_path: Path) -> None:
    """loop.toml and the hat file of configuration.md: every key they show is valid, the
    hats are read from the folder the example names, and the topology has no warning."""
    examples = _examples()
    assert "loop.toml" in examples and any(name.startswith("hats/") for name in examples)
    for name, text in examples.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    config = load_config(tmp_path / "loop.toml", root=tmp_path)
    shown = {key for hat in config.hats.values() for key in hat.model_fields_set}
    for key in ("default_publishes", "max_cost_usd", "concurrency", "group_by", "aggregate"):
        assert key in shown, key
    assert config.loop.fallback_hat in config.hats
    assert warnings_for(config) == []
