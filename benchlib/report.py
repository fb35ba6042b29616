"""Render a profile's report (and its figures) from its published data alone.

No database is touched here. The report loops over the study registry: each study
owns its analysis, charts, findings, scorecard columns and page (studies/<name>/report.py
and report.md.j2); this module only loads each study's published tables for the profile,
gives it a place for its figures, and writes the front page of answers (findings,
scorecards, pick by need, a short section per study) with a page per study beside it.
Every sentence with a number in it is computed from the data, so regenerating after a
rerun leaves no stale claim behind.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import altair as alt
import jinja2

from benchlib import charts, features, frontpage, html, outputs, sweeps, timeline
from benchlib.errors import BenchError
from benchlib.findings import QUESTIONS
from benchlib.results import load_profile, run_minutes, write_text
from benchlib.queues import QUEUES
from benchlib.studies import STUDIES
from benchlib.studies.capacity.analysis import NOMINAL_LEAD
from benchlib.tables import Table, fmt, plural

TEMPLATES = Path(__file__).resolve().parent / "templates"
METHOD = outputs.REPO_ROOT / "METHOD.md"
# Non-default settings that only describe this throwaway instance (paths, sockets) or
# the client session; the manifest keeps them all, the report shows the rest.
EPHEMERAL_SETTINGS = {
    "config_file", "data_directory", "hba_file", "ident_file", "port", "unix_socket_directories",
    "unix_socket_permissions", "listen_addresses", "DateStyle", "TimeZone", "client_encoding",
    "default_text_search_config", "log_timezone", "lc_messages", "lc_monetary", "lc_numeric", "lc_time",
    "transaction_deferrable", "transaction_isolation", "transaction_read_only", "application_name",
}
# A run "had company" when other processes and the hypervisor (steal) took at least this
# share of the machine's CPU time while it ran.
COMPANY = 0.10


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([TEMPLATES, outputs.PACKAGE_DIR / "studies"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["shown"] = lambda settings: {k: v for k, v in settings.items() if k not in EPHEMERAL_SETTINGS}
    env.filters["fmt"] = fmt
    env.globals["plural"] = plural
    env.globals["cells_with_company"] = _cells_with_company
    env.tests["crowded"] = lambda manifest: bool(_cells_with_company(manifest))
    return env


# The kernel counts CPU time in ticks (10 ms): a share computed over less than this much
# of other processes' CPU time is a rounding error (a failed cell of a few milliseconds
# "had 120% company"), not a finding.
COMPANY_MIN_CPU_S = 0.1


def _share(company: dict) -> float:
    return (company.get("others_share") or 0) + (company.get("steal_share") or 0)


def _company(company: dict) -> bool:
    cpu_s = (company.get("cpu_s_others") or 0) + (company.get("cpu_s_steal") or 0)
    return _share(company) >= COMPANY and cpu_s >= COMPANY_MIN_CPU_S


def _had_company(manifest: dict) -> bool:
    return _company(manifest.get("company") or {})


def _cells_with_company(manifest: dict) -> list[str]:
    return [f"{c['cell']} ({100 * _share(c):.0f}%)" for c in (manifest.get("company_per_cell") or {}).values()
            if _company(c)]


_LINK = re.compile(r"(\]\()([^)#][^)\s]*)(\))")


def relink(markdown: str, start: Path, page_dir: Path) -> str:
    """A page's markdown with each relative link written from `start` (where the studies write
    them: the report's folder) rewritten from `page_dir`, where the page lives."""
    def move(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        moved = os.path.relpath(start / path, page_dir) + (f"#{anchor}" if anchor else "")
        return m.group(1) + moved + m.group(3)
    return _LINK.sub(move, markdown)


FEATURE_PROFILES = ("standard", "full", "smoke")  # the profiles whose report has the features page


def measured(manifests: list[dict]) -> tuple[int, bool]:
    """How many products the runs measured (a variant, river-fast, counts as its product) and
    whether any of our reference designs ran: what the front page's first line says. Counted
    from the runs, not the scorecard, since a profile (soak) may fill no scorecard column."""
    names = {name for m in manifests for name in m.get("systems", {}) if name in QUEUES}
    return (len({features.row_of(n) for n in names if features.is_product(n)}),
            any(not features.is_product(n) for n in names))


MACHINE_KEYS = ("cpu_model", "cores", "ram_gib", "os", "kernel")  # what names a host (fsync/s is the run's own)


def machines(manifests: list[dict]) -> list[dict]:
    """The distinct machines the runs were measured on, in order of first appearance, each with
    a label (A, B, ...) and its runs. A report's runs can come from different hosts (a study
    re-published in a later session): on 2026-11-26 the capacity study was re-measured on a
    host whose kernel build differed, and most of its brackets came out 10 - 40 % higher than
    the session before, so a reader must see which numbers share a machine."""
    found: dict[tuple, dict] = {}
    for m in manifests:
        key = tuple(m["machine"].get(k) for k in MACHINE_KEYS)
        found.setdefault(key, {"label": chr(ord("A") + len(found)), "machine": m["machine"], "runs": []})[
            "runs"].append(m)
    return list(found.values())


def hardware(hosts: list[dict]) -> str:
    """The CPU the header names: the first machine's, and which studies ran on another, so the
    front page never credits one machine with a study measured on another."""
    def cpu(host: dict) -> str:  # "Intel(R) Xeon(R) Processor" reads as "Intel Xeon Processor"
        return re.sub(r"\((R|TM|tm)\)", "", host["machine"]["cpu_model"]).strip()

    first = cpu(hosts[0])
    on_first = {m["study"] for m in hosts[0]["runs"]}
    others = []
    for h in hosts[1:]:  # a study part of whose runs the first machine measured is "some ... runs"
        studies = [f"some {s.replace('_', ' ')} runs" if s in on_first else s.replace("_", " ")
                   for s in dict.fromkeys(m["study"] for m in h["runs"])]
        name = cpu(h)
        others.append(f"{' and '.join(studies)} on {name if name != first else 'another ' + name + ' host'}")
    return "; ".join([first, *others])


def runs_table(manifests: list[dict], hosts: list[dict] | None = None) -> Table:
    """One line per run: where, when and by which code it measured, and who else used the machine
    meanwhile; which machine (`hosts`, from machines()), where the runs were measured on more than one."""
    import datetime as dt

    hosts = machines(manifests) if hosts is None else hosts
    label = {id(r): h["label"] for h in hosts for r in h["runs"]}
    rows = []
    for m in manifests:
        start = dt.datetime.fromisoformat(m["started_at"])
        company = m.get("company") or {}
        server = m["server"]["version"]
        rows.append({
            "study": m["study"], "run": m["stem"], "server": server.split(" on ")[0].split(",")[0],
            "started (UTC)": start.strftime("%Y-%m-%d %H:%M"), "minutes": fmt(run_minutes(m), 1),
            "cells reused": f"{m.get('cells_reused', 0)} of {len(m.get('cells') or [])}",
            "others / steal CPU": f"{100 * (company.get('others_share') or 0):.0f} % / "
                                  f"{100 * (company.get('steal_share') or 0):.0f} %",
            "fdatasync/s": fmt(m["machine"].get("fsync_per_s")),
            "code": ((m.get("git") or {}).get("sha") or "?")[:7] + (" +" if (m.get("git") or {}).get("dirty") else ""),
            **({"machine": label[id(m)]} if len(hosts) > 1 else {}),
        })
    return Table(rows)


def setting_sets(manifests: list[dict]) -> list[dict]:
    """The server settings that differ from the defaults, once per distinct set, with its runs."""
    sets: dict[str, dict] = {}
    for m in manifests:
        shown = {k: v for k, v in (m["server"].get("settings_non_default") or {}).items()
                 if k not in EPHEMERAL_SETTINGS}
        key = repr(sorted(shown.items()))
        sets.setdefault(key, {"settings": shown, "runs": []})["runs"].append(f"{m['study']} / {m['stem']}")
    return list(sets.values())


def _reported(measure: Any) -> list[str]:
    """The tables a study's section reads: all but the cells' timeline (timeline.py), which no
    section draws yet, so results published before a study kept one still render."""
    return [t for t in measure.TABLES if t != timeline.TABLE]


def _stale_layout(tables: dict, schemas: dict) -> list[str]:
    """The columns today's schemas have that no published run of a table carries: results
    written before a study's layout changed, which its analysis cannot read."""
    return sorted(c for t, df in tables.items() for c in schemas[t] if c not in df.columns)


def build(profile: str = "standard", *, data_dir: Path | None = None, figures_dir: Path | None = None,
          out: Path | None = None) -> Path:
    """Write the report of `profile`: its front page (`out`), a page per study and the provenance
    page beside it (in `<out stem>/`), report.html, findings.json, and the figures they show;
    paths default to the profile's own. Figures and pages an earlier layout wrote and this one
    does not are removed, so every file there is one a page shows."""
    studies = sweeps.studies_with(profile)
    where = outputs.for_profile(profile)
    data_dir = outputs.check_readable_data(data_dir or where.data_dir)
    out = Path(out or where.report)
    outputs.check_writable(out.parent, "the report")
    pages = out.parent / out.stem
    figures_root = outputs.check_writable(figures_dir or where.figures_dir, "figures")
    env = _env()
    sections, manifests, stale_studies, written = [], [], [], set()
    drawn: dict[str, alt.TopLevelMixin] = {}  # figure path from the report's folder -> its chart
    with outputs.locked(data_dir):
        for name in studies:  # a profile of one study only (seed) has no section for the others
            study = STUDIES[name]
            # a profile asking a question of its own (the pressure study's soak) heads its section with it
            title, question = getattr(study.report, "HEADINGS", {}).get(profile, (study.report.TITLE,
                                                                                  study.report.QUESTION))
            section = {"name": name, "title": title, "question": question,
                       "place": study.report.PLACE, "page": f"{pages.name}/{name}.md", "findings": [],
                       "spread": None, "key": None, "scorecard": {}}
            loaded = {t: load_profile(data_dir, name, profile, t) for t in _reported(study.measure)}
            tables = {t: df for t, (df, _) in loaded.items()}
            found = next(iter(loaded.values()))[1]
            where_rel = os.path.relpath(data_dir / name / profile, out.parent)
            if any(df is None for df in tables.values()):
                sections.append({**section, "body": f"No `{profile}` results for this study in "
                                 f"`{where_rel}/` yet: run `make report PROFILE={profile} STUDY={name}`.\n"})
                continue
            if (upgrade := getattr(study.analysis, "upgrade", None)) is not None:
                tables = upgrade(tables)  # columns a study derives for rows published before them
            stale = _stale_layout(tables, study.measure.TABLES)
            if stale:
                stale_studies.append(name)
                shas = sorted({(m.get("git") or {}).get("sha", "?")[:7] for m in found})
                sections.append({**section, "body": (
                    f"The `{profile}` results in `{where_rel}/` were written by an earlier layout of this study "
                    f"(commit {', '.join(shas)}) and lack {plural(len(stale), 'column')} it now records "
                    f"(`{'`, `'.join(stale[:3])}`{', …' if len(stale) > 3 else ''}), so they are not shown: "
                    f"`make report PROFILE={profile} STUDY={name}` re-measures them.\n")})
                continue

            def figure(chart_name: str, chart: alt.TopLevelMixin, study_name: str = name) -> Path:
                svg = charts.save(chart, figures_root / study_name / profile / chart_name)
                written.add(svg)
                rel = Path(os.path.relpath(svg, out.parent))
                drawn[rel.as_posix()] = chart
                return rel

            def other(other_profile: str, study_name: str = name) -> dict:
                theirs = {t: load_profile(data_dir, study_name, other_profile, t)[0]
                          for t in _reported(STUDIES[study_name].measure)}
                upgraded = getattr(STUDIES[study_name].analysis, "upgrade", None)
                return upgraded(theirs) if upgraded is not None else theirs

            ctx = study.report.context(tables, found, figure, other)
            manifests += found
            keys = (study.report.KEY_CHART,) if isinstance(study.report.KEY_CHART, str) else study.report.KEY_CHART
            key = next((p for k in keys for p in drawn if Path(p).stem == k and Path(p).parent.parent.name == name),
                       None)  # the first of its key charts this profile drew
            found_here = study.report.findings(tables, found)
            sections.append({**section, "body": env.get_template(f"{name}/report.md.j2").render(s=ctx),
                             "findings": found_here,
                             "nominal": any(f.claim.startswith(NOMINAL_LEAD) for f in found_here),
                             "spread": study.report.spread(tables, found), "key": key,
                             "scorecard": study.report.scorecard(tables, found)})
        if not manifests:
            older = f" ({', '.join(stale_studies)}: an earlier layout's)" if stale_studies else ""
            raise BenchError(f"no `{profile}` results this code can read in {data_dir}{older}: "
                             f"run `make report PROFILE={profile}` first")
        sections.sort(key=lambda s: s["place"])
        for section in sections:
            section["sentences"] = [f.text() for f in section["findings"]]
        hosts = machines(manifests)
        cards = frontpage.scorecards([s["scorecard"] for s in sections], frontpage.versions(manifests),
                                     list(QUEUES) + sorted({n for s in sections for n in s["scorecard"]} - set(QUEUES)))
        shared = {"profile": profile, "published": where.published, "first": manifests[0], "hardware": hardware(hosts),
                  "data_dir": os.path.relpath(data_dir, out.parent), "method": os.path.relpath(METHOD, out.parent),
                  "pages": pages.name, "report": out.name}
        findings = [f for s in sections for f in s["findings"]]
        latest = [s["sentences"][0] for s in sections if s["sentences"]][:MAX_LATEST]
        products, references = measured(manifests)
        text = env.get_template("report.md.j2").render(
            **shared, sections=sections, cards={k: t.markdown() if t.rows else "" for k, t in cards.items()},
            products=products, references=references, latest=latest, features_page=profile in FEATURE_PROFILES,
            questions=_answers(findings))
        text = captioned(text, drawn)
        page_texts = {f"{s['name']}.md": captioned(env.get_template("page.md.j2").render(**shared, s=s), drawn)
                      for s in sections}
        page_texts["provenance.md"] = env.get_template("provenance.md.j2").render(
            **shared, manifests=manifests, hosts=hosts, busy=[m for m in manifests if _had_company(m)],
            company=COMPANY, runs=runs_table(manifests, hosts).markdown(), setting_sets=setting_sets(manifests))
        if profile in FEATURE_PROFILES:
            page_texts["features.md"] = env.get_template("features.md.j2").render(**shared, features=features.markdown())
        pages.mkdir(exist_ok=True)
        for page, body in page_texts.items():
            write_text(relink(body, out.parent, pages), pages / page)
        write_text(text, out)
        shown = {path: chart for path, chart in drawn.items() if f"]({path})" in text}  # the front page's
        write_text(html.page(text, shown, title=_title(text), kinds=_kinds()), out.with_suffix(".html"))
        write_text(json.dumps([f.record() for f in findings], indent=1, ensure_ascii=False) + "\n",
                   pages / "findings.json")
        if where.published and profile == "standard" and out == where.report:
            _readme_findings(latest)
        _remove_unwritten(figures_root, [(s["name"], profile) for s in sections], written,
                          pages, {pages / p for p in page_texts} | {pages / "findings.json"})
    return out


MAX_LATEST = 6  # bullets under "What the latest run found"
GENERATED = "<!-- Generated by `make report"  # every page's first line: what _remove_unwritten may delete
README = outputs.REPO_ROOT / "README.md"
README_BLOCK = ("<!-- latest findings: written by `make report` from the report's own, do not edit -->\n",
                "<!-- end of latest findings -->\n")


def _readme_findings(latest: list[str]) -> None:
    """README's first screen shows the published report's latest findings: rewritten between its
    markers, so the two never disagree (a README without the markers is left alone)."""
    text = README.read_text()
    begin, end = README_BLOCK
    if begin not in text or end not in text:
        return
    head, rest = text.split(begin, 1)
    body = "".join(f"- {line}\n" for line in latest)
    new = head + begin + body + end + rest.split(end, 1)[1]
    if new != text:
        write_text(new, README)


def _said(value: Any) -> str:
    """A chart's title or description as text (a TitleParams's text, lines joined)."""
    if value is alt.Undefined or value is None:
        return ""
    text = getattr(value, "text", value)
    return " ".join(text) if isinstance(text, list) else str(text)


_FIGURE = re.compile(r"^!\[[^\]]*\]\(([^)\s]+)\)$", re.M)


def captioned(markdown: str, drawn: dict[str, alt.TopLevelMixin]) -> str:
    """Each figure of a page (written from the report's folder) with its chart's title as its alt
    text and its `description` as a one-line caption under it, so every page captions alike."""
    def caption(m: re.Match) -> str:
        chart = drawn.get(m.group(1))
        if chart is None:
            return m.group(0)
        title, text = _said(chart.title), _said(chart.description)
        return f"![{title or Path(m.group(1)).stem}]({m.group(1)})" + (f"\n\n*{text}*" if text else "")
    return _FIGURE.sub(caption, markdown)


def _title(markdown: str) -> str:
    return next((line[2:] for line in markdown.splitlines() if line.startswith("# ")), "report")


def _kinds() -> dict[str, str]:
    """Every system a chart may name: product or reference (the HTML page's filter)."""
    return {name: "product" if features.is_product(name) else "reference" for name in QUEUES}


def _answers(found: list) -> list[dict[str, Any]]:
    """Each question of findings.QUESTIONS with the findings that answer it ("not measured yet": none)."""
    return [{"question": q, "answers": [f.answer() for f in found if f.answers == key]} for key, q in QUESTIONS.items()]


def _remove_unwritten(figures_root: Path, shown: list[tuple[str, str]], written: set[Path], pages: Path,
                      kept: set[Path]) -> None:
    """Delete what an earlier layout generated and this one did not: figures in the folders of the
    studies rendered, and pages beside the report. Only files that say we generated them (a chart's
    STAMP, a page's first line) go: `--out` may name a folder that holds someone's own notes."""
    for study, profile in shown:
        folder = figures_root / study / profile
        for f in folder.glob("*") if folder.is_dir() else []:
            if f not in written and f.is_file() and not f.is_symlink() and (
                    f.suffix == ".png" and f.with_suffix(".svg") in written  # an earlier layout's raster twin
                    or f.suffix == ".svg" and charts.STAMP in f.read_text(errors="replace")):
                f.unlink()
    for f in pages.glob("*.md"):
        if f not in kept and f.is_file() and not f.is_symlink() and _generated(f):
            f.unlink()


def _generated(page: Path) -> bool:
    with page.open(errors="replace") as text:
        return text.readline().startswith(GENERATED)
