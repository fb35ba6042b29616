"""report.html in a real browser (headless Chromium): every chart drawn, no error on the page or
its console, tables that sort and filters that narrow a chart as a reader's clicks would, and not
one network request. Without Chromium these tests skip; .ci/run installs it."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import altair as alt
import polars as pl
import psutil
import pytest

from benchlib import html as report_html
from benchlib.outputs import REPO_ROOT

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no headless browser: apt-get install chromium "
                                                              "(Debian's; .ci/run installs it)")
DEADLINE_S = 60
# a console line in Chromium's log: '[pid:tid:time:INFO:CONSOLE:12] "message", source: file:///... (12)'
# (older builds: 'CONSOLE(12)'); the log does not say whether it was an error, a warning or a log
CONSOLE = re.compile(r'(?::CONSOLE(?::\d+)?|CONSOLE\(\d+\))\]\s*"(.*)", source: ')


def browse(page: Path, tmp: Path, *flags: str) -> tuple[str, str]:
    """(the DOM once the page settled, Chromium's log) for `page` opened from disk. Chromium runs
    in a session of its own, with its own profile, and no process of that session outlives this."""
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    args = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update",
            "--virtual-time-budget=15000", "--enable-logging=stderr", "--v=0", *flags, "--dump-dom", page.as_uri()]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        try:
            dom, log = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"chromium did not finish {page.name} within {DEADLINE_S} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its helpers (zygote, GPU, renderer), if any is left
        except ProcessLookupError:
            pass
        proc.wait()
        deadline = time.monotonic() + 10
        while (left := _session(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"chromium processes outlived the test: {left}"
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {log[-2000:]}"
    return dom, log


def _session(sid: int) -> list[int]:
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def _attr(dom: str, tag: str, name: str) -> str | None:
    found = re.search(rf'<{tag}\b[^>]*\s{name}="([^"]*)"', dom)
    return html.unescape(found.group(1)) if found else None


def problems(dom: str, log: str) -> list[str]:
    """What is wrong with a page Chromium rendered: charts not drawn, errors the page recorded,
    console lines that are not warnings the page recorded as such. Empty: nothing."""
    out = []
    if _attr(dom, "body", "data-charts-done") != "true":
        out.append("the charts never settled (no data-charts-done)")
    expected, rendered = _attr(dom, "body", "data-charts-expected"), _attr(dom, "body", "data-charts-rendered")
    boxes = re.findall(r'<span class="chart" id="([^"]+)"', dom)
    if expected != str(len(boxes)) or rendered != expected:
        out.append(f"{rendered} of {expected} charts rendered ({len(boxes)} chart containers)")
    parts = re.split(r'(?=<span class="chart" id=")', dom.split("</main>")[0])[1:]
    for box, part in zip(boxes, parts):
        drawn = re.search(r'<(svg|canvas)\b([^>]*)>', part)
        size = dict(re.findall(r'\s(width|height)="([0-9.]+)', drawn.group(2))) if drawn else {}
        if not drawn or not all(float(size.get(k, 0)) > 0 for k in ("width", "height")):
            out.append(f"{box}: no SVG or canvas with a size")
    if _attr(dom, "html", "data-errors") != "0":
        recorded = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', dom, re.S)
        out.append(f"errors recorded by the page: {html.unescape(recorded.group(1)) if recorded else '?'}")
    warnings = re.search(r'<pre id="warnings"[^>]*>(.*?)</pre>', dom, re.S)
    warned = html.unescape(warnings.group(1)) if warnings else ""
    for message in CONSOLE.findall(log):
        if not (message and message in warned):
            out.append(f"console: {message}")
    return out


def _rows() -> pl.DataFrame:
    return pl.DataFrame([
        {"backend": b, "queue": q, "system": f"{b}/{q}", "consumers": c, "batch_size": n, "sample": s,
         "throughput": 100.0 * c * n * (1.2 if q == "pgmq" else 1.0) + 10 * s}
        for b in ("postgres", "sqlite") for q in ("skip_locked", "pgmq") for c in (1, 2, 4) for n in (1, 10)
        for s in range(3)])


def charts() -> dict[str, alt.TopLevelMixin]:
    """A faceted chart of layers (the drain study's shape) and a layered one with its own tooltips."""
    df = _rows()
    line = alt.Chart().mark_line(point=True).encode(x="consumers:O", y="mean(throughput):Q", color="batch_size:O")
    bars = alt.Chart().mark_errorbar(extent="stdev").encode(x="consumers:O", y="throughput:Q")
    faceted = alt.layer(line, bars).properties(width=200, height=120).facet(
        facet="system:N", columns=4, data=df)
    layered = alt.layer(
        alt.Chart(df).mark_point().encode(x="consumers:Q", y="throughput:Q", color="queue:N",
                                          tooltip=["queue", "backend", "consumers", "batch_size", "throughput"]),
        alt.Chart(df).mark_rule(color="#b42318").encode(y="mean(throughput):Q"),
    ).properties(width=500, height=200)
    return {"figures/test/faceted.svg": faceted, "figures/test/layered chart.svg": layered}


MARKDOWN = """<!-- Generated by a test. -->
# Queues, tested

Links stay links: [method](METHOD.md), [the table](#the-systems-at-a-glance), https://example.org in text.

## The systems at a glance

| system | kept up with, jobs/s | enqueue, best | version |
|:---|:---|---:|:---|
| skip_locked | 19,390 – 21,145 (long hold 1 of 3) | 53,183 jobs/s | this repository |
| river | 40 – 44 (its settings' ceiling) | – | river v0.51.1 |
| pgmq | 10,904 (a 15 s pass) | 45,973 jobs/s | pgmq 1.1.4 |
| absurd | ≥ 535 (the producers fell short) | 2,173 jobs/s | absurd-sdk 0.5.1 |
| pgq | – | 980 jobs/s | pgq 3.5 |

## Drain

![throughput, one panel per system](figures/test/faceted.svg)

![every sample](figures/test/layered%20chart.svg)

![a static figure](figures/test/static.svg)
"""
KINDS = {"skip_locked": "reference", "pgmq": "product"}

# The test's own hands, appended to the page: once the charts settled, click a table header
# twice and pick filters as a reader would, then leave what it saw on <body data-seen>.
READER = """<script type="module">
const until = async ok => { for (let i = 0; i < 100 && !ok(); i++) await new Promise(r => setTimeout(r, 50)); };
await until(() => document.body.dataset.chartsDone);
const seen = {};
const table = document.querySelector("main table");
const header = [...table.tHead.rows[0].cells].find(c => c.textContent.trim().startsWith("kept up with"));
const order = () => [...table.tBodies[0].rows].map(r => r.cells[0].textContent.trim());
header.click(); seen.ascending = order();
header.click(); seen.descending = order();
const version = [...table.tHead.rows[0].cells].find(c => c.textContent.trim() === "version");
version.click(); seen.byVersion = order();
async function pick(id, filter, value) {
  const box = document.getElementById(id);
  const points = () => box.querySelectorAll(".view svg .mark-symbol.role-mark path").length;
  const before = points();
  const select = box.querySelector(`select[data-filter="${filter}"]`);
  if (!select) return {missing: filter};
  select.value = value;
  select.dispatchEvent(new Event("change"));
  await until(() => points() !== before);
  const after = points(), rows = box.dataset.rows;
  select.value = "";
  select.dispatchEvent(new Event("change"));
  await until(() => points() === before);
  return {before, after, rows, restored: points(), options: [...select.options].map(o => o.value)};
}
seen.backend = await pick("chart-figures-test-faceted-svg", "backend", "sqlite");
seen.kind = await pick("chart-figures-test-faceted-svg", "kind", "product");
seen.consumers = await pick("chart-figures-test-layered-chart-svg", "consumers", "4");
seen.batch = await pick("chart-figures-test-layered-chart-svg", "batch", "10");
// hover a point of the faceted chart, whose author gave it no tooltip
const point = document.querySelector("#chart-figures-test-faceted-svg .view svg .mark-symbol.role-mark path");
const r = point.getBoundingClientRect();
for (const type of ["pointerover", "pointermove", "mouseover", "mousemove"]) {
  point.dispatchEvent(new PointerEvent(type, {bubbles: true, clientX: r.x + r.width / 2, clientY: r.y + r.height / 2}));
}
await until(() => document.getElementById("vg-tooltip-element")?.textContent);
seen.tooltip = document.getElementById("vg-tooltip-element")?.textContent || "";
document.body.dataset.seen = JSON.stringify(seen);
</script>
"""


def _at_the_end(page: str, tags: str) -> str:
    """`page` with `tags` just before its </body> (the last one: the inlined bundle's strings have others)."""
    end = page.rindex("</body>")
    return page[:end] + tags + page[end:]


def _write(tmp: Path, text: str, name: str = "report.html") -> Path:
    (tmp / "figures" / "test").mkdir(parents=True, exist_ok=True)
    (tmp / "figures" / "test" / "static.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>')
    path = tmp / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def built() -> str:
    return report_html.page(MARKDOWN, charts(), title="Queues, tested", kinds=KINDS)


@pytest.fixture(scope="module")
def browsed(built, tmp_path_factory) -> tuple[str, str]:
    if CHROMIUM is None:
        pytest.skip("no headless browser: apt-get install chromium (Debian's; .ci/run installs it)")
    tmp = tmp_path_factory.mktemp("html")
    return browse(_write(tmp, _at_the_end(built, READER)), tmp)


def _seen(dom: str) -> dict:
    value = _attr(dom, "body", "data-seen")
    assert value, "the reader's script did not finish"
    return json.loads(value)


def test_the_same_inputs_give_the_same_bytes(built):
    assert report_html.page(MARKDOWN, charts(), title="Queues, tested", kinds=KINDS) == built
    assert built.count("window.vegaEmbed=") == 1  # the bundle once, however many charts


def test_markdown_becomes_the_page(built):
    assert "<title>Queues, tested</title>" in built
    assert '<h2 id="the-systems-at-a-glance">' in built  # report.md's #links land
    assert '<a href="METHOD.md">method</a>' in built
    assert '<img src="figures/test/static.svg" alt="a static figure" />' in built  # not a chart: stays an image
    assert built.count('<span class="chart" ') == 2
    assert "<!-- Generated by a test. -->" in built


def test_a_chart_the_markdown_does_not_show_stays_out_of_the_page(built):
    unseen = alt.Chart(pl.DataFrame({"unseen_field": [1]})).mark_point().encode(x="unseen_field:Q")
    page = report_html.page(MARKDOWN, {**charts(), "figures/elsewhere.svg": unseen}, title="Queues, tested", kinds=KINDS)
    assert page == built


@needs_chromium
def test_every_chart_renders_without_an_error(browsed):
    dom, log = browsed
    assert problems(dom, log) == []
    assert _attr(dom, "body", "data-charts-rendered") == "2"
    tooltip = _seen(dom)["tooltip"]
    assert "consumers" in tooltip and "throughput" in tooltip, tooltip  # the hovered point's own numbers


@needs_chromium
def test_a_header_click_sorts_numbers_as_numbers_missing_last(browsed):
    seen = _seen(browsed[0])
    # by the first number of each cell; "–" last in either direction
    assert seen["ascending"] == ["river", "absurd", "pgmq", "skip_locked", "pgq"]
    assert seen["descending"] == ["skip_locked", "pgmq", "absurd", "river", "pgq"]
    assert seen["byVersion"] == ["absurd", "pgmq", "pgq", "river", "skip_locked"]  # text as text


@needs_chromium
def test_filters_narrow_a_chart_to_the_rows_picked(browsed):
    seen = _seen(browsed[0])
    # faceted: one point per system, consumer count and batch size (4 x 3 x 2)
    assert seen["backend"] == {"before": 24, "after": 12, "rows": "36", "restored": 24,
                               "options": ["", "postgres", "sqlite"]}
    assert seen["kind"] == {"before": 24, "after": 12, "rows": "36", "restored": 24,
                            "options": ["", "product", "reference"]}
    # layered: one point per sample (72), a quarter... a third of them at 4 consumers
    assert seen["consumers"] == {"before": 72, "after": 24, "rows": "24", "restored": 72, "options": ["", "1", "2", "4"]}
    assert seen["batch"]["after"] == 36 and seen["batch"]["options"] == ["", "1", "10"]


class _Requests(HTMLParser):
    """Every URL the page's own elements would load (script/style contents are not elements)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if tag == "a":
            return  # a link is followed only when clicked
        self.urls += [v for k, v in a.items() if k in ("src", "href", "data", "srcset", "poster") and v]


def test_the_page_names_no_remote_resource(built):
    parser = _Requests()
    parser.feed(built)
    assert [u for u in parser.urls if re.match(r"(https?:)?//", u)] == []
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", built.split("<script")[0])  # the stylesheet
    assert "default-src 'none'" in built  # and the browser refuses any request it would make


@needs_chromium
def test_the_page_renders_with_no_network_at_all(built, tmp_path):
    page = _write(tmp_path, built)
    dom, log = browse(page, tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND")
    assert problems(dom, log) == []


@needs_chromium
def test_the_check_fails_a_broken_page(built, tmp_path):
    """The checks above can fail: a script error, a chart Vega cannot draw and a fetch are each found."""
    broken = alt.Chart(_rows()).mark_point().encode(x="consumers:Q", y="y:Q").transform_calculate(y="nosuchfn(1)")
    text = report_html.page(MARKDOWN.replace("figures/test/faceted.svg", "figures/test/broken.svg"),
                            {"figures/test/broken.svg": broken, "figures/test/layered chart.svg": charts()[
                                "figures/test/layered chart.svg"]}, title="broken", kinds=KINDS)
    text = _at_the_end(text, '<script>fetch("https://example.org/x");</script>')
    found = problems(*browse(_write(tmp_path, text), tmp_path))
    assert any("1 of 2 charts rendered" in p for p in found), found
    assert any("nosuchfn" in p for p in found), found
    assert any("example.org" in p for p in found), found


# Every value of every filter of every chart in turn, then back to all: each redraw must
# leave the chart drawn and record no error.
EVERY_FILTER = """<script type="module">
const until = async ok => { for (let i = 0; i < 100 && !ok(); i++) await new Promise(r => setTimeout(r, 50)); };
await until(() => document.body.dataset.chartsDone);
let picked = 0;
for (const box of document.querySelectorAll(".chart[data-spec]")) {
  for (const select of box.querySelectorAll("select[data-filter]")) {
    for (const value of [...[...select.options].map(o => o.value).slice(1), ""]) {
      select.value = value;
      select.dispatchEvent(new Event("change"));
      await box.filtering;
      picked += 1;
    }
  }
}
document.body.dataset.picked = String(picked);
</script>
"""


@needs_chromium
def test_the_committed_report_html_renders_without_an_error(tmp_path):
    committed = REPO_ROOT / "report.html"
    if not committed.exists():
        pytest.skip("no report.html at the repository root yet (benchlib/report.py writes it beside report.md)")
    text = committed.read_text()
    dom, log = browse(committed, tmp_path)  # opened where it lies: its relative images resolve
    assert problems(dom, log) == []
    # a copy with the filters exercised, its relative paths still the repository's
    head = text.index("<head>") + len("<head>")
    copy = tmp_path / "report.html"
    copy.write_text(_at_the_end(f'{text[:head]}<base href="{REPO_ROOT.as_uri()}/">{text[head:]}', EVERY_FILTER))
    dom, log = browse(copy, tmp_path)
    assert problems(dom, log) == []
    assert _attr(dom, "body", "data-picked") is not None, "the filters were not all tried in time"
