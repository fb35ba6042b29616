"""A profile's report, from its data alone: the answer first, facts from the manifests."""
from __future__ import annotations

import json
import os
import re

import pytest

from benchlib import report
from benchlib.studies import drain
from benchlib.tables import plural

pytestmark = pytest.mark.integration


def page(front, name: str) -> str:
    """A page the report links from its front page `front`: report/<name>.md beside report.md."""
    return (front.parent / front.stem / f"{name}.md").read_text()


@pytest.fixture(scope="module")
async def smoke_data(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    await drain.run(drain.Params(min_timed_s=0, backend="sqlite", consumers=[1, 2], batch_sizes=[1, 10], prefill=100, samples=1,
                                 warmup=0), data_dir=data, profile="smoke", progress=False)
    return data


def test_a_smoke_report_says_first_that_it_supports_no_conclusions(smoke_data, tmp_path):
    from benchlib import charts

    stale = tmp_path / "figures" / "drain" / "smoke" / "versus_default.svg"  # what an earlier layout drew
    stale.parent.mkdir(parents=True)
    stale.write_text(f"<svg>{charts.STAMP}</svg>")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "gone.md").write_text(f"{report.GENERATED}` -->\na page an earlier layout wrote")
    mine = tmp_path / "report" / "notes.md"  # someone's own file where the pages go: not ours to delete
    mine.write_text("my notes")
    out = report.build("smoke", data_dir=smoke_data, figures_dir=tmp_path / "figures", out=tmp_path / "report.md")
    text = out.read_text()
    assert "short runs support no conclusions" in text.splitlines()[0]
    # the answers first (findings, the scorecards), then a section per study; caveats last. Only
    # SQLite ran: no PostgreSQL scorecard, and no "Pick by need" whose every answer would be a blank
    assert (text.index("## What the latest run found") < text.index("## The systems on other backends")
            < text.index("## " + drain.report.TITLE)
            < text.index("## What this does not measure yet") < text.index("## Words used here"))
    assert "## The products on PostgreSQL" not in text and "## Pick by need" not in text
    assert "| sqlite (SQLite) |" in text
    seen = re.sub(r"<!--.*?-->\n?", "", text)  # what a reader sees: not the generated-file comment
    assert seen.index("## What the latest run found") < 10 * 80  # on the first screen, whatever the CPU's name
    assert "No `smoke` results for this study" in text  # the xmin study did not run: said, not hidden
    assert "(s)" not in text
    drain_page = page(out, "drain")
    assert "Scaling-law fits" not in drain_page  # 1 and 2 consumers: no law to test, no section
    assert "](../figures/drain/smoke/throughput_vs_batch.svg)" in drain_page  # links from the page's folder
    assert "](figures/drain/smoke/throughput_vs_batch.svg)" in text  # the key chart on the front page
    assert f"{plural(os.cpu_count(), 'core')}, shared by the harness and the server" in page(out, "provenance")
    assert "](report/drain.md)" in text and "](report/provenance.md)" in text
    assert not stale.exists() and not (tmp_path / "report" / "gone.md").exists()  # only what a page shows stays
    assert mine.read_text() == "my notes"
    shown = "".join(p.read_text() for p in [out, *(tmp_path / "report").glob("*.md")] if p != mine)
    drawn = sorted((tmp_path / "figures").rglob("*.svg"))
    assert drawn and all(f"{f.relative_to(tmp_path).as_posix()})" in shown for f in drawn)
    assert json.loads((tmp_path / "report" / "findings.json").read_text()) == []  # on PostgreSQL only: none here
    assert out.with_suffix(".html").read_text().startswith("<!DOCTYPE html>")


def test_the_report_says_when_a_run_had_company_or_ran_with_the_servers_values(smoke_data, tmp_path):
    manifest_path = smoke_data / "drain" / "smoke" / "sqlite__sqlite.manifest.json"
    original = manifest_path.read_text()
    manifest = json.loads(original)
    manifest["company"] |= {"others_share": 0.35, "steal_share": 0.05, "cpu_s_others": 4.0}
    for cell in manifest["company_per_cell"].values():  # what this machine really had is not the subject here
        cell |= {"others_share": 0.0, "steal_share": 0.0, "cpu_s_steal": 0.0}
    first_cell, second_cell = list(manifest["company_per_cell"])[:2]
    manifest["company_per_cell"][first_cell] |= {"others_share": 0.5, "cpu_s_others": 2.0}
    # a cell of a few milliseconds: one 10 ms tick of someone else's CPU reads as 120%
    manifest["company_per_cell"][second_cell] |= {"others_share": 1.2, "cpu_s_others": 0.0}
    manifest["server"]["settings_not_applied"] = {"autovacuum_naptime": {"requested": "2s", "effective": "1min"}}
    manifest_path.write_text(json.dumps(manifest))
    try:
        text = page(report.build("smoke", data_dir=smoke_data, figures_dir=tmp_path / "f", out=tmp_path / "r.md"),
                    "provenance")
    finally:
        manifest_path.write_text(original)
    assert "**Something else used the machine** during 1 run" in text and "| drain | sqlite__sqlite | 40 % |\n" in text
    crowded = manifest["company_per_cell"][first_cell]["cell"]
    assert "Cells measured while others took 10 % or more of the CPU (their share in brackets):" in text
    assert f"| drain | sqlite__sqlite | {crowded} (50%) |\n" in text  # and only that one: a millisecond cell's tick is no company
    assert "**ran with the server's own values**" in text and "`autovacuum_naptime` 1min instead of 2s" in text


def test_results_of_an_earlier_layout_are_named_not_rendered(smoke_data, tmp_path):
    """A study whose published tables lack columns its code now records (data committed before
    a change re-keyed it) gets a section that says so and how to re-measure it, instead of a
    traceback from its analysis; with nothing else to show, one line says why."""
    import shutil

    import polars as pl

    from benchlib.errors import BenchError
    from benchlib.studies import xmin_horizon

    data = tmp_path / "data"
    shutil.copytree(smoke_data, data)
    old = data / "xmin_horizon" / "smoke"
    old.mkdir(parents=True)
    for table in xmin_horizon.measure.TABLES:
        pl.DataFrame({"design": ["rotation"], "old_metric": [1.0]}).write_parquet(old / f"postgres.{table}.parquet")
    manifest = json.loads((data / "drain" / "smoke" / "sqlite__sqlite.manifest.json").read_text())
    (old / "postgres.manifest.json").write_text(json.dumps(manifest | {"study": "xmin_horizon", "stem": "postgres",
                                                                       "git": {"sha": "abcdef0123", "dirty": False}}))
    text = report.build("smoke", data_dir=data, figures_dir=tmp_path / "f", out=tmp_path / "r.md").read_text()
    section = text[text.index("## " + xmin_horizon.report.TITLE):]
    assert "were written by an earlier layout of this study (commit abcdef0)" in section
    assert "`make report PROFILE=smoke STUDY=xmin_horizon` re-measures them" in section
    assert "## " + drain.report.TITLE in text  # the study that can be read is rendered
    shutil.rmtree(data / "drain")
    with pytest.raises(BenchError, match=r"xmin_horizon: an earlier layout's\): run `make report PROFILE=smoke`"):
        report.build("smoke", data_dir=data, figures_dir=tmp_path / "f", out=tmp_path / "r.md")


async def test_the_seed_cell_is_rendered_beside_the_published_comparison(tmp_path):
    from benchlib.studies import xmin_horizon

    params = xmin_horizon.Params(designs=["claim_then_delete"], holders=["rr_snapshot"], rate=100, producers=1,
                                 consumers=1, bystanders=1, bystander_rows=1000, bystander_rate=20, phase_s=2,
                                 sample_interval_s=1, autovacuum={"autovacuum_naptime": "1s"})
    await xmin_horizon.run(params, data_dir=tmp_path / "data", profile="seed", progress=False)
    out = report.build("seed", data_dir=tmp_path / "data", figures_dir=tmp_path / "f", out=tmp_path / "r.md")
    assert drain.report.TITLE not in out.read_text()  # the seed profile is the xmin study's alone: no drain section
    text = page(out, "xmin_horizon")
    section = text[text.index("### The seed-sized cell beside the published comparison"):]
    assert "| published: SKIP LOCKED |" in section and "| here: claim_then_delete |" in section
    assert "SKIP LOCKED (published): dequeues/s 0.65×" in section
    assert "Here, `claim_then_delete`: dequeues/s" in section
    assert "NikolayS/PgQue" in section


async def test_the_durability_section_compares_configurations_and_tables_the_crashes(tmp_path):
    """Two configurations measured for real in two rounds (the second in reversed order, no
    crashes): the section pairs them round by round against the reference's lever, tables every
    crash mode with its losses and the settings that decide them, and draws the charts."""
    from benchlib.studies import durability

    data = tmp_path / "data"
    for config, repeat in (("default", 0), ("async_commit", 0), ("async_commit", 1), ("default", 1)):
        await durability.run(durability.Params(config=config, concurrency=[1, 2, 4], jobs=[150], samples=1,
                                               warmup=0, crashes=0 if repeat else 2, crash_after_s=[0.2, 0.4],
                                               crash_backlog=3000, repeat=repeat),
                             data_dir=data, profile="smoke", progress=False)
    out = report.build("smoke", data_dir=data, figures_dir=tmp_path / "f", out=tmp_path / "r.md")
    text, section = out.read_text(), page(out, "durability")
    assert "runs the configurations in 2 rounds" in section
    assert "Each cell and run has 1 measured sample after a discarded warm-up." in section
    assert "`synchronous_commit=off` (`async_commit`) ran at " in section and "(2 rounds: " in section
    assert "measured 15× at one worker (521 → 8,010 jobs/s)" in section and "The reference, " in section
    assert "| default | on | 200ms | 1 MB | skip_locked | enqueue | 0 of 2 (0 – 84 %) |" in section
    assert "| async_commit | off | 200ms | 1 MB | skip_locked | ack | " in section
    assert "With `synchronous_commit=on` (`default`) no SIGKILL crash lost an acknowledged job: 4 crashes on " \
           "PostgreSQL" in section
    assert "For 2 crashes it is the smallest and largest of 2" in section  # which interval, said once
    assert "commit 1f395354d" in section and "What was verified, and what was not" in section
    assert "| Which never loses a job when the server crashes? | Our skip_locked: nothing lost in 4 crashes" \
           in text  # the front page's answer, from the crashes
    found = json.loads((tmp_path / "r" / "findings.json").read_text())
    assert found and all(f["study"] == "durability" and f["cells"] and f["text"] in section for f in found)
    for chart in ("throughput_vs_concurrency", "crash_loss", "commit_settings_vs_default"):
        assert (tmp_path / "f" / "durability" / "smoke" / f"{chart}.svg").exists()
    assert "does **not** cover" in section
    # every measured sample had its pgbench run: the limit section has numbers, not excuses
    assert "The harness reached " in section and "of pgbench's rate for the same statements" in section
    assert "Only the default server" in section  # no other server measured here


async def test_a_second_server_is_compared_cell_by_cell(tmp_path):
    """The durability study on the default server and on the system's PostgreSQL 15: the
    report keeps the main tables to the default server and compares the two cell by cell."""
    from benchlib.provision import binaries
    from benchlib.studies import durability

    if not any(b.major == 15 for b in binaries.available()):
        pytest.skip("no PostgreSQL 15 on this machine (Debian's postgresql-15)")
    data = tmp_path / "data"
    for major in (None, 15):
        await durability.run(durability.Params(config="default", concurrency=[1, 2], jobs=[150], samples=1,
                                               warmup=0, crashes=1, crash_after_s=[0.2, 0.3], crash_backlog=500,
                                               pg_major=major), data_dir=data, profile="smoke", progress=False)
    section = page(report.build("smoke", data_dir=data, figures_dir=tmp_path / "f", out=tmp_path / "r.md"),
                   "durability")
    primary = binaries.choose().major
    assert f"### The server version: PostgreSQL {primary} and 15" in section
    assert f"PostgreSQL 15 against {primary}, cell by cell (default; 2 cells)" in section
    assert f"| PG {primary} jobs/s | PG 15 jobs/s |" in section
    assert f"| {primary} | default | on |" in section and "| 15 | default | on |" in section  # one crash table
