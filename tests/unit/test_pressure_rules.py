"""The pressure study's rules on fakes: its scenario checked before anything runs, a cell read
per second and per phase (the capacity criterion, the recovery after each pressure), and the
verdicts the report states (no database)."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchlib.errors import BenchError
from benchlib.results import frame
from benchlib.studies.pressure import analysis, measure
from benchlib.workload import scenario
from benchlib.workload.ledger import NONE

S = 1_000_000_000
WARM = {"name": "warmup", "kind": "warmup", "seconds": 1}
CLEAN = {"name": "clean", "kind": "load", "seconds": 6}
DRAIN = {"name": "drain", "kind": "drain", "seconds": 10}


def _scenario(recover_s: float = 6) -> list[dict]:
    return [WARM, CLEAN, {"name": "overload", "kind": "overload", "seconds": 4, "rate": 2.5},
            {"name": "after", "kind": "recover", "seconds": recover_s}, DRAIN]


def _cell(recover_s: float = 6, service_jobs_s: float = 18.0, lose: int = 0):
    """A fake cell at 10 jobs/s (x1 reference 10): a FIFO server of `service_jobs_s`, each job
    handled 50 ms after it is due at the earliest; the overload offers 25 jobs/s for 4 s."""
    phases = scenario.parse(_scenario(recover_s), 1.0)
    spans, t = [], 0.0
    for ph in phases[:-1]:
        spans.append((ph, t, t + ph.seconds))
        t += ph.seconds
    spans.append((phases[-1], t, t + 2))
    intended = []
    for ph, a, b in spans[:-1]:
        k = 0
        while a + k / (10 * ph.rate) < b:
            intended.append(a + k / (10 * ph.rate))
            k += 1
    intended = np.asarray(intended)
    first, free = [], 0.0
    for x in intended:
        free = max(x + 0.05, free + 1 / service_jobs_s)
        first.append(free)
    to_ns = lambda a: (np.asarray(a) * S).astype(np.int64)  # noqa: E731
    first = to_ns(first)
    if lose:
        first[-lose - 30:-30] = NONE  # jobs of the recovery never handled
    return measure.Spans(tuple(spans)), to_ns(intended), to_ns(intended + 0.001), first, t + 2


def _calls(intended: np.ndarray) -> np.ndarray:
    """Each job its own enqueue call, sent when due, 1 ms long (the fake cell's acknowledgements)."""
    return measure.enqueue_calls(intended, intended + 1_000_000)


def test_a_pressure_that_falls_behind_is_back_when_its_backlog_and_p99_are_clean_again():
    spans, intended, acked, first, length = _cell()
    seconds = measure.per_second(intended, acked, first, length, spans)
    assert [r["offered"] for r in seconds[:11]] == [10] * 7 + [25] * 4 and seconds[0]["phase"] == "warmup"
    rows = {r["phase"]: r for r in measure.phase_rows(seconds, spans, intended, first, 10.0, _calls(intended), 1)}
    assert set(rows) == {"clean", "overload", "after"}  # neither the warm-up nor the drain is judged
    clean, over = rows["clean"], rows["overload"]
    assert clean["verdict"] == "pass" and clean["offered_jobs_s"] == pytest.approx(10)
    assert over["verdict"] == "fail" and over["offered_jobs_s"] == pytest.approx(25) and over["backlog_max"] >= 20
    # 4 s at 25 jobs/s against 18 leaves 28 jobs, drained at 8 jobs/s: back within the recovery, after about 4 s
    assert 3 <= over["recovered_s"] <= 6 and over["recovery_window_s"] == 6
    assert over["e2e_p99_ms"] > 2 * clean["e2e_p99_ms"] and rows["after"]["recovered_s"] is None
    again = measure.phase_rows(seconds, measure.Spans(spans.ran[:3] + (
        (spans.ran[3][0], spans.ran[3][1], spans.ran[2][2] + 1.0),) + spans.ran[4:]), intended, first, 10.0,
        _calls(intended), 1)
    assert next(r for r in again if r["phase"] == "overload")["recovered_s"] is None  # 1 s was not enough


def test_a_second_is_back_only_when_both_its_backlog_and_its_p99_are():
    rows = [{"t_s": 10.0, "backlog": 0, "e2e_p99_ms": 500.0}, {"t_s": 11.0, "backlog": 9, "e2e_p99_ms": 20.0},
            {"t_s": 12.0, "backlog": 1, "e2e_p99_ms": 30.0}]
    assert measure.recovered_after(rows, 10.0, 20.0, backlog_ok=2, p99_ok=40.0) == 3.0
    assert measure.recovered_after(rows, 10.0, 12.5, backlog_ok=2, p99_ok=40.0) is None  # its second ends later
    assert measure.recovered_after(rows, 9.5, 20.0, backlog_ok=9, p99_ok=None) == 1.5


def test_a_recovery_is_watched_until_a_second_is_back_by_the_published_rule_and_for_its_tail_only():
    from benchlib.studies.pressure import recovery
    from benchlib.workload.ledger import Ledger

    clean, overload, after, _ = scenario.parse([
        {"name": "clean", "kind": "load", "seconds": 3},
        {"name": "overload", "kind": "overload", "seconds": 2, "rate": 1.5},
        {"name": "after", "kind": "recover", "seconds": 10},
        {"name": "drain", "kind": "drain", "seconds": 5}], 1.0)
    starts = [(clean, 0.0), (overload, 3.0), (after, 5.0)]
    ledger = Ledger(by_seq=True)

    def jobs(from_s: float, to_s: float, handled_at=lambda t: t + 0.02) -> list[int]:
        """10 jobs a second, acknowledged 1 ms after their instant, handled at `handled_at` (None: not yet)."""
        out = []
        for t in np.arange(from_s, to_s, 0.1):
            seq = ledger.reserve(1)
            ledger.enqueued(seq, [seq], int((t + 0.001) * S), [int(t * S)])
            if (h := handled_at(t)) is not None:
                ledger.handled_one(seq, int(h * S))
            out.append(seq)
        return out

    jobs(0, 3)  # clean: 20 ms each
    jobs(3, 7, handled_at=lambda t: max(t + 0.02, 6.6))  # stalled until 6.6 s: second 6 back in backlog, not in p99
    late = jobs(7, 12, handled_at=lambda t: None if round(t, 1) == 7.3 else t + 0.02)[3]  # one not handled yet
    watch = recovery.Recovery(tail_s=2)
    watch.jobs.read(ledger, 0)
    assert watch.clean_limits(starts) == (1, pytest.approx(2 * 20.0, abs=0.01))
    assert watch.over(starts, 10.5) is False  # second 7 holds a job not handled yet: late, so not back
    ledger.handled_one(late, int(7.32 * S))
    watch.jobs.read(ledger, 0)
    assert watch.over(starts, 9.9) is False and watch.over(starts, 10.0) is True  # back at 8 s, 2 s of tail
    # the reading after the cell, from every job, finds the same second
    rec = ledger.reconcile()
    spans = measure.Spans(((clean, 0.0, 3.0), (overload, 3.0, 5.0), (after, 5.0, 10.0)))
    rows = measure.per_second(rec.intended_ns, rec.acked_ns, rec.first_ns, 12.0, spans)
    assert recovery.recovered_after(rows, 5.0, 10.0, 1, 40.0) == 3.0


def test_unfinished_jobs_fail_their_phase():
    spans, intended, acked, first, length = _cell(lose=3)
    seconds = measure.per_second(intended, acked, first, length, spans)
    after = next(r for r in measure.phase_rows(seconds, spans, intended, first, 10.0, _calls(intended), 1) if r["phase"] == "after")
    assert after["unfinished"] == 3 and after["verdict"] == "fail" and "3 job(s) lost" in after["reason"]


def _tables(clean_ok: bool = True):
    spans, intended, acked, first, length = _cell()
    seconds = measure.per_second(intended, acked, first, length, spans)
    phases = [{"system": "a", "pressure": "overload", "round": 0, **r}
              for r in measure.phase_rows(seconds, spans, intended, first, 10.0, _calls(intended), 1)]
    if not clean_ok:
        phases[0]["verdict"] = "fail"
    cells = [{"system": "a", "pressure": "overload", "round": 0, "lost": 0, "unfinished": 0, "duplicates": 2,
              "drained": True, "error": None},
             {"system": "a", "pressure": "bursts", "round": 0, "lost": None, "unfinished": 40, "duplicates": 0,
              "drained": False, "error": None},
             {"system": "b", "pressure": "overload", "round": 0, "error": "it broke"}]
    return frame(cells, measure.CELLS), frame(phases, measure.PHASES)


def test_the_report_says_held_fell_behind_and_back_in_words():
    cells, phases = _tables()
    j = analysis.judged(cells, phases)
    assert j["system"].to_list() == ["a"] and j["clean_ok"].all()  # b's cell failed: judged nowhere
    (row,) = analysis.matrix(j).rows
    assert row["overload ×2.5"].startswith("fell behind, back in ") and row["clean kept up"] == "yes"
    assert analysis.summary(j)["a"] | {"slowest": 0} == {"cells": 1, "clean_missed": {},
                                                          "judged": 1, "held": 0, "back": 1,
                                                          "slowest": 0, "not_back": [], "unjudged": {}, "lost": 0,
                                                          "unchecked": 0, "unfinished": 0, "duplicates": 2}
    # the bursts cell's drain did not finish: its 40 jobs are unfinished and unchecked, never 0 lost
    assert analysis.totals({"cells": cells}) == {"lost": 0, "duplicates": 2, "failed": 1, "unchecked": 1}


def test_the_report_gives_throughput_and_p50_against_the_clean_phase_and_the_waits_of_every_phase():
    cells, phases = _tables()
    over = pl.col("kind") == "overload"
    clean = pl.col("kind") == "load"
    phases = phases.with_columns(
        completed_jobs_s=pl.when(over).then(5.0).when(clean).then(10.0).otherwise("completed_jobs_s"),
        e2e_p50_ms=pl.when(over).then(30.0).when(clean).then(10.0).otherwise("e2e_p50_ms"),
        wait_events=pl.when(over).then(pl.lit('{"Lock:tuple": 0.6, "CPU": 0.3, "Client:idle": 0.1}'))
        .when(clean).then(pl.lit('{"CPU": 0.9, "Client:idle": 0.1}')).otherwise("wait_events"))
    (row,) = analysis.ratios(analysis.judged(cells, phases)).rows
    assert row == {"system": "a", "overload ×2.5": "jobs/s ×0.50, p50 ×3.0"}
    (row,) = analysis.waits(phases).rows
    assert row == {"system": "a", "clean": "CPU 90 %, Client:idle 10 %", "overload ×2.5": "Lock:tuple 60 %, CPU 30 %"}
    cells, phases = _tables(clean_ok=False)  # no baseline: said so, no ratio
    (row,) = analysis.ratios(analysis.judged(cells, phases)).rows
    assert row["overload ×2.5"] == "clean fell behind"


def test_the_scorecard_counts_the_pressures_not_judged_and_rounds_a_return_as_the_page_does():
    """2026-12-07: absurd's scorecard said "2/2 held, back within 0.99 s" while two of its four
    pressures went unjudged (our producers short), and its page said "back within 1 s"."""
    from benchlib.studies.pressure import report
    cells, phases = _tables()
    over = pl.col("kind") == "overload"
    held = phases.with_columns(verdict=pl.when(over).then(pl.lit("pass")).otherwise("verdict"),
                               recovered_s=pl.when(over).then(0.99).otherwise("recovered_s"))
    short = held.with_columns(pressure=pl.lit("bursts"), enqueue_busy_share=pl.lit(0.1),
                              verdict=pl.when(over).then(pl.lit("producer-bound")).otherwise("verdict"))
    tables = {"cells": cells, "phases": pl.concat([held, short])}
    assert report.scorecard(tables, [])["a"] == {report.COLUMN: "1/1 held (1 not judged), back within 1 s"}


def test_a_system_not_judged_is_not_named_by_what_its_holders_did():
    """2026-12-07: the report said graphile-worker was not judged (a clean phase unclear) and, in the
    next line, named it for the largest p99 rise under an idle transaction."""
    from benchlib.studies.pressure import report
    cells, phases = _tables()
    over = pl.col("kind") == "overload"
    idle = phases.with_columns(pressure=pl.lit("idle_tx"), kind=pl.when(over).then(pl.lit("hold")).otherwise("kind"),
                               holder=pl.when(over).then(pl.lit("idle_xid")).otherwise(None))
    cells = pl.concat([cells, cells.filter(pl.col("pressure") == "overload").with_columns(pressure=pl.lit("idle_tx"))])
    said = " ".join(f.text() for f in report.findings({"cells": cells, "phases": pl.concat([phases, idle])}, []))
    assert "Under an idle transaction holding the horizon, p99 rose at most" in said and "(a)" in said
    unclear = phases.with_columns(verdict=pl.when(pl.col("phase") == "clean").then(pl.lit("inconclusive"))
                                  .otherwise("verdict"))
    idle_unclear = idle.with_columns(verdict=pl.when(pl.col("phase") == "clean").then(pl.lit("inconclusive"))
                                     .otherwise("verdict"))
    said = " ".join(f.text() for f in report.findings({"cells": cells, "phases": pl.concat([phases, idle_unclear])}, []))
    assert "Pressures not judged" in said and "(unclear: idle_xid)" in said and "Under an idle transaction" not in said
    hold = pl.col("kind") == "hold"  # our producers short under the holder: not applied in full, not judged
    short = idle.with_columns(verdict=pl.when(hold).then(pl.lit("producer-bound")).otherwise("verdict"),
                              enqueue_busy_share=pl.when(hold).then(0.5).otherwise("enqueue_busy_share"))
    said = " ".join(f.text() for f in report.findings({"cells": cells, "phases": pl.concat([phases, short])}, []))
    assert "(producers short: idle_xid)" in said and "Under an idle transaction" not in said


def test_a_clean_phase_that_fell_behind_judges_nothing():
    cells, phases = _tables(clean_ok=False)
    j = analysis.judged(cells, phases)
    (row,) = analysis.matrix(j).rows
    assert row["overload ×2.5"] == "clean fell behind" and row["clean kept up"] == "no"
    assert analysis.summary(j)["a"]["judged"] == 0


def test_the_report_says_in_how_many_cells_the_clean_phase_kept_up_and_what_was_left_unchecked():
    cells, phases = _tables()
    bursts = phases.with_columns(pressure=pl.lit("bursts"),
                                 verdict=pl.when(pl.col("phase") == "clean").then(pl.lit("fail")).otherwise("verdict"))
    j = analysis.judged(cells, pl.concat([phases, bursts]))
    (row,) = analysis.matrix(j).rows  # one row per system, its clean phase counted over its cells
    assert row["clean kept up"] == "in 1 of 2 cells" and row["overload ×2.5"] == "clean fell behind"
    summary = analysis.summary(j)["a"]
    assert (summary["cells"], summary["clean_missed"]) == (2, {"fell behind": 1})
    from benchlib.studies.pressure import report
    said = [f.text() for f in report.findings({"cells": cells, "phases": pl.concat([phases, bursts])}, [])]
    # judged where its own cell's clean phase kept up: the overload is, the bursts are not
    assert "clean phase was not shown to keep up at 70 % of the quoted capacity: a (fell behind: overload ×2.5)." \
        in " ".join(said) and "1 of 1 systems were back" in " ".join(said) and "1 of 2 cells judged" in " ".join(said)
    assert report.scorecard({"cells": cells, "phases": pl.concat([phases, bursts])}, [])["a"][report.COLUMN] \
        .startswith("0/1 held (1 not judged), back")
    assert "Unchecked, their drain unfinished: a (40 jobs left)." in " ".join(said)  # the cell's, not its phases'


def test_a_clean_phase_that_was_unclear_or_short_is_said_so_not_fell_behind():
    """2026-12-06: absurd's clean phases were unclear once and producer-bound twice, and the report
    said it "fell behind" in 3 of 4 cells."""
    cells, phases = _tables()
    cells = pl.concat([cells, cells.filter(pl.col("pressure") == "overload").with_columns(pressure=pl.lit("readers"))])
    clean = pl.col("phase") == "clean"
    unclear = phases.with_columns(pressure=pl.lit("readers"),
                                  verdict=pl.when(clean).then(pl.lit("inconclusive")).otherwise("verdict"))
    short = phases.with_columns(pressure=pl.lit("bursts"),
                                verdict=pl.when(clean).then(pl.lit("producer-bound")).otherwise("verdict"))
    both = pl.concat([phases, unclear, short])
    j = analysis.judged(cells, both)
    assert analysis.summary(j)["a"]["clean_missed"] == {"producers short": 1, "unclear": 1}
    (row,) = analysis.matrix(j).rows
    assert row["clean kept up"] == "in 1 of 3 cells" and "clean unclear" in row.values()
    from benchlib.studies.pressure import report
    said = " ".join(f.text() for f in report.findings({"cells": cells, "phases": both}, []))
    assert "a (producers short: overload ×2.5; unclear: overload ×2.5)." in said  # both cells copy the overload
    assert report.scorecard({"cells": cells, "phases": both}, [])["a"][report.COLUMN].startswith("0/1 held (2 not judged)")
    none = both.with_columns(verdict=pl.when(clean).then(pl.lit("inconclusive")).otherwise("verdict"))
    assert report.scorecard({"cells": cells, "phases": none}, [])["a"] == {
        report.COLUMN: "clean phase unclear in 3 of 3 cells"}  # none judged: why, in how many


def test_a_phase_autovacuum_ran_in_shows_no_net_dead_tuples():
    cells, phases = _tables()
    vacuumed = phases.with_columns(autovacuums=pl.when(pl.col("phase") == "clean").then(1).otherwise(0),
                                   dead_tup_growth=pl.lit(-500), bytes_growth=pl.lit(8192))
    (row,) = analysis.bloat(vacuumed).rows
    assert row["clean: dead tuples / 1k jobs"] == analysis.VACUUMED and row["clean: KiB / 1k jobs"] != "–"
    (row,) = analysis.bloat(vacuumed.with_columns(autovacuums=pl.lit(0))).rows
    assert row["clean: dead tuples / 1k jobs"].startswith("-")  # none ran: the net change is the phase's own
    later = vacuumed.with_columns(pressure=pl.lit("bursts"), autovacuums=pl.lit(0), dead_tup_growth=pl.lit(6))
    (row,) = analysis.bloat(pl.concat([vacuumed, later])).rows
    assert row["clean: dead tuples / 1k jobs"] == "100"  # 6 in its 60 jobs: another cell's clean phase that no autovacuum ran in


def test_the_bloat_table_gives_the_clean_phase_first_then_the_holders_in_the_scenarios_order():
    """2026-12-07: an autovacuumed clean phase sorted after the first holder, and so did its columns."""
    cells, phases = _tables()
    over = pl.col("kind") == "overload"

    def held(pressure: str, holder: str) -> pl.DataFrame:
        return phases.with_columns(pressure=pl.lit(pressure), kind=pl.when(over).then(pl.lit("hold")).otherwise("kind"),
                                   holder=pl.when(over).then(pl.lit(holder)).otherwise(None))
    both = pl.concat([held("idle_tx", "idle_xid"), held("readers", "active_readers")]).with_columns(
        autovacuums=pl.when(pl.col("kind") == "load").then(1).otherwise(0))  # every clean phase vacuumed
    (row,) = analysis.bloat(both).rows
    assert [k.split(":")[0] for k in row][::2] == ["system", "clean", "idle_xid", "active_readers"]


def test_the_producers_share_inside_enqueue_calls_counts_each_call_once_and_only_in_the_phase():
    # two jobs of one call (one start, one acknowledgement), a call across the window's start, one without a start
    sent = np.array([1 * S, 1 * S, 3 * S - S // 2, NONE])
    acked = np.array([2 * S, 2 * S, 3 * S + S // 2, 5 * S])
    calls = measure.enqueue_calls(sent, acked)
    assert calls.tolist() == [[S, S], [5 * S // 2, S]]
    assert measure.busy_share(calls, 0.0, 4.0, producers=1) == pytest.approx(2 / 4)
    assert measure.busy_share(calls, 3.0, 4.0, producers=2) == pytest.approx(0.5 / 2)  # half a call in it


@pytest.mark.parametrize(("busy", "completed", "says", "judged"), [
    (0.95, 8.0, "enqueue slowed", 1),  # inside its calls all the phase, the harness no busier: the system's
    (0.95, 12.0, "producers short", 0),  # the harness handled more than when it kept up: may be its own loop
    (0.5, 8.0, "producers short", 0),  # the producers were free half the time: their own lag
])
def test_a_producer_bound_pressure_is_the_systems_only_when_its_enqueue_set_the_pace(busy, completed, says, judged):
    cells, phases = _tables()
    over = phases.with_row_index().filter(pl.col("phase") == "overload")["index"][0]
    phases = phases.with_columns(
        verdict=pl.when(pl.int_range(pl.len()) == over).then(pl.lit("producer-bound")).otherwise("verdict"),
        enqueue_busy_share=pl.when(pl.int_range(pl.len()) == over).then(busy).otherwise("enqueue_busy_share"),
        completed_jobs_s=pl.when(pl.int_range(pl.len()) == over).then(completed).otherwise(
            pl.when(pl.col("phase") == "clean").then(10.0).otherwise("completed_jobs_s")))
    j = analysis.judged(cells, phases)
    assert analysis.matrix(j).rows[0]["overload ×2.5"].startswith(says)
    summary = analysis.summary(j)["a"]
    assert summary["judged"] == judged and summary["held"] == 0 and summary["unjudged"] == ({} if judged else {"producers short": ["overload ×2.5"]})


@pytest.mark.parametrize(("raw", "says"), [
    ([CLEAN, DRAIN], "starts with one warmup phase"),
    ([WARM, CLEAN, DRAIN], "needs a pressure phase"),
    ([WARM, {"name": "o", "kind": "overload", "seconds": 2, "rate": 2}, {"name": "r", "kind": "recover", "seconds": 2},
      DRAIN], "needs a `load` phase before its first pressure"),
    ([WARM, CLEAN, {"name": "o", "kind": "overload", "seconds": 2, "rate": 2}, DRAIN], "followed by a recover phase"),
    ([WARM, CLEAN, {"name": "h", "kind": "hold", "seconds": 2}, {"name": "r", "kind": "recover", "seconds": 2}, DRAIN],
     "each hold phase names its holder"),
    ([WARM, CLEAN, {"name": "k", "kind": "fault", "seconds": 2, "fault": "kill_worker"},
      {"name": "r", "kind": "recover", "seconds": 2}, DRAIN], "runs no fault"),
    ([WARM, CLEAN, {"name": "o", "kind": "overload", "seconds": 0.5, "rate": 2}, DRAIN], "seconds must be from 1"),
    ([WARM, CLEAN, {"name": "o", "kind": "overload", "seconds": 2, "rate": -1}, DRAIN], "rate must be a multiple > 0"),
])
def test_a_bad_scenario_is_a_one_line_error_before_any_server(raw, says):
    with pytest.raises(BenchError, match=says):
        measure.Params(systems=("skip_locked",), reference_jobs_s=10, scenario=raw)


def test_each_pressure_runs_in_a_cell_of_its_own_at_the_systems_quoted_capacity():
    p = measure.Params(systems=("skip_locked", "procrastinate"))
    assert measure.rate(p, "procrastinate") == pytest.approx(0.7 * p.references["procrastinate"][0])
    assert [(c.parts["system"], c.parts["pressure"]) for c in measure.cells(p)][:5] == [
        ("skip_locked", "idle_tx"), ("skip_locked", "readers"), ("skip_locked", "overload"), ("skip_locked", "bursts"),
        ("procrastinate", "idle_tx")]
    assert [ph.name for ph in p.cell_phases("overload")] == ["warmup", "clean", "overload", "after_overload", "drain"]
    only = measure.Params(systems=("skip_locked",), pressures=("bursts",))
    assert [c.parts["pressure"] for c in measure.cells(only)] == ["bursts"]
    with pytest.raises(BenchError, match="unknown pressure .clean.: choose one of idle_tx"):
        measure.Params(systems=("skip_locked",), pressures=("clean",))  # not a pressure
    with pytest.raises(BenchError, match="not one of|unknown"):
        measure.Params(systems=("rotation",), reference_jobs_s=10)  # a log the harness ticks is not pressed here


SOAK = [WARM, *({"name": f"w{i}", "kind": "load", "seconds": 60} for i in range(1, 6)), DRAIN]


def test_a_scenario_without_a_pressure_is_a_soak_of_equal_windows_in_one_cell_per_system():
    p = measure.Params(systems=("skip_locked", "pgmq"), reference_jobs_s=10, scenario=SOAK)
    assert p.pressures == (measure.SOAK,) and [c.parts["pressure"] for c in measure.cells(p)] == ["soak", "soak"]
    assert [ph.name for ph in p.cell_phases(measure.SOAK)] == ["warmup", "w1", "w2", "w3", "w4", "w5", "drain"]
    assert measure.stem(p) == "postgres__soak" != measure.stem(measure.Params(systems=("skip_locked",),
                                                                            reference_jobs_s=10))
    # a soak of one system is a run of its own, published when it finishes (the soak profile's runs)
    one = measure.Params(systems=("pgmq",), reference_jobs_s=10, scenario=SOAK)
    assert measure.stem(one) == "postgres__soak__pgmq" != measure.stem(p)
    uneven = [WARM, {"name": "a", "kind": "load", "seconds": 60}, {"name": "b", "kind": "load", "seconds": 30},
              {"name": "c", "kind": "load", "seconds": 60}, DRAIN]
    for raw in (uneven, SOAK[:3] + [DRAIN]):  # windows of two lengths; two windows (no interval)
        with pytest.raises(BenchError, match="a soak, at least 3 load phases of one length and rate"):
            measure.Params(systems=("skip_locked",), reference_jobs_s=10, scenario=raw)


def _soak_phases(system: str, p99: list[float], grow_kb: list[float], verdicts: list[str] | None = None) -> list[dict]:
    return [{"system": system, "pressure": measure.SOAK, "round": 0, "phase": f"w{i + 1}", "kind": "load",
             "started_s": 3.0 + 60 * i, "seconds": 60.0, "completed_jobs_s": 100.0, "e2e_p99_ms": v,
             "bytes_growth": int(kb * 1024), "dead_tup_peak": 10 * i, "autovacuums": 1,
             "verdict": (verdicts or ["pass"] * len(p99))[i]} for i, (v, kb) in enumerate(zip(p99, grow_kb))]


def test_a_soak_drifts_only_where_its_slopes_interval_excludes_zero():
    rows = (_soak_phases("up", [10, 12, 14, 16.5, 18], [0, 1024, 1024, 1024, 1024])  # p99 and size grow
            + _soak_phases("flat", [10, 13, 9, 12, 10], [0, 50, -50, 40, -40])  # noise about a level
            + _soak_phases("behind", [10, 50, 200, 900, 2000], [0] * 5, ["pass", "fail", "fail", "fail", "fail"]))
    phases = frame(rows, measure.PHASES)
    d = analysis.drift(phases)
    assert analysis.trend(d["up"]["p99_slope"]) == "grows" and d["up"]["p99_slope"][0] == pytest.approx(2.0, abs=0.1)
    assert analysis.trend(d["up"]["mb_slope"]) == "grows" and d["up"]["mb_end"] == pytest.approx(4.0)
    assert analysis.trend(d["flat"]["p99_slope"]) == "no drift shown" == analysis.trend(d["flat"]["mb_slope"])
    assert d["behind"]["kept"] == 1 and d["up"]["kept"] == 5 and d["up"]["dead_peak"] == 40
    assert d["up"]["kib_per_1k"] == pytest.approx(4 * 1024 / (100 * 60 * 5) * 1000)  # 4 MiB over 30,000 jobs
    table = {r["system"]: r for r in analysis.drift_table(phases).rows}
    assert table["up"]["p99 drift, ms/min [95 %]"].endswith("grows") and table["flat"]["windows kept up"] == "5/5"
    # the table claims no drift where the findings claim none: a window fell behind
    assert table["behind"]["p99 drift, ms/min [95 %]"].endswith(analysis.NOT_CLAIMED)
    # the pressure part reads no soak row, and a soak's findings claim drift only where every window kept up
    assert analysis.pressed(phases).height == 0 and analysis.bloat(phases).rows == []
    from benchlib.studies.pressure import report
    said = [f.text() for f in report._soak_findings(phases)]
    assert any(s.startswith("Over a 5-minute soak, p99 grew in 1 of the 2 systems that kept up in "
                            "every window: up") for s in said)
    assert "Fell behind during the soak (a window failed the capacity criterion), so no drift is claimed: behind " \
           "(from window 2 of 5)." in said
    short = frame(rows[:-5] + _soak_phases("behind", [10] * 5, [0] * 5,
                                          ["pass", "producer-bound", "pass", "producer-bound", "fail"]), measure.PHASES)
    assert analysis.drift(short)["behind"]["short"] == 2  # windows not judged: our producers' limit, not the system's
    assert any(s.endswith("so no drift is claimed: behind (from window 5 of 5, our producers short in 2 windows).")
               for s in (f.text() for f in report._soak_findings(short)))
    unclear = phases.with_columns(verdict=pl.when(pl.col("verdict") == "fail").then(pl.lit("inconclusive"))
                                  .otherwise("verdict"))
    assert any(s.startswith("behind: not every window of the soak was judged kept up")
               for s in (f.text() for f in report._soak_findings(unclear)))
    assert not any(s.startswith("Not soaked yet") for s in said)
    stopped = [f.text() for f in report._soak_findings(phases, ["chancy", "absurd"])]
    assert "Not soaked yet: chancy and absurd. The soak stopped before them; `make report PROFILE=soak` " \
           "measures only them." in stopped
    from benchlib.studies.pressure import charts
    spec = charts.soak(phases).to_dict()  # the figure says what the findings say, over the same systems
    assert spec["title"]["text"] == "p99 grew in 1 of the 2 systems that kept up in every window"
    assert "over 5 minutes" in spec["description"]


def test_a_soaks_first_window_holds_its_start_up_and_is_not_read_as_a_drift():
    """2026-12-07: awa's p99 fell from 1,700 ms in its first minute to about 140 ms in the rest, and
    the soak said its p99 shrinks."""
    phases = frame(_soak_phases("awa", [1700, 140, 150, 135, 145, 140], [0] * 6), measure.PHASES)
    d = analysis.drift(phases)["awa"]
    assert analysis.trend(d["p99_slope"]) == "no drift shown" and d["p99_ms"] == (1700, 140)


def test_a_soak_stopped_part_way_names_the_systems_its_profile_has_not_soaked_yet():
    """The soak profile is one run per system, each published as it finishes: the report says who is
    still to come, in the profile's order, and a profile without a soak plans none."""
    from benchlib import sweeps
    from benchlib.studies.pressure import report
    runs = sweeps.load("pressure", "soak")
    planned = [r["systems"] for r in runs]
    assert all(len(s) == 1 for s in planned) and len({measure.stem(measure.Params(**r)) for r in runs}) == len(runs)
    order = [s[0] for s in planned]
    assert report.unsoaked("soak", order[:2]) == order[2:]
    assert report.unsoaked("soak", order) == [] == report.unsoaked("standard", [])
    assert report.unsoaked("no-such-profile", []) == []


def test_a_system_soaked_by_an_earlier_method_is_neither_shown_nor_counted_and_is_named():
    """The soak's reference must hold as long as its profile's calibration steps say (60 s): a system
    whose published soak found its reference with 15 s steps, or with none, was measured otherwise.
    Its rows leave the soak's tables, findings and figure, and the page names it for re-measuring."""
    from benchlib.studies.pressure import report
    minute = '[{"rate": 500.0, "seconds": 60.0, "verdict": "pass"}]'
    quarter = '[{"rate": 500.0, "verdict": "pass"}]'  # published before steps kept their length: 15 s
    cells = pl.DataFrame({"system": ["pgmq", "pgqrs", "awa", "chancy"], "pressure": ["soak"] * 3 + ["idle_tx"],
                          "calibration": [minute, quarter, None, quarter], "cell_key": ["k1", "k2", "k3", "k4"]})
    assert report.outdated("soak", cells) == {"pgqrs": 60.0, "awa": 60.0}  # a pressure cell is not the soak's
    assert report.outdated("smoke", cells) == {}  # its soak does not calibrate, and names skip_locked only
    phases = pl.DataFrame({"system": ["pgmq", "pgqrs", "chancy"], "cell_key": ["k1", "k2", "k4"]})
    kept = report._current({"cells": cells, "phases": phases, "events": None}, ["pgqrs", "awa"])
    assert kept["cells"]["system"].to_list() == ["pgmq", "chancy"] and kept["phases"]["cell_key"].to_list() == ["k1", "k4"]
    (said,) = [f.text() for f in report._soak_findings(frame([], measure.PHASES), [], {"pgqrs": 60.0, "awa": 60.0})]
    assert said == ("Not shown: pgqrs and awa, soaked before a soak's reference had to hold for 60 s. "
                    "`make report PROFILE=soak` measures them again.")


def test_the_page_explains_pgqrs_from_the_code_of_the_version_we_pin():
    """The soak's note on pgqrs cites its source at a tag: pinning another pgqrs makes this fail
    until someone re-reads that version's dequeue and rewrites or drops the note."""
    import re
    from pathlib import Path

    import benchlib.studies.pressure as study

    root = Path(study.__file__).resolve().parents[3]
    pinned = re.search(r"^pgqrs==(\S+)$", (root / "requirements.lock").read_text(), re.M).group(1)
    cited = set(re.findall(r"vrajat/pgqrs/blob/v([^/]+)/", (Path(study.__file__).parent / "report.md.j2").read_text()))
    assert cited == {pinned}


def test_rates_quoted_on_another_machine_are_said_to_be_nominal():
    """The published run's 70 % was of capacities measured on another host; a rerun on a third host
    (2026-12-06) judged three systems back that the published run had not back."""
    from benchlib.studies.capacity.analysis import quoted_elsewhere

    def run(kernel: str, **params) -> dict:
        return {"machine": {"cpu_model": "AMD EPYC", "cores": 2, "ram_gib": 23.5, "os": "Debian", "kernel": kernel},
                "params": {"capacity_profile": "standard", "load": 0.7, **params}}
    assert not quoted_elsewhere([run("v595")], [run("v595")])
    assert quoted_elsewhere([run("v595"), run("v1272")], [run("v595")])
    assert not quoted_elsewhere([run("v1272")], [])  # no capacity run published: nothing to compare
    assert not quoted_elsewhere([run("v1272", reference_jobs_s=100)], [run("v595")])  # a rate of its own
    assert not quoted_elsewhere([run("v1272", calibrate=True)], [run("v595")])  # shares of what held on its host
    assert quoted_elsewhere([run("v1272", calibrate=True), run("v1272", calibrate=False)], [run("v595")])
    from benchlib.studies.capacity import analysis as capacity_analysis
    mixed = [run("v1272", calibrate=True, systems=["pgmq"]), run("v1272", systems=["awa"])]
    (said,) = capacity_analysis.nominal("pressure", mixed, [run("v595")])
    assert "70 % is nominal here for awa," in said.text()  # not for pgmq, whose run measured its capacity


def _ladder(quote: float, verdicts: list[str], rungs: int | None = None) -> list[dict]:
    """The calibration's steps where the host answers each step with the next of `verdicts`."""
    from benchlib.studies.pressure import calibration

    steps: list[dict] = []
    while (rate := calibration.next_rate(quote, steps, rungs or calibration.STEPS)) is not None:
        steps.append({"rate": rate, "verdict": verdicts[len(steps)]})
    return steps


def test_a_calibration_steps_down_a_rung_at_a_time_gallops_up_then_bisects_to_the_rung_that_held():
    from benchlib.studies.pressure import calibration as c

    def rates(steps: list[dict]) -> list[int]:
        return [round(s["rate"]) for s in steps]

    # held the quote and 1.1 x, not 1.33 x (3 rungs up), then 1.21 x: within a rung in 4 steps
    up = _ladder(1000, ["pass", "pass", "fail", "pass"])
    assert rates(up) == [1000, 1100, 1331, 1210] and c.held(up) == pytest.approx(1000 * 1.1 ** 2)
    assert c.words(1000, up) == "held 121 % for 15 s, not 133 % (4 steps)" and not c.topped(up)
    near = _ladder(1000, ["pass", "fail"])  # capacity at the quote: two steps
    assert rates(near) == [1000, 1100] and c.words(1000, near) == "held 100 % for 15 s, not 110 % (2 steps)"
    top = _ladder(1000, ["pass"] * 10)  # 1, 3, 7 rungs up, at most STEPS, and said so
    assert rates(top) == [1000, 1100, 1331, 1772] and c.topped(top)
    assert c.words(1000, top) == "held 177 % for 15 s, the most tried (4 steps)"
    assert rates(_ladder(1000, ["pass"] * 10, rungs=9)) == [1000, 1100, 1331, 1949, 2358]  # 7 rungs, then the end
    # a failed step at the quote runs once more (a cold first step), a failed rung below it does
    # not; down, one rung at a time: the first rung that holds ends the search, one long step
    down = _ladder(1000, ["fail"] * 6 + ["pass"])
    assert rates(down) == [1000, 1000, 909, 826, 751, 683, 621] and c.held(down) == pytest.approx(1000 / 1.1 ** 5)
    assert c.words(1000, down) == "held 62 % for 15 s, not 68 % (7 steps)"
    assert rates(_ladder(1000, ["fail", "fail", "fail", "pass"], rungs=9)) == [1000, 1000, 909, 826]
    assert rates(_ladder(1000, ["fail", "pass", "fail"])) == [1000, 1000, 1100]  # held once warm: up
    # an inconclusive step runs once more on any rung; producers short is no hold, and said
    assert rates(_ladder(1000, ["pass", "inconclusive", "pass", "fail", "fail"])) == [1000, 1100, 1100, 1331, 1210]
    short = _ladder(1000, ["pass", "producer-bound"])
    assert c.held(short) == 1000 and c.words(1000, short) == "held 100 % for 15 s, not 110 % (our producers short) (2 steps)"
    # nothing held: at most STEPS rungs below the quote, and no reference
    none = _ladder(1000, ["fail"] * 20)
    assert rates(none) == [1000, 1000, 909, 826, 751, 683, 621, 564] and c.held(none) is None
    assert rates(none)[-1] == round(1000 / 1.1 ** c.STEPS) and c.words(1000, none).startswith("nothing down to 56 %")


def test_a_calibration_holds_each_step_for_its_window_and_a_reference_is_what_held_the_longest():
    from benchlib.studies.pressure import calibration as c

    # a run published before steps had one length: 146 % held 15 s, not 45 s; 133 % held 45 s
    mixed = [{"rate": 1000 * 1.1 ** k, "seconds": s, "verdict": v}
             for k, s, v in [(4, 15.0, "pass"), (5, 15.0, "fail"), (4, 45.0, "fail"), (3, 45.0, "pass")]]
    assert c.held(mixed) == pytest.approx(1000 * 1.1 ** 3) and c.step_s(mixed) == 45
    assert c.words(1000, mixed) == "held 133 % for 45 s, not 146 % (4 steps)"
    minute = [{"rate": 1000.0, "seconds": 60.0, "verdict": "pass"}, {"rate": 1100.0, "seconds": 60.0, "verdict": "fail"}]
    assert c.words(1000, minute) == "held 100 % for 60 s, not 110 % (2 steps)"


def test_a_calibration_step_that_could_not_run_ends_the_ladder_and_says_why():
    from benchlib.studies.pressure import calibration as c

    broken = [{"rate": 1000.0, "verdict": None, "error": "AdapterError: not built"}]
    assert c.next_rate(1000, broken) is None and c.held(broken) is None
    assert c.words(1000, broken) == "its step at 100 % could not run: AdapterError: not built"
    later = [{"rate": 1000.0, "verdict": "pass"}, {"rate": 1100.0, "verdict": None, "error": "boom"}]
    assert c.next_rate(1000, later) is None and c.held(later) == 1000
    assert c.words(1000, later) == "held 100 % for 15 s; the step above could not run (2 steps): boom"


def test_runs_published_before_the_calibration_read_as_quoted_and_a_calibrated_one_shows_what_held():
    cells = pl.DataFrame({"system": ["pgmq", "skip_locked"], "pressure": ["idle_tx"] * 2, "round": [0, 0]})
    up = analysis.upgrade({"cells": cells, "phases": pl.DataFrame({"system": ["pgmq"]})})
    assert up["cells"]["calibration"].is_null().all() and up["phases"]["analyzes"].is_null().all()
    assert analysis.calibrations(up["cells"]).rows == []  # none calibrated: no table
    steps = ('[{"rate": 1000.0, "verdict": "fail"}, {"rate": 1000.0, "verdict": "fail"}, '
             '{"rate": 909.0909, "verdict": "pass"}]')
    cal = pl.DataFrame({"system": ["skip_locked", "pgmq"], "calibration": ['[{"rate": 500.0, "verdict": "pass"}]', steps],
                        "quoted_jobs_s": [500.0, 1000.0], "reference_jobs_s": [500.0, 909.0909],
                        "rate_jobs_s": [350.0, 636.4], "pressure": ["idle_tx"] * 2})
    rows = analysis.calibrations(cal).rows
    assert [r["system"] for r in rows] == ["skip_locked", "pgmq"]  # the registry's order
    assert rows[1]["calibration"] == "held 91 % for 15 s, not 100 % (3 steps)"  # published before steps kept theirs
    assert rows[0]["calibration"] == "held 100 % for 15 s, the most tried (1 step)"
    # a soak's steps last one of its windows, and say so: held means held that long
    minute = '[{"rate": 500.0, "seconds": 60.0, "verdict": "pass"}, {"rate": 550.0, "seconds": 60.0, "verdict": "fail"}]'
    (soaked,) = analysis.calibrations(cal.filter(pl.col("system") == "skip_locked").with_columns(
        calibration=pl.lit(minute))).rows
    assert soaked["calibration"] == "held 100 % for 60 s, not 110 % (2 steps)"
    # a resumed run that calibrated pgmq again for a pressure added before its cached cells: both, named
    again = pl.concat([cal, cal.filter(pl.col("system") == "pgmq").with_columns(
        pressure=pl.lit("bursts"), calibration=pl.lit('[{"rate": 1000.0, "verdict": "pass"}]'),
        reference_jobs_s=pl.lit(1000.0), rate_jobs_s=pl.lit(700.0))])
    assert [(r["system"], r["held here: jobs/s"]) for r in analysis.calibrations(again).rows] == [
        ("skip_locked", "500"), ("pgmq (idle_tx)", "909"), ("pgmq (bursts)", "1,000")]
    from benchlib.studies.pressure import report
    (said,) = report._calibration(cal)
    assert said.text() == ("On this host the systems held 91 – 100 % of their quoted capacities and ran at 70 % of "
                           "that; 1 of 2 held the ladder's top rung, so their share of capacity is at most 70 %.")


def test_a_calibration_that_is_not_true_or_false_or_too_short_is_refused_before_any_server():
    with pytest.raises(BenchError, match="calibrate must be true or false"):
        measure.Params(systems=("skip_locked",), reference_jobs_s=10, calibrate="false")
    with pytest.raises(BenchError, match="calibration_s must be >= 5"):
        measure.Params(systems=("skip_locked",), reference_jobs_s=10, calibration_s=2)
    with pytest.raises(BenchError, match="calibration_s must be a number"):
        measure.Params(systems=("skip_locked",), reference_jobs_s=10, calibration_s=[15, 45])


def test_a_recovery_tail_that_is_not_a_positive_number_is_refused_before_any_server():
    with pytest.raises(BenchError, match="recovery_tail_s"):
        measure.Params(systems=("skip_locked",), reference_jobs_s=10, recovery_tail_s=0)
    assert measure.Params(systems=("skip_locked",), reference_jobs_s=10, recovery_tail_s=None).recovery_tail_s is None


def test_a_cell_without_a_clean_phase_row_is_not_measured_there_and_breaks_no_sentence():
    j = pl.DataFrame({"system": ["a"], "round": [0], "clean_ok": [None], "clean_verdict": [None], "verdict": ["pass"],
                      "recovered_s": [1.0], "lost": [0], "unfinished": [0], "duplicates": [0], "phase": ["overload"],
                      "kind": ["overload"], "multiple": [1.5], "holder": [None]},
                     schema_overrides={"clean_ok": pl.Boolean, "clean_verdict": pl.String, "holder": pl.String})
    (r,) = analysis.summary(j).values()
    assert r["clean_missed"] == {"not measured": 1}
    assert r["unjudged"] == {"not measured": ["overload ×1.5"]} and r["judged"] == 0
    from benchlib.studies.pressure import report
    assert report._missed(r) == "not measured in 1 of 1 cells"


def test_the_default_scenario_is_the_standard_profiles():
    """2026-12-07: Params' default still held 12 s pressures and 30 s recoveries after the standard
    profile moved to 10 s and 25 s, and its comment said the profile repeated it."""
    from benchlib import sweeps
    pressing = [r for r in sweeps.load("pressure", "standard") if measure.Params(**r).pressures != (measure.SOAK,)]
    assert pressing and all([dict(p) for p in r["scenario"]] == list(measure.DEFAULT_SCENARIO) for r in pressing)
