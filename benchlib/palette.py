"""One colour per system and per server configuration, the same in every chart of the report.

A reader who learns that pgmq is teal in one chart should find it teal in the next; a
palette per chart (Altair's default) gives the same colour different meanings a
paragraph apart. The order is the registry's (ours first, then the real systems), so
adding a system appends a colour and moves no other.
"""
from __future__ import annotations

import altair as alt

# Tableau 20, then its darker and lighter halves: distinguishable, colour-blind tolerable
_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf", "#aec7e8"]
CONFIG_COLOURS = {"default": "#4e79a7", "tuned": "#59a14f", "async_commit": "#e15759", "group_commit": "#b07aa1",
                  "async_eager": "#f28e2b", "async_d10": "#ff9da7", "async_d10_eager": "#9c755f",
                  "tuned_shared_buffers": "#76b7b2", "tuned_work_mem": "#edc948", "tuned_max_connections": "#bab0ac"}


def systems() -> dict[str, str]:
    """Every registered system's colour, in registry order."""
    from benchlib.queues import QUEUES

    return {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(QUEUES)}


def system_scale(names: list[str] | None = None) -> alt.Scale:
    """An Altair colour scale that gives each system its report-wide colour."""
    colours = systems()
    names = [n for n in (names or colours) if n in colours]
    return alt.Scale(domain=names, range=[colours[n] for n in names])


def config_scale(names: list[str]) -> alt.Scale:
    known = [n for n in names if n.split("__")[0] in CONFIG_COLOURS]
    return alt.Scale(domain=known, range=[CONFIG_COLOURS[n.split("__")[0]] for n in known])
