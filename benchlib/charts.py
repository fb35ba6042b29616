"""Shared chart helpers, and offline rendering everywhere.

Every chart states its finding: its title is a sentence computed from the rows it draws
(`stated`, numbers to two significant figures by `sig`), and its top-level `description`
is a one-sentence caption (what is drawn, how to read it) that the report prints under the
figure. A chart fits a screen: at most MAX_WIDTH wide and MAX_HEIGHT tall.

Charts never touch a database. Every chart is rendered by vl-convert, which ships
Vega and Vega-Lite inside the wheel: files (SVG + PNG) for the report, and inline SVG
in notebooks (`alt.renderers.enable("svg")`), so a chart shows in JupyterLab, in
nbconvert's HTML and on GitHub without fetching a script from a CDN. Importing this
module switches Altair to that renderer; that is the project's policy, not a side
effect to work around.
"""
from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import altair as alt
import polars as pl

from benchlib import findings, palette
from benchlib.findings import words

alt.renderers.enable("svg")

WIDTH, HEIGHT = 260, 200


def mean_with_error_bars(x: str, y: str, color: str, *, x_title: str, y_title: str,
                         color_title: str, log_y: bool = False, categories: bool = False) -> alt.LayerChart:
    """A line through the mean of the samples with +/- one sd error bars.

    The data comes from an enclosing facet, so each panel shows its own. `categories`:
    the colour names things (systems), not an ordered quantity (batch sizes).
    """
    y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=True)
    colour = (alt.Color(f"{color}:N", title=color_title, scale=alt.Scale(scheme="tableau10")) if categories else
              alt.Color(f"{color}:O", title=color_title, scale=alt.Scale(scheme="viridis")))
    base = alt.Chart().encode(x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0)), color=colour)
    line = base.mark_line(point=True).encode(
        y=alt.Y(f"mean({y}):Q", title=y_title, scale=y_scale),
        tooltip=[x, color, alt.Tooltip(f"mean({y}):Q", format=",.1f"), alt.Tooltip(f"stdev({y}):Q", format=",.1f"),
                 alt.Tooltip(f"count({y}):Q", title="samples")],
    )
    bars = base.mark_errorbar(extent="stdev", ticks=alt.MarkConfig(size=8)).encode(
        y=alt.Y(f"{y}:Q", title=y_title, scale=y_scale))
    return alt.layer(line, bars).properties(width=WIDTH, height=HEIGHT)


def save(chart: alt.TopLevelMixin, stem: Path) -> Path:
    """Write stem.svg (vl-convert, no browser), carrying STAMP: the one file a page shows (GitHub
    and every browser draw SVG; report.html draws the chart itself)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    path = stem.with_suffix(".svg")
    chart.save(path)
    svg = path.read_text()
    if STAMP not in svg:
        end = svg.find(">", svg.find("<svg")) + 1
        path.write_text(svg[:end] + STAMP + svg[end:])
    return path


# --- small multiples that fit a page ------------------------------------------------------
#
# Every chart of the report is at most MAX_WIDTH px wide: small multiples wrap into a grid
# (a facet with `columns=`) instead of running into one long row. A chart whose panels must
# share a y-axis but are drawn as separate facets (one per backend, one per holder) gets an
# explicit domain (`shared_domain`), computed once over every panel it is compared with.

MAX_WIDTH = 1200
MAX_HEIGHT = 900  # a laptop screen: a chart taller than this is read in pieces, and compared in none
CAPTION_WORDS = 40  # a caption is one sentence a reader takes in at a glance
TITLE_WORDS = 12
# Written into every SVG `save` writes: figures without it were rendered before the charts
# kept to MAX_WIDTH (the committed-figures test skips those, saying so).
STAMP = f"<!-- benchlib charts: small multiples, at most {MAX_WIDTH} px wide -->"
BACKENDS = {"postgres": "PostgreSQL", "sqlite": "SQLite", "turso": "Turso", "s3": "S3 (emulated object store)"}


def backend_name(backend: str) -> str:
    return BACKENDS.get(backend, backend)


def backend_order(backends: list[str]) -> list[str]:
    """The provision backends in the report's order (PostgreSQL first), unknown ones last."""
    known = list(BACKENDS)
    return sorted(set(backends), key=lambda b: (known.index(b) if b in known else len(known), b))


def shared_domain(values: list[float | None], *, zero: bool = True) -> list[float]:
    """[low, high] over every non-null value, from zero unless `zero` is off; empty or flat
    input still gives a usable range."""
    finite = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return [0.0, 1.0]
    low, high = (min(0.0, *finite) if zero else min(finite)), max(finite)
    return [low, high if high > low else low + 1.0]


def wrap(layer: alt.TopLevelMixin, data: pl.DataFrame, field: str, *, columns: int, order: list[str] | None = None,
         title: str | alt.TitleParams | None = None, header: str | None = None, label_limit: int | None = None,
         label_size: int = 11) -> alt.FacetChart:
    """One panel per value of `field` that has rows, `columns` panels a row: a grid without
    empty cells (a wrapped facet draws only the values present). `label_limit` (px): a panel
    name longer than it is cut short rather than widening its column past the panel."""
    facet = alt.Facet(f"{field}:N", title=header, sort=order or "ascending", header=alt.Header(
        labelFontSize=label_size, labelFontWeight="bold", labelLimit=label_limit or alt.Undefined))
    # each panel its own x-axis: a wrapped grid's last row otherwise leaves axes under no panel
    chart = layer.facet(facet=facet, columns=columns, data=data, spacing={"row": 14, "column": 16}
                        ).resolve_axis(x="independent")
    return chart.properties(title=title) if title is not None else chart


def shaded_seconds(lines: pl.DataFrame, shade: pl.DataFrame, *, y: str, y_title: str, label: str,
                   order: list[str], tooltip: list, width: int, height: int) -> tuple[alt.LayerChart, pl.DataFrame]:
    """A panel's line over each second (`t_s`, step-after, coloured by system) with spans shaded red
    (`started_s` to `ended_s`, named by `label`): the layer and the data to facet it over, as the
    chaos and pressure timelines draw their cells (a fault's or a pressure's phase shaded)."""
    both = pl.concat([lines.with_columns(pl.lit("line").alias("layer")), shade.with_columns(pl.lit("shade").alias("layer"))],
                     how="diagonal_relaxed")
    rect = alt.Chart().mark_rect(opacity=0.15, color="firebrick").encode(
        x="started_s:Q", x2="ended_s:Q", tooltip=[f"{label}:N"]).transform_filter(alt.datum.layer == "shade")
    line = alt.Chart().mark_line(interpolate="step-after").transform_filter(alt.datum.layer == "line").encode(
        x=alt.X("t_s:Q", title="seconds"), y=alt.Y(f"{y}:Q", title=y_title),
        color=alt.Color("system:N", scale=palette.system_scale(order), legend=None), tooltip=tooltip)
    return alt.layer(rect, line).properties(width=width, height=height), both


def placeholder(text: str, width: int = 400) -> alt.Chart:
    """A chart that says why there is nothing to draw (rather than an empty frame); its title and
    caption say the same, so a report that prints captions has one for it too."""
    return alt.Chart(pl.DataFrame({"text": [text]})).mark_text(size=13, align="left", x=5).encode(
        text="text:N").properties(width=width, height=40, title=title("Nothing to draw"),
                                  description=f"Nothing is drawn: {text}.")


def decades(domain: list[float]) -> list[float]:
    """The powers of ten within `domain`: a small log axis's ticks (its default 2s and 3s run
    '300' into '1,000')."""
    low, high = domain
    if low <= 0 or high <= 0:
        return []
    return [10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
            if low <= 10.0 ** k <= high]


SUBTITLE_CHARS = 140  # a subtitle line at 11 px: about 850 px, well inside MAX_WIDTH


def title(text: str, *subtitle: str) -> alt.TitleParams:
    """A chart's title, anchored left, with subtitle lines wrapped so that no line widens the chart."""
    lines = [line for s in subtitle for line in textwrap.wrap(s, SUBTITLE_CHARS)]
    return alt.TitleParams(text=text, subtitle=lines or alt.Undefined, anchor="start",
                           fontSize=14, subtitleFontSize=11, subtitleColor="#555")


def svg_width(svg: str) -> float | None:
    """The width attribute of an SVG's root element (None: it has none)."""
    return _svg_size(svg, "width")


def svg_height(svg: str) -> float | None:
    """The height attribute of an SVG's root element (None: it has none)."""
    return _svg_size(svg, "height")


def _svg_size(svg: str, attribute: str) -> float | None:
    root = re.search(r"<svg\b[^>]*>", svg)
    found = re.search(rf'\s{attribute}="([0-9.]+)(?:px)?"', root.group(0)) if root else None
    return float(found.group(1)) if found else None


# --- titles that state a finding ----------------------------------------------------------


def sig(value: float | None, digits: int = 2) -> str:
    """A title's number to `digits` significant figures, counts too (2.9, 29, 30,000): it is read,
    not looked up, and a third figure is noise between runs. The report's one formatter does it."""
    return findings.sig(None if value is None else float(value), digits)


def span(low: float, high: float, unit: str = "") -> str:
    """A range of values as a title writes it: '2.9–29×', or one value when both round alike."""
    a, b = sig(low), sig(high)
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def of(k: int, n: int) -> str:
    """'11 of 13', or 'all 8' when it is every one."""
    return f"all {n}" if k == n and n > 1 else f"{k} of {n}"


def stated(chart: alt.TopLevelMixin, finding: str, caption: str, *subtitle: str) -> alt.TopLevelMixin:
    """`chart` titled with its `finding` (a sentence computed from its data; a subtitle may qualify
    it) and captioned with `caption` in its top-level `description`: what is drawn, how to read it."""
    return chart.properties(title=title(finding, *subtitle), description=caption)


def naming(caption: str, lead: str, names: list[str], why: str = "") -> str:
    """`caption` and a sentence naming what a chart leaves out ("Not drawn (why): a, b, c."), with
    as many names as keep the whole within CAPTION_WORDS, the rest counted ("and 3 more")."""
    names = list(names)
    if not names:
        return caption
    for shown in range(len(names), 0, -1):
        rest = len(names) - shown
        listed = ", ".join(names[:shown]) + (f" and {rest} more" if rest else "")
        text = f"{caption} {lead}{f' ({why})' if why else ''}: {listed}."
        if words(text) <= CAPTION_WORDS:
            return text
    return f"{caption} {lead}: {len(names)}."
