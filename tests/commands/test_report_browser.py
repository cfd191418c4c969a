"""`loop report` in a real headless browser: Debian's Chromium driven by Playwright.

Playwright's own browser download cannot work offline, so it drives the system's
Chromium (`/usr/bin/chromium`, which `./scripts/check` installs when it runs as root
with apt). The tests skip only where no Chromium can be had. The page is opened from
disk (`file://`), as a person opens it; any request other than the page itself fails
the test, and so does any console error (a Content-Security-Policy violation is one).
Screenshots go to `.ci/artifacts/` (git-ignored), kept by CI as artifacts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loop.commands.report import PAGE
from tests.commands.helpers import HOSTILE, hostile_recording, loop, pingpong_session

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".ci" / "artifacts"
CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).is_file()),
    None,
)
# The flags a headless Chromium needs here: as root (no sandbox), no GPU, and nothing
# that phones home (the network is closed; without these it retries lookups at start).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # a dev dependency: a missing one is a broken set-up, not a skip
        pytest.fail("playwright is missing: pip install -e '.[dev]'")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Opened:
    """A report open in a tab, with everything it asked for and complained about."""

    def __init__(self, browser: Any, path: Path, fragment: str = "") -> None:
        self.url = path.resolve().as_uri()
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.requests: list[str] = []
        self.problems: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on(
            "console",
            lambda m: self.problems.append(m.text) if m.type in ("error", "warning") else None,
        )
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.goto(self.url + fragment)
        self.page.wait_for_selector("body[data-ready=true]")

    def text(self, selector: str) -> str:
        return str(self.page.inner_text(selector))

    def check_clean(self) -> None:
        assert self.requests and all(r == self.url for r in self.requests), self.requests
        assert self.problems == []

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / name), full_page=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real recorded run of the default preset, reported; and the committed recording
    of the command backend (with a failed iteration) with hostile text in it."""
    where = tmp_path_factory.mktemp("browser")
    res = loop("run", "-q", "--session-id", "demo", "--record-session", "rec.jsonl", cwd=where)
    assert res.returncode == 0, res.stderr
    assert loop("report", "rec.jsonl", "-o", "rec.html", cwd=where).returncode == 0
    hostile_recording(REPO / "recordings" / "command.jsonl", where / "hostile.jsonl")
    assert loop("report", "hostile.jsonl", "-o", "hostile.html", cwd=where).returncode == 0
    return where


def test_a_recorded_session_renders_and_an_iteration_expands(browser: Any, folder: Path) -> None:
    """The count, the outcome, the pictures and the hat table show; clicking iteration 3
    opens its prompt, output and events."""
    tab = Opened(browser, folder / "rec.html")
    assert tab.text("#iteration-count") == "5"
    assert tab.text("#pager-summary") == "showing 1–5 of 5"
    assert tab.text("#outcome").startswith("completed after 5 iteration(s)")
    assert tab.page.locator("svg.timeline a rect.bar").count() == 5
    assert tab.page.locator("svg.graph path.edge").count() == 5
    assert tab.page.locator("#hat-table tbody tr").count() == 3
    assert tab.page.locator("tr.detail").count() == 0
    tab.page.click("#it-3")
    tab.page.wait_for_selector("tr.detail pre.prompt")
    assert tab.text("tr.detail pre.prompt").startswith("# hatloop · iteration 3 · hat `reviewer`")
    assert "missing test: extra spaces between words" in tab.text("tr.detail pre.output")
    assert "review.rejected" in tab.text("tr.detail")
    assert "build.done" in tab.text("tr.detail")  # what triggered it
    tab.shot("report-recording.png")
    tab.page.click("#it-3")  # and closes again
    assert tab.page.locator("tr.detail").count() == 0
    tab.check_clean()


def test_a_timeline_bar_opens_its_iteration(browser: Any, folder: Path) -> None:
    """A bar links to `#it-N`: the list opens that iteration."""
    tab = Opened(browser, folder / "rec.html")
    tab.page.click('svg.timeline a[href="#it-4"] rect')
    tab.page.wait_for_selector("#it-4.open + tr.detail pre.prompt")
    assert "iteration 4 · hat `builder`" in tab.text("tr.detail pre.prompt")
    tab.check_clean()


def test_hostile_text_shows_as_text_and_runs_nothing(browser: Any, folder: Path) -> None:
    """`</script>`, an `<img onerror>` and a comment in every free text: shown literally,
    nothing executed, the page intact; the failed iteration is marked and filterable."""
    tab = Opened(browser, folder / "hostile.html")
    assert tab.page.evaluate("window.__pwned") is None
    assert tab.page.locator("img").count() == 0
    assert tab.text("#iteration-count") == "7"
    tab.page.select_option("#filter-status", "failed")
    assert tab.text("#pager-summary") == "showing 1–1 of 1 (filtered from 7)"
    tab.page.click("#it-2")
    tab.page.wait_for_selector("tr.detail pre.prompt")
    assert tab.text("tr.detail pre.prompt").startswith(HOSTILE[:40])
    assert HOSTILE[:60] in tab.text("tr.detail")
    assert tab.page.evaluate("window.__pwned") is None
    assert tab.page.locator("img").count() == 0
    tab.shot("report-hostile.png")
    tab.check_clean()


def test_a_10000_iteration_session_pages_and_opens_any_iteration(
    browser: Any, tmp_path: Path
) -> None:
    """A real 10,000-iteration run: the count is shown, the list holds one page, the pager
    walks it, and a link opens an iteration deep in it with its prompt."""
    recording = pingpong_session(tmp_path, 10_000)
    res = loop("report", str(recording), "-o", "big.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    tab = Opened(browser, tmp_path / "big.html")
    assert tab.text("#iteration-count") == "10000"
    assert tab.text("#pager-summary") == f"showing 1–{PAGE} of 10000"
    assert tab.page.locator("tr.it").count() == PAGE
    tab.page.click("text=last »")
    assert tab.text("#pager-summary") == f"showing {10_000 - PAGE + 1}–10000 of 10000"
    tab.page.click("#it-9999")
    tab.page.wait_for_selector("tr.detail pre.prompt")
    assert tab.text("tr.detail pre.prompt").startswith("# hatloop · iteration 9999 · hat `ping`")
    tab.page.fill("#filter-topic", "pong")
    assert tab.text("#pager-summary") == f"showing 1–{PAGE} of 5000 (filtered from 10000)"
    tab.page.evaluate("location.hash = '#it-5235'")  # a ping: the filter gives way
    tab.page.wait_for_selector("#it-5235.open + tr.detail pre.prompt")
    assert "iteration 5235 · hat `ping`" in tab.text("#it-5235 + tr.detail pre.prompt")
    assert tab.text("#pager-summary") == "showing 5201–5300 of 10000"
    tab.shot("report-10000.png")
    tab.check_clean()
