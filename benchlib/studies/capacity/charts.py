"""The capacity study's charts: pure functions of published rows (no database)."""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette

WIDTH = 520


def brackets_chart(b: pl.DataFrame) -> alt.Chart:
    """Sustained jobs/s per system: a bar to the highest passing rate, a tick at the lowest
    failing one; systems at their settings' ceiling marked."""
    data = b.filter(pl.col("passed").is_not_null()).with_columns(
        (pl.col("system") + " (" + pl.col("backend") + ", C=" + pl.col("consumers").cast(pl.String) + ")")
        .alias("label"), pl.when(pl.col("at_ceiling")).then(pl.lit("at its settings' ceiling"))
        .otherwise(pl.lit("")).alias("note"))
    order = data.sort("passed", descending=True)["label"].to_list()
    y = alt.Y("label:N", sort=order, title=None)
    base = alt.Chart(data)
    bars = base.mark_bar().encode(
        y=y, x=alt.X("passed:Q", title="sustained jobs/s (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("system:N", scale=palette.system_scale(sorted(set(data["system"]))), legend=None),
        tooltip=["system", "backend", "consumers", "batch", alt.Tooltip("passed:Q", format=",.0f"),
                 alt.Tooltip("failed:Q", format=",.0f")])
    fails = base.mark_tick(color="black", thickness=2, size=14).encode(y=y, x="failed:Q")
    notes = base.mark_text(align="left", dx=6, fontSize=10).encode(y=y, x="failed:Q", text="note:N")
    return alt.layer(bars, fails, notes).properties(
        width=WIDTH, height=max(60, 22 * len(order)),
        title="Highest rate kept up with (bar) and lowest that was not (tick)")


def latency_chart(steps: pl.DataFrame) -> alt.Chart:
    """End-to-end p99 against offered rate, one line per system, failing steps hollow."""
    data = steps.filter(pl.col("e2e_p99_ms").is_not_null() & (pl.col("purpose") != "pickup")).with_columns(
        (pl.col("verdict") == "pass").alias("kept up"))
    if not data.height:
        return alt.Chart(pl.DataFrame({"x": []})).mark_point()
    return alt.Chart(data).mark_line(point=alt.OverlayMarkDef(filled=False, size=40)).encode(
        x=alt.X("rate:Q", title="offered jobs/s (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("e2e_p99_ms:Q", title="end-to-end p99, ms (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("system:N", title="system", scale=palette.system_scale(sorted(set(data["system"])))),
        detail="backend:N", tooltip=["system", "backend", "rate", "verdict", "e2e_p99_ms"],
    ).properties(width=WIDTH, height=300, title="Latency against offered rate (the knee is where a system falls behind)")


CHARTS = {"capacity_brackets": lambda steps, b: brackets_chart(b), "latency_vs_rate": lambda steps, b: latency_chart(steps)}
