"""`loop report`: one self-contained HTML file, read back here as data (no browser).

The browser tests (test_report_browser.py) open the same pages in Chromium.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import structlog

from loop.cli import main
from loop.commands.report import CHUNK, render_report, script_json
from loop.commands.report_svg import graph_svg, timeline_svg
from loop.engine.session_dir import SessionLock
from loop.session.load import load_session
from loop.session.view import END, flows
from tests.commands.helpers import (
    HOSTILE,
    hostile_recording,
    loop,
    pingpong_session,
    waited_session,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


class Page(HTMLParser):
    """The parts of a report page the tests read: scripts, style, CSP, ids, links."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[str | None, str | None, str]] = []  # (type, id, text)
        self.styles: list[str] = []
        self.csp = ""
        self.urls: list[str] = []
        self.text: dict[str, str] = {}
        self._in: tuple[str, str | None, str | None] | None = None
        self._buf: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy":
            self.csp = a.get("content") or ""
        for key in ("src", "href"):
            if a.get(key) and not str(a[key]).startswith("#"):
                self.urls.append(str(a[key]))
        if tag in ("script", "style") or a.get("id") in ("iteration-count", "outcome"):
            self._in, self._buf = (tag, a.get("type"), a.get("id")), []

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._buf.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._in is None or (tag != self._in[0] and tag in ("script", "style")):
            return
        text = "".join(self._buf)
        kind, typ, ident = self._in
        if kind == "script":
            self.scripts.append((typ, ident, text))
        elif kind == "style":
            self.styles.append(text)
        elif ident:
            self.text[ident] = text
        self._in = None

    def json(self, ident: str) -> Any:
        return json.loads(next(t for _, i, t in self.scripts if i == ident))


def details(page: Page) -> list[dict[str, Any]]:
    """Every iteration's details, unpacked as the page's script unpacks them."""
    out = []
    for block in page.json("report-details"):
        out.extend(json.loads(gzip.decompress(base64.b64decode(block))))
    return out


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where `python -m loop run --record-session rec.jsonl` ran (session demo)."""
    folder = tmp_path_factory.mktemp("report")
    res = loop("run", "-q", "--session-id", "demo", "--record-session", "rec.jsonl", cwd=folder)
    assert res.returncode == 0, res.stderr
    return folder


def test_report_writes_one_page_from_an_id_a_journal_or_a_recording(
    recorded: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Default name: `<session id>.html` in the current folder; `-o` anywhere (its folder
    is made); the journal and the recording give the same iterations."""
    monkeypatch.chdir(recorded)
    assert main(["report", "demo"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"report written to demo\.html \(5 iteration\(s\), \d+ KB\)\n", out)
    from_journal = Page((recorded / "demo.html").read_text(encoding="utf-8"))
    assert main(["report", "rec.jsonl", "-o", "out/deeper/rec.html"]) == 0
    capsys.readouterr()
    from_recording = Page((recorded / "out/deeper/rec.html").read_text(encoding="utf-8"))
    for page in (from_journal, from_recording):
        assert page.text["iteration-count"] == "5"
        data = page.json("report-data")
        assert [data["hats"][i["h"]] for i in data["its"]] == [
            "planner",
            "builder",
            "reviewer",
            "builder",
            "reviewer",
        ]
        assert page.text["outcome"] == page.text["outcome"].strip()
        assert page.text["outcome"].startswith("completed after 5 iteration(s) in ")
    assert details(from_journal) == details(from_recording)


def test_the_page_is_self_contained_and_its_csp_allows_only_its_own_code(
    recorded: Path,
) -> None:
    """No URL to fetch; the policy allows no network, and exactly the page's one script and
    one style (by hash); the data blocks are JSON, not code."""
    html = render_report(load_session(recorded / "rec.jsonl"))
    page = Page(html)
    assert page.urls == []
    assert "http://" not in html and "https://" not in html
    code = [t for typ, _, t in page.scripts if typ is None]
    assert len(code) == 1 and len(page.styles) == 1
    assert {typ for typ, _, _ in page.scripts} == {None, "application/json"}
    policy = dict(p.strip().split(" ", 1) for p in page.csp.split(";"))
    assert policy == {
        "default-src": "'none'",
        "script-src": sha(code[0]),
        "style-src": sha(page.styles[0]),
        "img-src": "data:",
        "base-uri": "'none'",
        "form-action": "'none'",
    }


def test_every_iteration_is_in_the_page_once(recorded: Path) -> None:
    """The summary row and the packed details of each iteration: prompt, output, events."""
    view = load_session(recorded / "rec.jsonl")
    page = Page(render_report(view))
    rows, full = page.json("report-data")["its"], details(page)
    assert [r["n"] for r in rows] == [1, 2, 3, 4, 5]
    assert len(full) == 5
    for it, row, d in zip(view.iterations, rows, full, strict=True):
        assert d["prompt"] == it.prompt and d["output"] == it.output
        assert [e[0] for e in d["events"]] == [e.topic for e in it.events]
        assert [e[0] for e in d["triggers"]] == [e.topic for e in it.triggers]
        assert row["d"] == it.duration
        assert row["ev"] == [e.topic for e in it.events]
    assert rows[4]["done"] == 1 and "f" not in rows[0]


def test_hostile_text_is_escaped_everywhere(recorded: Path, tmp_path: Path) -> None:
    """`</script>`, tags, comments and line separators in prompts, outputs, payloads,
    reasons, notes, meta and the file name: the page's structure is unchanged (one code
    script, two data blocks) and the text comes back intact from the data."""
    path = tmp_path / 'x<b>&"y.jsonl'
    hostile_recording(REPO / "recordings" / "command.jsonl", path)
    html = render_report(load_session(path))
    page = Page(html)
    assert [(typ, ident) for typ, ident, _ in page.scripts] == [
        ("application/json", "report-data"),
        ("application/json", "report-details"),
        (None, None),
    ]
    assert html.count("</script>") == 3
    assert "<img" not in html and "<b>" not in html and "<!--" not in html
    assert "x&lt;b&gt;&amp;&quot;y.jsonl" in html
    full = details(page)
    assert all(d["prompt"].startswith(HOSTILE) for d in full)
    assert all(e[3] == HOSTILE for d in full for e in d["events"] + d["triggers"])
    failed = [r for r in page.json("report-data")["its"] if r.get("f")]
    assert [r["r"] for r in failed] == [HOSTILE]


def test_script_json_cannot_close_its_element() -> None:
    """The JSON in a script element has no `<`, `>` or `&`, and still decodes the same."""
    value = {"a": "</script><!--x-->&amp;\u2028\u2029", "b": ["<", ">"]}
    text = script_json(value)
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == value


def test_report_of_a_failed_and_a_resumed_session_marks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed iteration is listed with its reason and linked; a limit, an end before a
    resume and the resume are listed; the outcome says how it ended."""
    res = loop("run", "-q", "--session-id", "s", "--max-iterations", "2", cwd=tmp_path)
    assert res.returncode == 3
    res = loop("run", "-q", "--resume", "s", "--max-iterations", "4", cwd=tmp_path)
    assert res.returncode == 3
    page_html = render_report(load_session(tmp_path / ".loop/sessions/s/journal.jsonl"))
    assert 'class="outcome limit"' in page_html
    assert "ended by a limit: max_iterations" in page_html
    assert 'ended after <a href="#it-2">iteration 2</a>: max_iterations after 2' in page_html
    assert 'resumed after <a href="#it-2">iteration 2</a>: resumed by pid' in page_html
    html = render_report(load_session(REPO / "recordings" / "command.jsonl"))
    assert '<a href="#it-2">iteration 2</a> (checker) failed: exit status 3: flaky check' in html
    assert 'class="bar failed"' in html


def test_a_10000_iteration_session_stays_a_small_page(tmp_path: Path) -> None:
    """Ten thousand iterations of a real run: each is in the page once (details in blocks
    of a page each), the timeline merges what it cannot tell apart, and the page is a
    small fraction of the recording."""
    recording = pingpong_session(tmp_path, 10_000)
    view = load_session(recording)
    assert len(view.iterations) == 10_000
    html = render_report(view)
    page = Page(html)
    assert page.text["iteration-count"] == "10000"
    assert len(page.json("report-data")["its"]) == 10_000
    blocks = page.json("report-details")
    assert len(blocks) == 10_000 // CHUNK
    iteration_5234 = json.loads(gzip.decompress(base64.b64decode(blocks[52])))[33]
    assert iteration_5234["output"] == 'pong 2616\n<event topic="pong.x">2616</event>'
    assert iteration_5234["prompt"].startswith("# hatloop · iteration 5234 · hat `pong`")
    assert html.count("<rect ") < 2 * 1000 + 20  # at most a bar per column and lane
    assert len(html.encode()) * 8 < recording.stat().st_size


def test_the_hat_graph_draws_the_flows(recorded: Path) -> None:
    """Nodes for the loop, each hat (with its runs) and the end; one arc per pair that
    events flowed between, labelled with topic and count."""
    view = load_session(recorded / "rec.jsonl")
    found = {(f.source, f.target, f.topic): f.count for f in flows(view)}
    assert found == {
        ("loop", "planner", "task.start"): 1,
        ("planner", "builder", "plan.ready"): 1,
        ("builder", "reviewer", "build.done"): 2,
        ("reviewer", "builder", "review.rejected"): 1,
        ("reviewer", END, "LOOP_COMPLETE"): 1,
    }
    svg = graph_svg(view, flows(view))
    assert svg.count('<path class="edge"') == 5
    assert ">build.done ×2<" in svg and ">review.rejected ×1<" in svg
    names = re.findall(r'class="node-name"[^>]*>([^<]*)<', svg)
    assert names == ["loop", "planner", "builder", "reviewer", END]
    assert svg.count(">×2<") == 2 and ">×1<" in svg


def test_the_timeline_has_a_lane_per_hat_and_a_bar_per_iteration(recorded: Path) -> None:
    """Few iterations: one linked bar each, in its hat's lane, with its status in the title."""
    svg = timeline_svg(load_session(recorded / "rec.jsonl"))
    assert re.findall(r'class="lane"[^>]*>([^<]*)<', svg) == ["builder", "planner", "reviewer"]
    links = re.findall(r'<a href="#it-(\d+)">', svg)
    assert sorted(map(int, links)) == [1, 2, 3, 4, 5]
    assert "<title>#3 reviewer · ok · took " in svg


def test_a_limit_waited_out_is_a_bar_and_a_marker_of_the_report(tmp_path: Path) -> None:
    """The planner waited out two rate limits before its call: each wait is a bar in the
    planner's lane from where it began for as long as it lasted, before the planner's
    bar, linked to the iteration; the markers section lists both; the axis spans them."""
    view = load_session(waited_session(tmp_path))
    first, second = view.waits
    svg = timeline_svg(view)
    bars = re.findall(r'<rect class="wait" x="([\d.]+)" y="(\d+)" width="([\d.]+)"', svg)
    assert len(bars) == 2
    planner_y = re.search(r'class="bar" x="[\d.]+" y="(\d+)"[^>]*><title>#1 planner', svg)
    assert planner_y is not None and {y for _, y, _ in bars} == {planner_y.group(1)}
    (x0, _, w0), (x1, _, _) = ((float(x), y, float(w)) for x, y, w in bars)
    assert x0 == 120.0 and x1 == pytest.approx(x0 + w0, abs=0.2)  # from 0 s, one after another
    assert "<title>planner waited " in svg and 'href="#it-1"><rect class="wait"' in svg
    assert svg.count('class="marker') == 0  # waits are bars, not dashed lines
    page = render_report(view)
    assert (
        f'<li class="warn">wait before the first iteration: planner waited {first.seconds:.2f}s '
        "for rate_limit (iteration 1): 429 Too Many Requests</li>"
    ) in page
    assert f"planner waited {second.seconds:.2f}s" in page


def test_report_of_a_running_session_says_its_time_so_far_and_draws_what_runs(
    recorded: Path, tmp_path: Path
) -> None:
    """A session whose builder (iteration 2) runs: the page says the runtime so far, as
    status does (not the last commit's), the outcome names the iteration in flight, the
    timeline draws it as an open bar in the builder's lane, and the hat graph has the
    builder running on plan.ready. Killed instead, the figure is the last commit's and
    says so."""
    lines = (recorded / ".loop/sessions/demo/journal.jsonl").read_bytes().splitlines(True)
    starts = [n for n, line in enumerate(lines) if line.startswith(b'{"kind":"iteration.start"')]
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b"".join(lines[: starts[1] + 1]))
    lock = SessionLock(tmp_path / "lock")
    lock.acquire()
    try:
        view = load_session(journal)
        page = render_report(view)
    finally:
        lock.release()
    committed = view.iterations[0].elapsed
    assert view.elapsed_as_of == "now" and view.elapsed > committed
    assert "<dt>elapsed so far</dt>" in page
    assert re.search(r"running: [\d.]+s so far, iteration 2 in flight, no end record yet", page)
    svg = timeline_svg(view)
    builder_y = re.search(r'class="lane" x="\d+" y="(\d+)">builder<', svg)
    open_bar = re.search(r'<rect class="bar open" x="[\d.]+" y="(\d+)"[^>]*><title>([^<]*)<', svg)
    assert builder_y is not None and open_bar is not None
    assert int(open_bar.group(1)) == int(builder_y.group(1)) - 11  # the builder's lane
    assert open_bar.group(2).startswith("#2 builder · running since ")
    found = {(f.source, f.target, f.topic): f.count for f in flows(view)}
    assert found[("planner", "builder", "plan.ready")] == 1
    assert ">1 running<" in graph_svg(view, flows(view))
    killed = load_session(journal)  # no run holds it: stopped without an end
    assert (killed.elapsed, killed.elapsed_as_of) == (committed, "last_commit")
    page = render_report(killed)
    assert "<dt>elapsed at the last commit</dt>" in page
    assert "in flight when its run stopped without an end" in timeline_svg(killed)
    assert ">1 in flight<" in graph_svg(killed, flows(killed))


def test_the_events_figure_counts_what_the_hats_published_as_the_summary_does() -> None:
    """The tools recording: the hats published 4 events, and the loop one more during an
    iteration; the figure is the hats' 4, as the run's summary and the per-hat table
    count them."""
    view = load_session(REPO / "recordings" / "tools.jsonl")
    assert sum(len(i.published) for i in view.iterations) == 5
    page = render_report(view)
    assert "<dt>events by hats</dt><dd>4</dd>" in page
    table = page[page.index('<table id="hat-table">') :].split("</table>")[0]
    events = [int(n) for n in re.findall(r"<td class=num>(\d+)</td></tr>", table)]
    assert sum(events) == 4


def test_report_errors_are_one_line_with_exit_2(
    recorded: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unknown id, a file that is no session, `-o` a folder, a link or below a file: one
    line, exit 2, no file."""
    monkeypatch.chdir(recorded)
    (recorded / "folder").mkdir(exist_ok=True)
    (recorded / "notes.txt").write_text("hello\n", encoding="utf-8")
    if not (recorded / "link.html").is_symlink():
        (recorded / "link.html").symlink_to(recorded / "elsewhere.html")
    for args, message in (
        (["report", "nope"], "unknown session 'nope'"),
        (["report", "notes.txt"], "neither a session journal nor a recording"),
        (["report", "demo", "-o", "folder"], "folder: is a folder; -o needs a file name"),
        (["report", "demo", "-o", "link.html"], "link.html: is a symbolic link; -o needs"),
        (["report", "demo", "-o", "notes.txt/r.html"], "notes.txt is not a folder"),
    ):
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and message in err, err
    assert not (recorded / "nope.html").exists()
