"""Render a profile's report (and its figures) from its published data alone.

No database is touched here. The report loops over the study registry: each study
owns its analysis, charts and report fragment (studies/<name>/report.py and
report.md.j2); this module only loads each study's published tables for the
profile, gives it a place for its figures, and puts the fragments under a headline
table that answers the questions first. Every sentence with a number in it is
computed from the data, so regenerating after a rerun leaves no stale claim behind.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import altair as alt
import jinja2

from benchlib import charts, features, frontpage, outputs, sweeps, timeline
from benchlib.errors import BenchError
from benchlib.results import load_profile, run_minutes, write_text
from benchlib.queues import QUEUES
from benchlib.studies import STUDIES
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


EVIDENCE_CHARS = 280  # an answer's evidence cell: the numbers that carry it, the rest is in its study's section


def _anchor(title: str) -> str:
    """The link GitHub makes for a `## title` heading."""
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def _short(row: dict[str, str]) -> dict[str, str]:
    evidence = row["evidence"]
    if len(evidence) > EVIDENCE_CHARS:
        cut = evidence[:EVIDENCE_CHARS].rsplit("; ", 1)[0]
        evidence = cut + "; … (its section has the rest)"
    return {**row, "evidence": evidence}


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
    """Write the report of `profile` (and its figures); paths default to the profile's own."""
    studies = sweeps.studies_with(profile)
    where = outputs.for_profile(profile)
    data_dir = outputs.check_readable_data(data_dir or where.data_dir)
    out = Path(out or where.report)
    outputs.check_writable(out.parent, "the report")
    figures_root = outputs.check_writable(figures_dir or where.figures_dir, "figures")
    env = _env()
    sections, headline, manifests, fronts, use_when, stale_studies = [], [], [], [], [], []
    with outputs.locked(data_dir):
        for name in studies:  # a profile of one study only (seed) has no section for the others
            study = STUDIES[name]
            loaded = {t: load_profile(data_dir, name, profile, t) for t in _reported(study.measure)}
            tables = {t: df for t, (df, _) in loaded.items()}
            found = next(iter(loaded.values()))[1]
            where_rel = os.path.relpath(data_dir / name / profile, out.parent)
            if any(df is None for df in tables.values()):
                sections.append({"title": study.report.TITLE, "body": f"No `{profile}` results for this study in "
                                 f"`{where_rel}/` yet: run `make report PROFILE={profile}`.\n"})
                continue
            if (upgrade := getattr(study.analysis, "upgrade", None)) is not None:
                tables = upgrade(tables)  # columns a study derives for rows published before them
            stale = _stale_layout(tables, study.measure.TABLES)
            if stale:
                stale_studies.append(name)
                shas = sorted({(m.get("git") or {}).get("sha", "?")[:7] for m in found})
                sections.append({"title": study.report.TITLE, "body": (
                    f"The `{profile}` results in `{where_rel}/` were written by an earlier layout of this study "
                    f"(commit {', '.join(shas)}) and lack {plural(len(stale), 'column')} it now records "
                    f"(`{'`, `'.join(stale[:3])}`{', …' if len(stale) > 3 else ''}), so they are not shown: "
                    f"`make report PROFILE={profile} STUDY={name}` re-measures them.\n")})
                continue

            def figure(chart_name: str, chart: alt.TopLevelMixin, study_name: str = name) -> Path:
                svg = charts.save(chart, figures_root / study_name / profile / chart_name)[0]
                return Path(os.path.relpath(svg, out.parent))

            def other(other_profile: str, study_name: str = name) -> dict:
                return {t: load_profile(data_dir, study_name, other_profile, t)[0]
                        for t in _reported(STUDIES[study_name].measure)}

            ctx = study.report.context(tables, found, figure, other)
            headline += ctx["headline"]
            manifests += found
            fronts.append(study.report.front(tables, found))
            use_when += study.report.use_when(tables, found)
            body = env.get_template(f"{name}/report.md.j2").render(s=ctx)
            sections.append({"title": study.report.TITLE, "body": body, "anchor": _anchor(study.report.TITLE)})
        if not manifests:
            older = f" ({', '.join(stale_studies)}: an earlier layout's)" if stale_studies else ""
            raise BenchError(f"no `{profile}` results this code can read in {data_dir}{older}: "
                             f"run `make report PROFILE={profile}` first")
        front = frontpage.table(fronts, features.about(), frontpage.versions(manifests), list(QUEUES) + sorted(
            {n for f in fronts for n in f} - set(QUEUES)))
        hosts = machines(manifests)
        text = env.get_template("report.md.j2").render(
            profile=profile, published=where.published, sections=sections, manifests=manifests,
            first=manifests[0], hosts=hosts, front=front.markdown(), use_when=use_when,
            features=features.markdown(notes=False) if profile in ("standard", "full", "smoke") else "",
            headline=Table([_short(h) for h in headline], columns=["question", "answer", "evidence"]).markdown()
            if headline else "", method=os.path.relpath(METHOD, out.parent),
            busy=[m for m in manifests if _had_company(m)], company=COMPANY,
            runs=runs_table(manifests, hosts).markdown(), setting_sets=setting_sets(manifests),
            data_dir=os.path.relpath(data_dir, out.parent))
        write_text(text, out)
    return out

