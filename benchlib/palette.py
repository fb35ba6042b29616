"""One colour per system and per server configuration, the same in every chart of the report.

A reader who learns that pgmq is teal in one chart should find it teal in the next; a
palette per chart (Altair's default) gives the same colour different meanings a
paragraph apart. The order is the registry's (ours first, then the real systems), so
adding a system appends a colour and moves no other.
"""
from __future__ import annotations

import altair as alt

# Tableau 10, then ten more whose hues are not Tableau's (cyan, purple, maroon, olive, magenta,
# navy, black, lime, dark teal, lavender): the second ten were category10 before, whose blue,
# red, green, purple, brown and pink were a shade away from the first ten's, and systems
# drawn side by side on PostgreSQL (skip_locked and chancy, rotation and river) looked alike
_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac", "#42d4f4", "#911eb4", "#800000", "#808000", "#f032e6", "#000075", "#000000", "#bfef45",
            "#469990", "#dcbeff"]
CONFIG_COLOURS = {"default": "#4e79a7", "tuned": "#59a14f", "async_commit": "#e15759", "group_commit": "#b07aa1",
                  "async_eager": "#f28e2b", "async_d10": "#ff9da7", "async_d10_eager": "#9c755f",
                  "tuned_shared_buffers": "#76b7b2", "tuned_work_mem": "#edc948", "tuned_max_connections": "#bab0ac"}


def systems() -> dict[str, str]:
    """Every registered system's colour, in registry order."""
    from benchlib.queues import QUEUES

    return {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(QUEUES)}


UNREGISTERED = "#c7c7c7"  # a name the registry does not know (a test's, a renamed system's): drawn, in grey


def system_scale(names: list[str] | None = None) -> alt.Scale:
    """An Altair colour scale that gives each system its report-wide colour.

    `names`: the systems a chart draws (default: every registered one), in any order; the
    scale lists them in registry order, so a legend reads the same in every chart."""
    colours = systems()
    order = list(colours)
    wanted = list(dict.fromkeys(names if names is not None else order))
    wanted.sort(key=lambda n: (order.index(n) if n in colours else len(order), n))
    return alt.Scale(domain=wanted, range=[colours.get(n, UNREGISTERED) for n in wanted])


def system_order(names) -> list[str]:
    """`names` (systems, any iterable) in registry order, unregistered ones last."""
    order = list(systems())
    return sorted(set(names), key=lambda n: (order.index(n) if n in order else len(order), n))


def config_scale(names: list[str]) -> alt.Scale:
    known = [n for n in names if n.split("__")[0] in CONFIG_COLOURS]
    return alt.Scale(domain=known, range=[CONFIG_COLOURS[n.split("__")[0]] for n in known])
