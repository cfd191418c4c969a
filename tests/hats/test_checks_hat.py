"""The repository's Python hat (hats/checks.py) gives real backpressure from real tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.backends.python_hat import PythonBackend
from loop.config import load_config
from loop.testing import make_config, run_hats, scripted, tag

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("body", "verdict"),
    [("assert 1 + 1 == 2", "tests.passed"), ("assert 1 + 1 == 3", "tests.failed")],
)
async def test_checks_hat_publishes_the_verdict_of_the_real_test_run(
    tmp_path: Path, body: str, verdict: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_tests runs pytest in the project and publishes tests.passed or tests.failed."""
    (tmp_path / "test_sample.py").write_text(f"def test_sample():\n    {body}\n")
    monkeypatch.syspath_prepend(str(REPO))
    cfg = make_config(
        {
            "checks": {"triggers": ["task.start"], "publishes": ["tests.passed", "tests.failed"]},
            "judge": {"triggers": ["tests.*"], "publishes": ["LOOP_COMPLETE"]},
        },
        folder=tmp_path,
    )
    backends = {
        "checks": PythonBackend("hats.checks:run_tests"),
        "judge": scripted(tag("LOOP_COMPLETE")),
    }
    summary, cap = await run_hats(cfg, backends, workdir=tmp_path)
    assert summary.reason == "completed"
    result = next(e for e in cap.events if e.topic.startswith("tests."))
    assert result.topic == verdict
    assert ("1 passed" if verdict == "tests.passed" else "1 failed") in result.payload


def test_the_hats_folder_exposes_the_presets_and_the_checks_hat(tmp_path: Path) -> None:
    """hats/default and hats/claude are the packaged presets; checks.toml validates."""
    default = load_config(root=tmp_path, hats=[REPO / "hats/default"])
    assert sorted(default.hats) == ["builder", "planner", "reviewer"]
    assert (REPO / "hats/default").resolve() == (REPO / "loop/presets/default/hats").resolve()
    checks = load_config(root=tmp_path, hats=[REPO / "hats/default", REPO / "hats/checks.toml"])
    assert checks.hat_backend("checks").type == "python"
