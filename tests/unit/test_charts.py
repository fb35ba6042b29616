"""Charts a person can read: every chart of the drain, xmin-horizon, capacity and enqueue studies at
most 1,200 px wide and 900 px tall, no empty panel, one colour per system, a title that states
a finding and a caption (`description`) of at most 40 words, no curve fitted through a few
points; the same on the committed data (durability's charts too); and the committed figures
that report.md shows within the same width.

The fixture frames have the published schemas' columns and the shape of the standard
profile (every system on its backends, worker systems without dequeue or ack latency,
S3 a thousand times slower than PostgreSQL, worker designs under one holder only,
rotation on two servers), so the widest layouts the report draws are the ones tested.
"""
from __future__ import annotations

import inspect
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import altair as alt
import polars as pl
import pytest
import vl_convert as vlc

from benchlib import charts as shared
from benchlib import palette
from benchlib.outputs import REPO_ROOT
from benchlib.results import frame
from benchlib.studies.capacity import analysis as capacity_analysis
from benchlib.studies.capacity import charts as capacity_charts
from benchlib.studies.capacity.measure import RESULTS, STEPS
from benchlib.studies.drain import charts as drain_charts
from benchlib.studies.enqueue import charts as enqueue_charts
from benchlib.studies.enqueue.measure import SAMPLES as ENQUEUE_SAMPLES
from benchlib.studies.drain.measure import SAMPLES
from benchlib.studies.xmin_horizon import charts as xmin_charts
from benchlib.studies.xmin_horizon.measure import SAMPLE_SCHEMA

# --- fixture frames --------------------------------------------------------------------------

# (backend, system, kind, peak jobs/s, batch sizes, consumers): the standard profile's runs
DRAIN_RUNS = [
    ("postgres", "skip_locked", "pull", 11_600, [1, 10, 50], [1, 2, 4]),
    ("postgres", "pgmq", "pull", 10_000, [1, 10, 50], [1, 2, 4]),
    ("postgres", "pgqrs", "pull", 5_400, [1, 10], [1, 2, 4]),
    ("postgres", "pgqueuer", "worker", 3_400, [1, 10], [1, 2, 4]),
    ("postgres", "graphile-worker", "worker", 1_500, [1, 10], [1, 2, 4]),
    ("postgres", "procrastinate", "worker", 200, [1], [1, 2, 4]),
    ("postgres", "chancy", "worker", 800, [1, 10], [1, 2, 4]),
    ("postgres", "awa", "worker", 2_000, [1, 10], [1, 2, 4]),
    ("postgres", "absurd", "worker", 1_200, [1, 10], [1, 2, 4]),
    ("postgres", "river", "worker", 20, [1], [1, 4]),
    ("postgres", "river-fast", "worker", 3_000, [1, 10], [1, 2, 4]),
    ("postgres", "pg-boss", "worker", 30, [10], [1, 4]),
    ("sqlite", "sqlite", "pull", 15_000, [1, 10, 50], [1, 2, 4]),
    ("sqlite", "pgqrs", "pull", 7_000, [1, 10], [1, 2, 4]),
    ("turso", "sqlite", "pull", 2_200, [1, 10, 50], [1, 2, 4]),
    ("turso", "pgqrs", "pull", 1_400, [1, 10], [1, 2, 4]),
    ("s3", "pgqrs", "pull", 50, [1, 10], [1, 2, 4]),
]


def drain_samples(runs=DRAIN_RUNS, samples: int = 3) -> pl.DataFrame:
    rows = []
    for backend, queue, kind, peak, batches, consumers in runs:
        for c in consumers:
            for b in batches:
                for s in range(samples + 1):  # the first is the discarded warm-up
                    jobs_s = peak * (0.3 + 0.7 * math.log(b + 1) / math.log(51)) * (0.7 + 0.1 * c) * (1 + 0.03 * s)
                    pull = kind == "pull"
                    rows.append({
                        "backend": backend, "queue": queue, "kind": kind, "consumers": c, "batch_size": b,
                        "prefill": 1000, "sample": s, "warmup": s == 0, "elapsed_s": 1000 / jobs_s,
                        "throughput_jobs_s": jobs_s, "dequeue_p95_ms": (0.4 + 0.05 * b) * c * (1 + 0.1 * s) if pull
                        else None, "ack_p95_ms": (0.3 + 0.02 * b) * c if pull else None,
                        "completion_gap_p99_ms": 1000 / jobs_s * 3, "completion_gap_max_ms": 1000 / jobs_s * 9,
                        "lost": 0, "duplicates": 0, "error": None, "axis": "grid",
                        "server_cpu_us_per_job": 1e6 / peak,
                    })
        if len(consumers) > 1 and backend != "s3":  # the backlog-depth axis at the largest cell
            for n in (200, 5000):
                for s in range(samples + 1):
                    rows.append({"backend": backend, "queue": queue, "kind": kind, "consumers": max(consumers),
                                 "batch_size": max(batches), "prefill": n, "sample": s, "warmup": s == 0,
                                 "axis": "depth", "throughput_jobs_s": peak * (1 + n / 1e4), "elapsed_s": 2.0,
                                 "server_cpu_us_per_job": 1e6 / peak * (n / 1000) ** (0.9 if queue == "pgqrs" else 0),
                                 "lost": 0, "duplicates": 0, "error": None})
    return frame(rows, SAMPLES)


def xmin_samples(designs_by_holder: dict[str, list[tuple[str, int]]] | None = None, windows: int = 8
                 ) -> pl.DataFrame:
    """Per holder, (design, server major): the standard profile's three runs by default."""
    pulls = [("skip_locked", 16), ("skip_locked_delete", 16), ("claim_then_delete", 16), ("rotation", 16),
             ("pgmq", 16), ("pgqrs", 16), ("rotation", 15), ("pgq", 15)]
    workers = [(w, 16) for w in ("procrastinate", "pgqueuer", "awa", "chancy", "absurd", "river-fast",
                                 "pg-boss-fast", "graphile-worker")]
    designs_by_holder = designs_by_holder or {"rr_snapshot": pulls + workers, "idle_xid": pulls,
                                              "logical_slot": pulls}
    rows = []
    for holder, designs in designs_by_holder.items():
        for design, major in designs:
            rate = 100.0 if (design, major) in workers else 400.0
            rotating = design in ("rotation", "pgq")
            for i in range(windows * 2 + 2):
                phase = "baseline" if i < windows else "held" if i < 2 * windows else "drain"
                held = max(0, i - windows + 1) if phase == "held" else 0
                dead = 0 if rotating else 800 + (12_000 // windows) * held * (holder != "logical_slot")
                rows.append({
                    "design": design, "server_major": major, "holder": holder, "phase": phase, "t_s": 2.0 * (i + 1),
                    "window_s": 2.0, "enqueue_rate": rate, "dequeue_rate": rate * (0.95 if held else 1.0),
                    "n_dead_tup": dead, "data_bytes": (4 + held) * 2**20, "bystander_p95_ms": 1.0 + 0.1 * held,
                    "rows_per_child": [100 * (i % 3 == k) + 5 for k in range(3)] if rotating else None,
                })
    schema = {**SAMPLE_SCHEMA}
    schema.setdefault("server_major", (pl.Int64, ""))  # a column the published schema gains
    return frame(rows, schema)


CAPACITY_SYSTEMS = [("postgres", s, r) for s, r in [
    ("skip_locked", 9_000), ("pgmq", 8_000), ("pgqrs", 4_000), ("procrastinate", 180), ("pgqueuer", 3_000),
    ("awa", 1_500), ("chancy", 600), ("absurd", 1_000), ("river", 40), ("river-fast", 2_500), ("pg-boss", 20),
    ("pg-boss-fast", 60), ("graphile-worker", 1_200)]] + [("sqlite", "sqlite", 12_000), ("turso", "sqlite", 1_800)]


def capacity_tables(systems=CAPACITY_SYSTEMS) -> tuple[pl.DataFrame, pl.DataFrame]:
    steps, results = [], []
    for backend, system, capacity in systems:
        for rnd in range(2):
            rates = [capacity * f for f in (0.25, 0.5, 0.9, 1.1, 1.3)]
            for i, rate in enumerate(rates):
                ok = rate <= capacity
                steps.append({"backend": backend, "system": system, "kind": "pull", "consumers": 4, "batch": 10,
                              "round": rnd, "step": i, "purpose": "search", "rate": rate, "verdict":
                              "pass" if ok else "fail", "e2e_p99_ms": 5.0 * (1 + i) if ok else 2_000.0 * i,
                              "lost": 0, "duplicates": 0})
            steps.append({"backend": backend, "system": system, "kind": "pull", "consumers": 4, "round": rnd,
                          "step": 9, "purpose": "pickup", "rate": 1.0, "verdict": "pass", "e2e_p99_ms": 50.0})
            results.append({"backend": backend, "system": system, "kind": "pull", "consumers": 4, "batch": 10,
                            "round": rnd, "passed": capacity * 0.9, "failed": capacity * 1.1 if system != "pg-boss"
                            else None, "confirmed": True, "bound": "bracket", "settings": "{}"})
    return frame(steps, STEPS), frame(results, RESULTS)


def enqueue_samples() -> pl.DataFrame:
    """The standard profile's enqueue grid: every system on PostgreSQL 18, PgQ beside our
    reference on 15, a system with no bulk call (absurd, PgQ) at one job per call only."""
    rows = []
    pg18 = [(18, s, r) for s, r in (("skip_locked", 2_000), ("pgmq", 1_800), ("pgqrs", 900), ("awa", 1_500),
                                    ("absurd", 400), ("river", 1_200), ("pg-boss", 700), ("graphile-worker", 800))]
    for major, system, single in pg18 + [(15, "skip_locked", 2_100), (15, "pgq", 1_700)]:
        batches = [1] if system in ("absurd", "pgq") else [1, 100, 1000, 100_000]
        for size in (100, 2048):
            for batch in batches:
                if batch * size > 64 << 20:
                    continue
                rate = single * min(batch, 60) ** 0.9
                rows.append({"system": system, "kind": "pull", "server_major": major, "payload_bytes": size,
                             "clients": 1, "batch": batch, "jobs_s": rate, "mib_s": rate * size / 2**20,
                             "call_p50_ms": batch / rate * 1e3, "duplicates": 0})
    return frame(rows, ENQUEUE_SAMPLES)


def every_chart() -> dict[str, object]:
    """Every chart of the three studies, from the fixture frames, by a readable name."""
    drain = drain_samples()
    xmin = xmin_samples()
    steps, results = capacity_tables()
    brackets = capacity_analysis.brackets(results)
    out = {f"drain/{name}": make(drain) for name, make in drain_charts.CHARTS.items()}
    # the full profile's sweep: more consumer counts and batch sizes, six-digit rates
    full = drain_samples([(b, q, k, peak * 10, [1, 10, 50, 100], [1, 2, 4, 8, 16])
                          for b, q, k, peak, _, _ in DRAIN_RUNS], samples=2)
    out.update({f"drain/full/{name}": make(full) for name, make in drain_charts.CHARTS.items()})
    out.update({f"xmin/{name}": make(xmin) for name, make in xmin_charts.CHARTS.items()})
    seed = xmin_samples({"rr_snapshot": [(d, 16) for d in ("skip_locked", "skip_locked_delete", "claim_then_delete",
                                                            "rotation", "pgmq", "pgqrs")]}, windows=36)
    out.update({f"xmin/seed/{name}": make(seed) for name, make in xmin_charts.CHARTS.items()})
    out.update({f"capacity/{name}": make(steps, brackets) for name, make in capacity_charts.CHARTS.items()})
    out.update({f"enqueue/{name}": make(enqueue_samples()) for name, make in enqueue_charts.CHARTS.items()})
    return out


# --- what an SVG shows ------------------------------------------------------------------------

# marks that draw data: lines, points, error bars, text. Rectangles are left out: the held
# phase's shading is one, drawn in every xmin panel whatever its data.
DATA_MARKS = {"mark-line", "mark-symbol", "mark-rule", "mark-text"}


def _classes(el: ET.Element) -> set[str]:
    return set((el.get("class") or "").split())


def _has_data_mark(panel: ET.Element) -> bool:
    """A data mark drawn in this panel (an axis's ticks and labels are not marks of the data)."""
    for group in panel.iter():
        classes = _classes(group)
        if "role-mark" in classes and classes & DATA_MARKS and any(
                (m.get("d") or "").strip() or m.tag.endswith(("line", "text")) for m in group):
            return True
    return False


def panels(svg: str) -> list[ET.Element]:
    """The facet cells of a chart (each panel's group), or the whole chart when it has none."""
    root = ET.fromstring(svg)
    cells = [child for g in root.iter() if {"mark-group", "role-scope"} <= _classes(g)
             and any(c == "cell" or c.endswith("_cell") for c in _classes(g))
             for child in g if child.tag.endswith("g")]
    return cells or [root]


def empty_panels(svg: str) -> int:
    return sum(not _has_data_mark(p) for p in panels(svg))


# --- the tests --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def specs() -> dict[str, dict]:
    return {name: chart.to_dict() for name, chart in every_chart().items()}


@pytest.fixture(scope="module")
def rendered(specs) -> dict[str, str]:
    return {name: vlc.vegalite_to_svg(spec) for name, spec in specs.items()}


def test_every_chart_fits_in_1200_px(rendered):
    wide = {name: shared.svg_width(svg) for name, svg in rendered.items()}
    assert all(w is not None for w in wide.values())
    assert {n: w for n, w in wide.items() if w > shared.MAX_WIDTH} == {}


def test_no_chart_has_an_empty_panel(rendered):
    assert {name: empty_panels(svg) for name, svg in rendered.items() if empty_panels(svg)} == {}
    # the check sees an empty panel when there is one: a worker system's latency, drawn anyway
    worker = drain_samples([("postgres", "skip_locked", "pull", 1000, [1], [1, 2]),
                            ("postgres", "pgqueuer", "worker", 1000, [1], [1, 2])])
    long = worker.unpivot(index=["queue", "consumers", "sample"], on=["dequeue_p95_ms"], value_name="ms")
    naive = alt.Chart(long).mark_line().encode(x="consumers:O", y="mean(ms):Q").facet(facet="queue:N", columns=2)
    assert empty_panels(vlc.vegalite_to_svg(naive.to_dict())) == 1


def test_panels_are_found_in_every_grid(rendered):
    """The panel count the emptiness check relies on: one per system with a throughput, one per
    pull system and call, one per design and holder."""
    drain = drain_samples().filter(~pl.col("warmup"))
    systems = drain.select("backend", "queue").unique().height
    pull = drain.filter(pl.col("kind") == "pull").select("backend", "queue").unique().height
    assert len(panels(rendered["drain/throughput_vs_consumers"])) == systems
    assert len(panels(rendered["drain/latency_p95_vs_consumers"])) == 2 * pull
    xmin = xmin_samples().filter(pl.col("phase") != "drain").select("design", "server_major", "holder").unique()
    assert len(panels(rendered["xmin/dead_tuples"])) == xmin.height


def test_worker_systems_have_no_latency_panel_and_are_named_instead(rendered):
    svg = rendered["drain/latency_p95_vs_consumers"]
    named = set(re.findall(r">([a-z_-]+): (?:dequeue|ack)<", svg))  # the panels' headers
    assert "pgqueuer" not in named and "skip_locked" in named
    assert "procrastinate, pgqueuer" in svg  # the subtitle names them
    caption = every_chart()["drain/latency_p95_vs_consumers"].to_dict()["description"]
    assert "Not drawn (worker systems): procrastinate, pgqueuer" in caption


def test_every_chart_fits_in_900_px_height(rendered):
    high = {name: shared.svg_height(svg) for name, svg in rendered.items()}
    assert all(h is not None for h in high.values())
    assert {n: h for n, h in high.items() if h > shared.MAX_HEIGHT} == {}


def _title(spec: dict) -> tuple[str, list[str]]:
    t = spec.get("title")
    if isinstance(t, dict):
        sub = t.get("subtitle") or []
        return t.get("text") or "", [sub] if isinstance(sub, str) else list(sub)
    return t or "", []


def caption_and_title_problems(specs: dict[str, dict]) -> dict[str, str]:
    """Per chart, what is wrong with its top-level title and caption: a caption (`description`) is
    one sentence of 1 to 40 words; a title has 1 to 12 words and states a finding, so it carries a
    number computed from the data or says there is none ('No ...')."""
    out = {}
    for name, spec in specs.items():
        text, _ = _title(spec)
        caption = spec.get("description") or ""
        if not caption or shared.words(caption) > shared.CAPTION_WORDS:
            out[name] = f"caption of {shared.words(caption)} words: {caption!r}"
        elif not text or shared.words(text) > shared.TITLE_WORDS:
            out[name] = f"title of {shared.words(text)} words: {text!r}"
        elif not (re.search(r"\d", text) or text.startswith("No ") or " all " in text or "level" in text):
            out[name] = f"title states no finding: {text!r}"
    return out


def test_every_chart_has_a_finding_for_title_and_a_caption(specs):
    assert caption_and_title_problems(specs) == {}
    # the check catches a descriptive title and a missing caption (the charts before they stated findings)
    old = {"a": {"title": {"text": "Drain throughput against consumers, one panel per system"}, "description": "x"},
           "b": {"title": "A bigger batch drains 2.9–29× faster for 11 of 13 systems"}}
    assert set(caption_and_title_problems(old)) == {"a", "b"}


def test_titles_are_computed_from_the_rows_drawn():
    """The lever title counts what the data says: a batch that stops helping changes it."""
    title = _title(drain_charts.throughput_vs_batch(drain_samples()).to_dict())[0]
    assert re.fullmatch(r"A bigger batch drains [0-9.,]+(–[0-9.,]+)?× faster for (\d+ of \d+|all \d+) systems", title)
    flat = drain_samples().with_columns(pl.lit(100.0).alias("throughput_jobs_s"))
    assert _title(drain_charts.throughput_vs_batch(flat).to_dict())[0].startswith(
        "A bigger batch drains no faster for any of")
    assert shared.sig(2.93) == "2.9" and shared.sig(29.4) == "29" and shared.sig(30_123) == "30,000"
    assert shared.sig(9.96) == "10" and shared.sig(0.0456) == "0.046" and shared.span(2.93, 29.4, "×") == "2.9–29×"


def test_no_curve_is_fitted_in_any_chart(specs):
    """A three-parameter curve through three points says nothing the points do not: no chart draws one."""
    from benchlib.studies.durability import charts as durability_charts

    assert not hasattr(drain_charts, "scaling_fits_chart")
    assert "fitted" not in inspect.signature(durability_charts.throughput_vs_concurrency).parameters
    assert not [name for name, spec in specs.items() if "fitted_" in str(spec)]


def test_per_system_panels_have_their_own_scale_and_leave_out_a_system_without_the_axis(specs, rendered):
    """Systems four orders of magnitude apart: each panel its own y-axis, none a flat line at
    another's zero; a system measured at one batch size has no panel of throughput against
    batch size and is named in the caption."""
    for name in ("drain/throughput_vs_consumers", "drain/throughput_vs_batch", "drain/latency_p95_vs_consumers"):
        assert {"y": "independent"} in [r.get("scale") for r in _find(specs[name], "resolve")], name
    headers = set(re.findall(r">([a-z_-]+(?: \([A-Za-z0-9]+\))?)<", rendered["drain/throughput_vs_batch"]))
    assert "procrastinate" not in headers and "river" not in headers and "skip_locked" in headers
    assert "Not drawn (one batch size only): procrastinate, river, pg-boss" in specs["drain/throughput_vs_batch"][
        "description"]


def test_capacity_latency_has_one_panel_per_system(rendered):
    assert len(panels(rendered["capacity/latency_vs_rate"])) == len(CAPACITY_SYSTEMS)


def test_colour_always_means_the_system_and_each_system_keeps_its_colour(specs):
    """Colour encodes the system (design) in every chart, through palette.system_scale: never a
    batch size or a consumer count, never a scheme of the chart's own."""
    colours = palette.systems()
    assert len(set(colours.values())) == len(colours)  # no two registered systems alike
    for name, spec in specs.items():
        encodings = list(_colour_encodings(spec))
        assert encodings, name
        for field, scale in encodings:
            assert field in ("queue", "system", "design"), (name, field)
            assert scale.get("domain") and "scheme" not in scale, (name, scale)
            assert scale["range"] == [colours.get(d, palette.UNREGISTERED) for d in scale["domain"]], name


def _colour_encodings(spec):
    """(field, scale) of every colour, fill and stroke encoding that has a field."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in ("color", "fill", "stroke") and isinstance(value, dict) and "field" in value:
                yield value["field"], value.get("scale") or {}
            else:
                yield from _colour_encodings(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _colour_encodings(value)


def test_titles_and_axes_are_words_not_column_names(rendered):
    columns = set(SAMPLES) | set(SAMPLE_SCHEMA) | set(STEPS) | set(RESULTS) | {"fitted_jobs_s", "p95_ms", "value"}
    columns -= {"consumers", "backend", "system", "design", "holder", "phase", "rate", "step", "round", "batch",
                "kind", "sample", "error", "lost", "duplicates", "settings", "verdict", "reason", "purpose"}
    for name, svg in rendered.items():
        titles = re.findall(r"aria-label=\"([XY])-axis titled '([^']*)'", svg)
        assert {axis for axis, _ in titles} == {"X", "Y"}, (name, titles)  # both axes say what they show
        titles = [t for _, t in titles]
        leaked = [t for t in titles for c in columns if re.search(rf"\b{re.escape(c)}\b", t)]
        assert not leaked, (name, leaked)


def test_xmin_panels_share_one_y_scale_per_metric(specs):
    """Every holder's group of panels has the same y domain, and no panel resolves its own."""
    for name in [n for n in specs if n.startswith("xmin/")]:
        spec = specs[name]
        domains = [v["scale"]["domain"] for v in _find(spec, "y") if isinstance(v, dict) and "scale" in v]
        holders = 1 if "/seed/" in name else 3
        assert len(domains) >= holders and all(d == domains[0] for d in domains), name
        assert all("y" not in r.get("scale", {}) for r in _find(spec, "resolve")), name


def _find(spec, key):
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == key:
                yield v
            yield from _find(v, key)
    elif isinstance(spec, list):
        for v in spec:
            yield from _find(v, key)


def committed_charts(data: Path) -> dict[str, object]:
    """Every chart the reports draw, on the committed standard-profile data of each study that
    has it, prepared as the studies' report.py prepare it."""
    from benchlib.results import load_profile
    from benchlib.studies.durability import analysis as durability_analysis
    from benchlib.studies.durability import charts as durability_charts

    def load(study, table):
        return load_profile(data, study, "standard", table)[0]

    out = {}
    if (drain := load("drain", "samples")) is not None:
        out.update({f"drain/{n}": make(drain) for n, make in drain_charts.CHARTS.items()})
    if (steps := load("capacity", "steps")) is not None and (results := load("capacity", "results")) is not None:
        tables = capacity_analysis.upgrade({"steps": steps, "results": results})
        b = capacity_analysis.brackets(tables["results"], tables["steps"])
        out.update({f"capacity/{n}": make(tables["steps"], b) for n, make in capacity_charts.CHARTS.items()})
    if (every := load("durability", "samples")) is not None:
        primary = durability_analysis.primary_major(every)
        df = durability_analysis.on_server(every, primary)
        out["durability/throughput_vs_concurrency"] = durability_charts.throughput_vs_concurrency(df)
        out.update({f"durability/{n}": make(every if n == "commit_settings_vs_default" else df)
                    for n, make in durability_charts.CHARTS.items()})
        if (crashes := load("durability", "crashes")) is not None:
            out["durability/crash_loss"] = durability_charts.crash_loss(crashes, primary)
    if (enqueue := load("enqueue", "samples")) is not None:
        out.update({f"enqueue/{n}": make(enqueue) for n, make in enqueue_charts.CHARTS.items()})
    if (xmin := load("xmin_horizon", "samples")) is not None:
        out.update({f"xmin/{n}": make(xmin) for n, make in xmin_charts.CHARTS.items()})
    return {n: c for n, c in out.items() if c is not None}


def test_every_chart_on_the_committed_data_fits_a_screen_and_states_its_finding():
    charts = committed_charts(REPO_ROOT / "data")
    if not charts:
        pytest.skip("no committed standard-profile data")
    specs = {name: chart.to_dict() for name, chart in charts.items()}
    sizes = {}
    for name, spec in specs.items():
        svg = vlc.vegalite_to_svg(spec)
        sizes[name] = (shared.svg_width(svg), shared.svg_height(svg))
    assert {n: s for n, s in sizes.items() if s[0] > shared.MAX_WIDTH or s[1] > shared.MAX_HEIGHT} == {}
    assert caption_and_title_problems(specs) == {}


def test_save_stamps_the_svg(tmp_path):
    svg = shared.save(drain_charts.throughput_vs_consumers(drain_samples()), tmp_path / "chart")
    text = svg.read_text()
    assert shared.STAMP in text and shared.svg_width(text) <= shared.MAX_WIDTH
    assert [p.name for p in tmp_path.iterdir()] == ["chart.svg"]  # nothing a page does not show
    ET.fromstring(text)  # still one well-formed document


# --- the committed figures ------------------------------------------------------------------

def _referenced_figures(report: Path) -> list[Path]:
    text = report.read_text()
    return [report.parent / m for m in re.findall(r"!\[[^\]]*\]\(([^)\s]+\.svg)\)", text)]


def committed_figures_problems(report: Path) -> tuple[list[str], list[str]]:
    """(too wide, predate): the SVGs report.md shows that are wider than MAX_WIDTH, and those
    rendered before the charts kept to it (missing, no width, or no STAMP)."""
    wide, predate = [], []
    for svg in _referenced_figures(report):
        rel = svg.relative_to(report.parent).as_posix()
        if not svg.exists():
            predate.append(f"{rel} (missing)")
            continue
        text = svg.read_text()
        width = shared.svg_width(text)
        if width is None or shared.STAMP not in text:
            predate.append(f"{rel} ({'no width' if width is None else 'rendered before the 1,200 px charts'})")
        elif width > shared.MAX_WIDTH:
            wide.append(f"{rel}: {width:g} px")
    return wide, predate


def test_the_figures_report_md_shows_are_at_most_1200_px_wide():
    """Passes after the next publish (`make report`): figures rendered before it carry no
    STAMP, are skipped and named; a stamped figure wider than 1,200 px fails."""
    report = REPO_ROOT / "report.md"
    if not report.exists():
        pytest.skip("no report.md published yet")
    wide, predate = committed_figures_problems(report)
    assert wide == [], f"figures wider than {shared.MAX_WIDTH} px: {wide}"
    if predate:
        pytest.skip(f"{len(predate)} figure(s) report.md shows predate the 1,200 px charts; republish "
                    f"(make report) to check them: {', '.join(predate)}")


def test_the_committed_figures_check_fails_for_a_wide_figure_and_skips_an_old_one(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "wide.svg").write_text(f'<svg width="2950" height="10">{shared.STAMP}</svg>')
    (tmp_path / "figures" / "old.svg").write_text('<svg width="2950" height="10"></svg>')
    (tmp_path / "figures" / "fine.svg").write_text(f'<svg width="1100" height="10">{shared.STAMP}</svg>')
    (tmp_path / "report.md").write_text("![a](figures/wide.svg)\n![b](figures/old.svg)\n![c](figures/fine.svg)\n"
                                        "![d](figures/gone.svg)\n")
    wide, predate = committed_figures_problems(tmp_path / "report.md")
    assert wide == ["figures/wide.svg: 2950 px"]
    assert predate == ["figures/old.svg (rendered before the 1,200 px charts)", "figures/gone.svg (missing)"]


def test_importing_benchlib_keeps_the_slow_iri_parser_out_of_altairs_jsonschema():
    """rfc3987_syntax builds its parsers at import: 2-3 s of every kernel that draws a chart.
    benchlib keeps it out; a chart still validates and renders without jsonschema's iri check."""
    import subprocess
    import sys

    probe = ("import sys, benchlib, altair as alt, vl_convert as vlc\n"
             "chart = alt.Chart(alt.Data(values=[{'x': 1, 'y': 2}])).mark_point().encode(x='x:Q', y='y:Q')\n"
             "assert vlc.vegalite_to_svg(chart.to_dict()).startswith('<svg')\n"
             "print(sys.modules.get('rfc3987_syntax', 'absent'), 'jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "True"]
