"""Shared chart helpers, and offline rendering everywhere.

Charts never touch a database. Every chart is rendered by vl-convert, which ships
Vega and Vega-Lite inside the wheel: files (SVG + PNG) for the report, and inline SVG
in notebooks (`alt.renderers.enable("svg")`), so a chart shows in JupyterLab, in
nbconvert's HTML and on GitHub without fetching a script from a CDN. Importing this
module switches Altair to that renderer; that is the project's policy, not a side
effect to work around.
"""
from __future__ import annotations

from pathlib import Path

import altair as alt

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


def save(chart: alt.TopLevelMixin, stem: Path) -> list[Path]:
    """Write stem.svg and stem.png (vl-convert, no browser)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".svg"), stem.with_suffix(".png")]
    chart.save(paths[0])
    chart.save(paths[1], scale_factor=2)
    return paths
