"""report.html: a markdown page as one self-contained HTML file with interactive charts.

report.md shows each chart as the SVG vl-convert drew; that is what GitHub can show. The HTML
page beside it shows the same text with the same charts live: a tooltip gives a mark's numbers,
a filter bar narrows a chart to one backend, product or reference systems, a consumer count or a
batch size, and a click on a table's header sorts it. Everything it needs is inside the file:
Vega, Vega-Lite and vega-embed come from vl-convert's bundle (the libraries that drew the SVGs),
once per page, and the charts' data is the specs' own, so the page opens from disk and makes no
network request (its Content-Security-Policy forbids one, so a slip shows up as an error).

The output is a pure function of the inputs: ids come from the image paths, JSON keeps the
specs' own key order, and nothing reads the clock, so regenerating an unchanged report leaves
report.html byte-identical.
"""
from __future__ import annotations

import functools
import html
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import altair as alt
import jinja2
import vl_convert
from markdown_it import MarkdownIt

TEMPLATE = Path(__file__).resolve().parent / "templates" / "report.html.j2"
KINDS = ("product", "reference")


@functools.cache
def _bundle() -> str:
    """vega-embed, Vega-Lite and Vega as one script (about 0.9 MB; vl-convert takes seconds to
    build it, hence the cache). Vega-Lite at the version Altair writes its specs for, where
    vl-convert has it."""
    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    version = wanted if wanted in vl_convert.get_vegalite_versions() else None
    bundle = vl_convert.javascript_bundle(vl_version=version)
    if "</script" in bundle.lower():  # would end the inline <script> early
        raise ValueError("vl-convert's JavaScript bundle contains '</script': it cannot be inlined")
    return bundle


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    return env.from_string(TEMPLATE.read_text())


def _slug(text: str) -> str:
    """GitHub's anchor for a heading, so report.md's #links work here too."""
    return "".join(c for c in text.strip().lower().replace(" ", "-") if c.isalnum() or c in "-_")


def _chart_id(path: str) -> str:
    return "chart-" + (re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "x")


def _unique(base: str, seen: dict[str, int]) -> str:
    """`base`, or base-1, base-2, ... when the page already has it (GitHub's rule for headings)."""
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def _finite(value: Any) -> Any:
    """The value with NaN and infinities as null: JSON has neither, and JSON.parse would reject the page."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _json(payload: Any) -> str:
    """JSON safe inside a <script> element: no '<' can open a tag (</script>, <!--)."""
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        text = json.dumps(_finite(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c")


def _spec(chart: alt.TopLevelMixin) -> dict:
    """The chart's Vega-Lite spec, with a tooltip on every mark whose author gave it none (its
    encoded fields: the numbers the mark was drawn from); an author's tooltip encoding wins."""
    spec = chart.to_dict()
    mark = spec.setdefault("config", {}).setdefault("mark", {})
    mark.setdefault("tooltip", True)
    return spec


def _markdown(charts: Mapping[str, str], shown: set[str]) -> MarkdownIt:
    """CommonMark with tables and raw HTML (report.md opens with an HTML comment). `charts` maps
    each chart's image path, as markdown-it normalises it, to its key in the page's data; the
    keys of the charts rendered are added to `shown`."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    ids: dict[str, int] = {}
    image = md.renderer.rules["image"]

    def render_image(tokens, idx, options, env):
        token = tokens[idx]
        key = charts.get(str(token.attrGet("src") or ""))
        if key is None:
            return image(tokens, idx, options, env)
        shown.add(key)
        alt_text = html.escape(md.renderer.renderInlineAsText(token.children or [], options, env))
        src = html.escape(str(token.attrGet("src")))
        # spans, not divs: the image sits inside a paragraph, where a div is not allowed
        return (f'<span class="chart" id="{_unique(_chart_id(key), ids)}" data-spec="{html.escape(key)}" '
                f'role="figure" aria-label="{alt_text}"><span class="filters"></span><span class="view"></span>'
                f'<noscript><img src="{src}" alt="{alt_text}"></noscript></span>')

    def heading_ids(state) -> None:
        seen: dict[str, int] = {}
        for i, token in enumerate(state.tokens):
            if token.type == "heading_open" and i + 1 < len(state.tokens):
                text = "".join(c.content for c in state.tokens[i + 1].children or []
                               if c.type in ("text", "code_inline"))
                token.attrSet("id", _unique(_slug(text), seen))

    md.renderer.rules["image"] = render_image
    md.renderer.rules["table_open"] = lambda *a: '<div class="table-wrap">\n<table>\n'
    md.renderer.rules["table_close"] = lambda *a: "</table>\n</div>\n"
    md.core.ruler.push("heading_ids", heading_ids)
    return md


def page(markdown_text: str, charts: dict[str, alt.TopLevelMixin], *, title: str, kinds: dict[str, str]) -> str:
    """The self-contained HTML of a markdown page.

    `charts` maps image paths exactly as the markdown writes them in `![alt](path)` (e.g.
    "figures/capacity/standard/capacity_brackets.svg") to the Altair chart drawn there; each such
    image becomes that chart, live. Other images stay <img> elements with their relative paths,
    which resolve beside the page (report.html sits beside report.md), and links stay links.
    A chart the markdown does not show is left out (a study draws more figures than a page may
    show), data and all, so the page carries only what it draws.

    `kinds` maps a system name to "product" or "reference", for the filter that shows one or
    the other; a chart's `system` (else `queue`) values are looked up whole, then by the part
    after the last "/" ("postgres/pgmq"), then without a trailing " (...)" ("pgqrs (S3)").
    """
    bad = {k: v for k, v in kinds.items() if v not in KINDS}
    if bad:
        raise ValueError(f"kinds must be {' or '.join(KINDS)}: {bad}")
    shown: set[str] = set()
    normalize = MarkdownIt("commonmark").normalizeLink  # how markdown-it writes a src it parsed
    body = _markdown({normalize(path): path for path in charts}, shown).render(markdown_text)
    data = {"kinds": dict(sorted(kinds.items())), "charts": {path: _spec(charts[path]) for path in sorted(shown)}}
    return _template().render(title=html.escape(title), body=body, data=_json(data), bundle=_bundle())
