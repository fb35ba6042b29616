"""The chaos study's rules on fakes: scenarios and faults checked before anything runs, the
accounting by seq per fault window, and the verdicts (no database)."""
from __future__ import annotations

import asyncio

import numpy as np
import polars as pl
import pytest

from benchlib.errors import BenchError
from benchlib.studies.chaos import analysis
from benchlib.studies.chaos import measure
from benchlib.studies.chaos.measure import Params
from benchlib.workload import engine, faults, scenario
from benchlib.workload.scenario import Phase

S = 1_000_000_000
BASE = [{"name": "warmup", "kind": "warmup", "seconds": 1}, {"name": "base", "kind": "load", "seconds": 2}]
DRAIN = [{"name": "drain", "kind": "drain", "seconds": 5}]


def test_a_scenario_is_checked_in_one_place():
    phases = scenario.parse([*BASE, {"name": "k", "kind": "fault", "seconds": 2, "fault": "kill_worker"},
                             {"name": "r", "kind": "recover", "seconds": 3, "rate": 0.5}, *DRAIN], 0.6)
    assert [p.rate for p in phases] == [0.6, 0.6, 0.6, 0.5, None]
    control = scenario.without_faults(phases)
    assert [p.kind for p in control] == ["warmup", "load", "load", "recover", "drain"]
    assert [p.name for p in control] == [p.name for p in phases] and control[2].fault is None


@pytest.mark.parametrize("raw, says", [
    ([{"name": "b", "kind": "load", "seconds": 2}, *DRAIN], "starts with one warmup"),
    ([*BASE], "end with one drain"),
    ([BASE[0], *DRAIN], "needs a `load` phase"),
    ([*BASE, {"name": "base", "kind": "recover", "seconds": 2}, *DRAIN], "used twice"),
    ([*BASE, {"name": "x", "kind": "squeeze", "seconds": 2}, *DRAIN], "unknown kind 'squeeze'"),
    ([*BASE, {"name": "x", "kind": "load", "seconds": 0.5}, *DRAIN], "one sample"),
    ([*BASE, {"name": "x", "kind": "load", "seconds": 2, "rate": 0}, *DRAIN], "multiple > 0"),
    ([*BASE, {"name": "x", "kind": "load", "seconds": 2, "fault": "kill_worker"}, *DRAIN], "only a fault phase"),
    ([*BASE, {"name": "x", "kind": "load", "seconds": 2, "every": 1}, *DRAIN], "unknown key 'every'"),
    ([*BASE, {"name": "k", "kind": "fault", "seconds": 2, "fault": "kill_worker"}, *DRAIN], "followed by a recover"),
    ([*BASE, {"name": "h", "kind": "hold", "seconds": 2}, *DRAIN], "takes no holder"),
    ("warmup", "must be a list"),
])
def test_a_bad_scenario_is_a_one_line_error(raw, says):
    with pytest.raises(BenchError, match=says) as err:
        measure._checked(raw, 1.0, 2)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fault, options, says", [
    ("meteor", {}, "unknown fault 'meteor'"),
    ("kill_worker", {"instance": 2}, "instance 2 does not exist: the fleet has 2"),
    ("repeated_kill", {"every_s": 10}, "at most the phase's 5 s"),
    ("backend_kill", {"instance": 0}, "has no option 'instance'"),
    ("pause_worker", {"instance": "x"}, "must be a number"),
    ("pool_exhaustion", {"within_s": 5}, "under the phase's 5 s"),
])
def test_a_bad_fault_is_a_one_line_error(fault, options, says):
    with pytest.raises(BenchError, match=says):
        faults.check(fault, options, 5.0, 2, "phase 'x'")


def test_params_check_the_scenario_s_faults_before_any_server():
    bad = [*BASE, {"name": "k", "kind": "fault", "seconds": 2, "fault": "kill_worker", "instance": 3},
           {"name": "r", "kind": "recover", "seconds": 2}, *DRAIN]
    with pytest.raises(BenchError, match="instance 3 does not exist"):
        Params(systems=["skip_locked"], reference_jobs_s=10, scenario=bad)
    with pytest.raises(BenchError, match="instances must be at most"):
        Params(systems=["skip_locked"], reference_jobs_s=10, instances=99)
    with pytest.raises(BenchError, match="unknown system 'pgq'"):
        Params(systems=["pgq"], reference_jobs_s=10)  # a log system has no worker processes


def _span(name: str, kind: str, start: float, end: float, fault: str | None = None) -> engine.Span:
    rate = None if kind == "drain" else 1.0
    return engine.Span(Phase(name, kind, end - start, rate, fault), int(start * S), int(end * S))


def _jobs(acked: list[float], handled: list[tuple[int, float]]) -> engine.Jobs:
    return engine.Jobs(np.arange(len(acked), dtype=np.int64), (np.asarray(acked) * S).astype(np.int64),
                       np.asarray([s for s, _ in handled], np.int64),
                       (np.asarray([t for _, t in handled]) * S).astype(np.int64))


def test_each_fault_window_counts_its_jobs_by_seq():
    """Job 0: done in the baseline (no window's). Job 1: acknowledged in the baseline and held by
    the killed worker: the kill's, handled late (stranded, done later). Job 2: the kill's, done in
    time. Job 3: the pause's, handled twice. Job 4: the pause's, never handled (unfinished)."""
    spans = [_span("base", "load", 0, 10), _span("kill", "fault", 10, 12, "kill_worker"),
             _span("after", "recover", 12, 20), _span("pause", "fault", 20, 22, "pause_worker"),
             _span("after2", "recover", 22, 30), _span("drain", "drain", 30, 40)]
    jobs = _jobs([1, 9, 11, 21, 25], [(0, 2), (1, 25), (2, 11.5), (3, 23), (3, 26)])
    rows = engine.account(jobs, spans, ["kill", "pause"], refused_ns=[int(21 * S)] * 3, exits=[(0, int(11 * S), 9)],
                          start_ns=0, end_ns=int(40 * S))
    kill, pause = rows
    assert (kill["jobs"], kill["stranded"], kill["done_later"], kill["unfinished"], kill["duplicates"]) == (2, 1, 1, 0, 0)
    assert (pause["jobs"], pause["stranded"], pause["unfinished"], pause["duplicates"]) == (2, 1, 1, 1)
    assert (kill["refused"], pause["refused"], kill["worker_exits"], pause["worker_exits"]) == (0, 3, 1, 0)
    assert kill["first_completion_s"] == pytest.approx(23 - 12)  # the next first handling after the fault: job 3
    assert pause["last_done_s"] is None  # one of its jobs never came
    assert kill["baseline_jobs_s"] == pytest.approx(0.1)  # one first handling in the 10 s baseline


def test_a_repeat_is_the_window_s_where_it_happened_and_the_last_window_runs_to_the_end():
    """Job 0: handled in the baseline, then again after the kill (a report before the kill, the
    job run again after it): the kill's duplicate, though the job is no window's. Job 1: acked
    during the drain, never handled: the last window's, unfinished. A handling after the cell's
    end (while the fleet stopped) is not counted (Jobs.until)."""
    spans = [_span("base", "load", 0, 10), _span("kill", "fault", 10, 12, "kill_worker"),
             _span("after", "recover", 12, 20), _span("drain", "drain", 20, 30)]
    jobs = _jobs([1, 21], [(0, 9), (0, 13), (1, 31)]).until(int(30 * S))
    (kill,) = engine.account(jobs, spans, ["kill"], [], [], 0, int(30 * S))
    assert (kill["duplicates"], kill["jobs"], kill["unfinished"]) == (1, 1, 1)
    assert kill["window_s"] == pytest.approx(10)  # its recovery is judged up to the drain


def test_unknown_handlings_are_enqueues_that_failed_after_their_commit():
    jobs = engine.Jobs(np.asarray([0, 1]), np.asarray([S, S]), np.asarray([0, 1, 7]), np.asarray([2 * S, 2 * S, 3 * S]))
    assert jobs.unknown() == 1
    first, count = jobs.first_and_count()
    assert first.tolist() == [2 * S, 2 * S] and count.tolist() == [1, 1]


def _cells(**control) -> pl.DataFrame:
    base = {"system": "x", "round": 0, "error": None, "unfinished": 0, "duplicates": 0, "refused": 0, "worker_exits": 0}
    return pl.DataFrame([base | {"variant": "faults"}, base | {"variant": "control"} | control])


def _faults(**row) -> pl.DataFrame:
    base = {"system": "x", "variant": "faults", "round": 0, "phase": "k", "fault": "kill_worker", "fault_ok": True,
            "unfinished": 0, "duplicates": 0, "recovered_s": 1.0, "worker_exits": 0}
    return pl.DataFrame([base | row])


@pytest.mark.parametrize("cells, row, verdict", [
    (_cells(), {}, analysis.OK),
    (_cells(), {"duplicates": 3}, analysis.OK),  # at-least-once: counted beside, not a failure
    (_cells(), {"unfinished": 2}, analysis.UNFINISHED),
    (_cells(), {"recovered_s": None}, analysis.SLOW),
    (_cells(), {"fault_ok": False, "unfinished": 2}, analysis.UNCHECKED),
    (_cells(duplicates=1), {"unfinished": 2}, analysis.HARNESS),  # the control failed: not the library's
    (_cells().filter(pl.col("variant") == "faults"), {"unfinished": 2}, analysis.NO_CONTROL),  # none ran
])
def test_verdicts(cells, row, verdict):
    v = analysis.verdicts(cells, _faults(**row))
    assert v["verdict"].to_list() == [verdict]
    s = analysis.summary(v)["x"]
    assert s["survived"] == (verdict == analysis.OK)
    assert s["judged"] == (0 if verdict in analysis.NOT_JUDGED else 1)


def test_a_fault_that_does_not_apply_is_neither_survived_nor_failed():
    """pool_exhaustion on a system whose workers share no pool: 'n/a' in its cell, out of the
    faults it is judged on, its window's jobs still counted."""
    rows = pl.concat([_faults(), _faults(phase="p", fault="pool_exhaustion", applies=False, fault_ok=True, unfinished=1)],
                     how="diagonal_relaxed")
    v = analysis.verdicts(_cells(), rows)
    assert v["verdict"].to_list() == [analysis.OK, analysis.NOT_APPLICABLE]
    s = analysis.summary(v)["x"]
    assert (s["survived"], s["judged"], s["faults"], s["not_applicable"], s["unfinished"]) == (1, 1, 1, 1, 1)
    assert analysis.cell_text(v.row(1, named=True)) == "n/a; 1 unfinished"
    assert analysis.verdicts(_cells(), _faults())["verdict"].to_list() == [analysis.OK]  # rows from before `applies`
    from benchlib.studies.chaos import report

    first = report.findings({"cells": _cells(), "faults": rows}, [])[0].text()
    assert "0 of 1 systems survived every one of the 2 faults that applied" in first  # its n/a window left a job


class _PoolFleet:
    """Instances answering hold_pool as an adapter does; `pool` is what the system declares."""

    instances = 2

    def __init__(self, pool: str | None, refuse: int | None = None) -> None:
        from benchlib.queues.base import Capabilities

        self.system = type("S", (), {"caps": Capabilities(batch_knob=None, pool=pool)})
        self.refuse, self.asked = refuse, []

    async def request(self, i: int, **message) -> dict:
        from benchlib.queues.jsonlines import AdapterError

        self.asked.append((i, message["op"]))
        if i == self.refuse:
            raise AdapterError("adapter hold_pool: unknown op")
        return {"ok": True, "held": 3, "pool_max": 4} if message["op"] == "hold_pool" else {"ok": True, "held": 4}


@pytest.mark.parametrize("pool, refuse, applies, ok", [
    ("a pool", None, True, True),
    ("a pool", 1, True, False),  # one instance did not hold its pool: the fault is not verified
    (None, None, False, True),  # no pool shared with application code: nothing asked, not applicable
])
async def test_pool_exhaustion_holds_every_instance_s_pool_and_gives_back_what_it_held(pool, refuse, applies, ok):
    fleet = _PoolFleet(pool, refuse)
    fault = faults.make("pool_exhaustion", {})
    ctx = _Ctx(fleet)
    await fault.enter(ctx)
    await fault.exit(ctx)
    assert (fault.applies, fault.ok) == (applies, ok), fault.checked
    held = [i for i in range(2) if i != refuse] if pool else []
    assert fleet.asked == ([(i, "hold_pool") for i in range(2)] if pool else []) + [(i, "release_pool") for i in held]


class _SlowReapFleet:
    """A fleet whose kill takes a while to reap, as a SIGKILLed process does: until then its pid
    still looks alive. `dead` is the truth: a killed instance nobody started again."""

    def __init__(self) -> None:
        self.alive, self.dead, self.kills_begun = True, False, 0
        self.killing = None

    @staticmethod
    def app(i: int) -> str:
        return f"chaos-worker-{i}"

    def pid(self, i: int) -> int | None:
        return 1 if self.alive else None

    async def kill(self, i: int) -> dict:
        self.kills_begun += 1
        self.dead = True
        self.killing.set()
        await asyncio.sleep(0.2)  # the reap
        self.alive = False
        return {"pid": 1, "seconds": 0.2}

    async def ensure(self, i: int) -> None:
        if not self.alive:
            self.alive, self.dead = True, False


class _Ctx:
    def __init__(self, fleet) -> None:
        self.fleet = fleet

    def mark(self, *args) -> None:
        pass

    async def backends_of(self, app: str) -> int:
        return 0


async def test_a_repeated_kill_ends_between_rounds_never_inside_a_kill():
    """The phase's end came while a kill was being reaped: the loop must finish that round (the
    instance started again), not be cancelled half-way with a dead instance taken for alive."""
    fleet = _SlowReapFleet()
    fleet.killing = asyncio.Event()
    fault = faults.make("repeated_kill", {"every_s": 5.0})
    ctx = _Ctx(fleet)
    await fault.enter(ctx)
    await fleet.killing.wait()  # inside the first kill, before its reap
    await fault.exit(ctx)
    assert fleet.kills_begun == 1 and fault.kills == 1
    assert not fleet.dead and fleet.alive, "the killed instance was left dead"
    assert fault.ok and fault.checked[-1] == "1 kill(s)"


def test_a_rescue_run_is_judged_against_its_own_control():
    """The rescue cells (other settings, other phases) have a control of their own: a clean control
    at defaults does not vouch for them, and theirs failing does not touch the defaults' verdicts."""
    base = {"system": "x", "round": 0, "error": None, "unfinished": 0, "duplicates": 0, "refused": 0,
            "worker_exits": 0, "asked": None}
    cells = pl.DataFrame([base | {"variant": "faults"}, base | {"variant": "control"},
                          base | {"variant": "rescue", "asked": '{"lease_s": 5}'},
                          base | {"variant": "rescue_control", "duplicates": 1}])
    row = {"system": "x", "round": 0, "phase": "k", "fault": "kill_worker", "fault_ok": True, "unfinished": 0,
           "duplicates": 0, "recovered_s": 1.0, "worker_exits": 0, "stranded": 2, "last_done_s": 31.0}
    faults = pl.DataFrame([row | {"variant": "faults", "unfinished": 2, "last_done_s": None},
                           row | {"variant": "rescue"}])
    assert analysis.verdicts(cells, faults)["verdict"].to_list() == [analysis.UNFINISHED]
    assert analysis.verdicts(cells, faults, "rescue")["verdict"].to_list() == [analysis.HARNESS]
    assert analysis.totals({"cells": cells})["duplicates"] == 1  # both controls are the sweep's accounting
    table = analysis.rescue_table(cells, faults).rows
    assert table == [{"system": "x", "fault": "kill worker", "at defaults": "2 unfinished",
                      "rescue switched on": "control failed", "rescue settings": "lease_s 5"}]


def test_only_the_systems_given_a_rescue_setting_run_the_rescue_pair():
    p = Params(systems=["skip_locked", "pgqrs"], reference_jobs_s=10, rescue={"pgqrs": {"reclaim_every_s": 5}},
               rescue_scenario=[*BASE, {"name": "k", "kind": "fault", "seconds": 2, "fault": "kill_worker"},
                                {"name": "r", "kind": "recover", "seconds": 30}, *DRAIN])
    assert [(c.parts["system"], c.parts["variant"]) for c in measure.cells(p)] == [
        ("skip_locked", "faults"), ("skip_locked", "control"),
        ("pgqrs", "faults"), ("pgqrs", "control"), ("pgqrs", "rescue"), ("pgqrs", "rescue_control")]
    assert [ph.kind for ph in p.phases_of("rescue_control")] == ["warmup", "load", "load", "recover", "drain"]
    assert [ph.fault for ph in p.phases_of("rescue")][2] == "kill_worker"


@pytest.mark.parametrize("rescue, says", [
    ({"river": {"x": 1}}, "not among the systems"),
    ({"pgqrs": {"no_such": 1}}, "pgqrs has no setting 'no_such'"),
    ({"pgqrs": {}}, "non-empty mapping"),
    ({"pgqrs": {"reclaim_every_s": "5"}}, "must be a number"),
    ({"pgqrs": {"reclaim_every_s": float("nan")}}, "must be a number"),
    ({"pgqrs": {"reclaim_after_s": 15}}, "reclaim_after_s needs reclaim_every_s"),  # the system's own rules
    ({"procrastinate": {"stalled_retry_every_s": 7}}, "stalled_retry_every_s must be whole seconds"),
    (["pgqrs"], "must be a mapping"),
])
def test_a_bad_rescue_setting_is_a_one_line_error_before_any_server(rescue, says):
    with pytest.raises(BenchError, match=says):
        Params(systems=["skip_locked", "pgqrs", "procrastinate"], reference_jobs_s=10, rescue=rescue)


def test_the_rescue_finding_compares_each_fault_with_itself_at_defaults():
    """The rescue run's faults against the same faults at defaults (a repeated kill at defaults is
    another fault, not compared); where neither left a job, the finding says the run shows no rescue."""
    from benchlib.studies.chaos import report

    base = {"round": 0, "error": None, "unfinished": 0, "duplicates": 0, "refused": 0, "worker_exits": 0, "asked": None}
    cells = pl.DataFrame([base | {"system": s, "variant": v} for s in ("a", "b")
                          for v in ("faults", "control", "rescue", "rescue_control")])
    row = {"round": 0, "fault_ok": True, "unfinished": 0, "duplicates": 0, "recovered_s": 1.0, "worker_exits": 0}
    rows = [row | {"system": "a", "variant": "faults", "phase": "kills", "fault": "repeated_kill", "unfinished": 8},
            row | {"system": "a", "variant": "faults", "phase": "pause", "fault": "pause_worker", "unfinished": 2},
            row | {"system": "a", "variant": "rescue", "phase": "kill", "fault": "kill_worker"},
            row | {"system": "a", "variant": "rescue", "phase": "pause", "fault": "pause_worker"},
            row | {"system": "b", "variant": "rescue", "phase": "kill", "fault": "kill_worker", "unfinished": 3},
            row | {"system": "b", "variant": "rescue", "phase": "pause", "fault": "pause_worker"}]
    (finding,) = report._rescue_findings({"cells": cells, "faults": pl.DataFrame(rows)})
    text = finding.text()
    assert text.startswith("Through a kill and a pause at their defaults, a (2 after the pause) "
                           "left jobs unfinished.")  # not the repeated kill's 8
    assert "a left none; still unfinished: b (3 after the kill)" in text
    quiet = pl.DataFrame([r for r in rows if r["variant"] == "rescue" and r["system"] == "a"])
    (none,) = report._rescue_findings({"cells": cells, "faults": quiet})
    assert "none of a left a job unfinished in this run" in none.text()
    assert none.text().endswith("so this run does not show the rescue at work (one run per system).")
