"""One cell engine: a scenario's phases run against a fleet of worker processes, counted by seq.

Why: a study that breaks things (chaos) or presses on them (pressure) needs the same loop: a
producer at a rate taken from the scenario, workers that can be killed, the faults entered and
exited on time, a drain, and every job accounted for by its sequence number. `run_cell` owns
that loop, so a new scenario is profile data (scenario.py) and a new fault one hook (faults.py).

- The producer is a process of the system too (its process form, named `chaos-producer`): the
  application that enqueues is not the worker that is killed. It is paced open-loop
  (pacing.produce), one schedule per run of phases at the same rate. An enqueue the system
  refuses (its server is down, its backend was terminated) is counted as refused, never as lost,
  and the producer goes on: its due jobs go out when the system takes them again, each with its
  own intended instant. A producer process that died is started again.
- The workers are fleet.Fleet's instances; faults act on them through faults.Context.
- Or, `in_process`, the consumers and the producers run in the harness's process
  (consumers.InProcess: the harness's pull loops, a log's members and ticker, or a worker
  library's own workers), as a measuring study needs them: no fault acts on a worker there.
- A study adds what only it does through `Hooks`: tasks beside the workload (a sampler,
  bystanders), a wait at each timed phase's end (the sampler's boundary), the holder a `hold`
  phase runs with where the phase names none of its own (holders.py: taken at the phase's
  start, released when a phase without it begins, checked gone, and on any way out), and a
  pause after the drain.
- A `burst` phase changes its producers' pace within itself (scenario.Phase.schedule); every
  other run of loaded phases at one rate is one schedule.
- The drain stops the producer and waits until every acknowledged job was handled, or its time.

`account` is the reading of a finished cell, pure over its arrays (tested on fakes): per judged
phase (a fault and the phases until the next fault), the jobs acknowledged in it, those still
unhandled at its end (stranded), those handled later, those never handled by the end of the
drain, the handlings past the first (duplicates), refused enqueues, and how soon completions
came back after the fault's end.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchlib.errors import BenchError
from benchlib.measure import now_ns
from benchlib.queues.base import closed
from benchlib.queues.jsonlines import AdapterError
from benchlib.workload import faults as fault_hooks
from benchlib.workload import pacing
from benchlib.workload.consumers import InProcess
from benchlib.workload.fleet import Fleet, with_app
from benchlib.workload.ledger import Ledger
from benchlib.workload.scenario import Phase

PRODUCER_APP = "chaos-producer"
REFUSED_PAUSE_S = 0.05  # after a refused enqueue: the producer does not spin on a server that is down
DRAIN_POLL_S = 0.25
RECOVERED_SHARE = 0.9  # "recovered": a second with at least this share of the baseline's completion rate


@dataclass(frozen=True)
class CellPlan:
    phases: tuple[Phase, ...]
    reference_jobs_s: float  # each phase's rate multiplies this
    instances: int
    workers: int  # per instance
    batch: int | None
    restart_after_s: float = 1.0
    judged: tuple[str, ...] = ()  # phases whose consequences are accounted (a scenario's faults, in the control too)
    in_process: bool = False  # consumers and producers in the harness's process (consumers.InProcess)
    producers: int = 1  # in process: paced producers sharing each phase's rate, staggered
    tick_s: float = 0.1  # in process, a ticked log: how often the harness ticks and rotates
    drain_poll_s: float = DRAIN_POLL_S  # how often the drain looks whether everything was handled

    def __post_init__(self) -> None:
        if any(ph.seconds is None for ph in self.phases):
            raise BenchError("every phase of a cell runs a number of seconds (a drain: at most)")
        if any(ph.loaded and ph.rate is None for ph in self.phases):
            raise BenchError("every loaded phase of a cell has a rate (a multiple of the reference rate)")
        if self.in_process and (self.instances != 1 or any(ph.kind == "fault" for ph in self.phases)):
            raise BenchError("a cell whose consumers run in the harness's process has one instance and no fault "
                             "phase: a fault acts on worker processes (in_process: false)")
        if self.producers < 1 or (self.producers > 1 and not self.in_process):
            raise BenchError("a cell of worker processes has one producer process; several paced producers run "
                             "in the harness's process (in_process: true)")


@dataclass
class Span:
    """A phase as it ran: monotonic ns, and its fault's verification."""

    phase: Phase
    start_ns: int
    end_ns: int
    checked: list[str] = field(default_factory=list)
    ok: bool = True
    applies: bool = True  # the system had what its fault acts on


@dataclass
class Ran:
    """A finished cell: its ledger, phases as they ran, and what the producer and fleet saw."""

    ledger: Ledger
    spans: list[Span]
    start_ns: int
    end_ns: int
    refused_ns: list[int] = field(default_factory=list)  # one per refused job: when its enqueue failed
    producer_errors: list[str] = field(default_factory=list)
    exits: list[tuple[int, int, int | None]] = field(default_factory=list)  # (instance, ns, exit code)
    errors: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    hello: dict[str, Any] = field(default_factory=dict)
    drained: bool = False
    unmapped: int = 0  # handlings by an id no acknowledged enqueue returned (its reply lost, its insert committed)


@dataclass
class Running:
    """What a study's hooks see of a cell while it runs."""

    ledger: Ledger
    by_id: ById
    consumers: Any  # consumers.InProcess or fleet.Fleet
    start_ns: int = 0
    phase: Phase | None = None
    started: list[tuple[Phase, int]] = field(default_factory=list)  # each phase so far and its start (ns)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set after the drain: background tasks end

    @property
    def handlings(self) -> int:
        """Handlings reported so far, mapped to a seq or not yet (a pull system's come by id)."""
        return len(self.ledger.handled_keys) + len(self.by_id.pending)


@dataclass(frozen=True)
class Hooks:
    """What a study adds to its cells (every part optional)."""

    background: Sequence[Callable[[Running], Awaitable[None]]] = ()  # from the first phase until `stopping`
    phase_started: Callable[[Phase], None] | None = None
    # awaited when a timed phase's time is up (its planned end, s from the cell's start); a cell
    # with one keeps its phases on the cell's schedule (a sampler's boundaries), not each its own
    phase_ending: Callable[[Running, float], Awaitable[None]] | None = None
    # asked at each whole second of a timed phase but a burst (the phase, the seconds it has run);
    # True ends the phase there, before its seconds are up (a recovery watched until it is back)
    phase_over: Callable[[Running, Phase, int], bool] | None = None
    holder: Any = None  # holders.HOLDERS's: held through each `hold` phase
    settle_s: float = 0.0  # after the drain, before the consumers stop
    # a drain still emptying when its seconds are up goes on while, at the rate it has emptied since
    # it began, the rest would be handled by this many seconds from its start (None: it ends then)
    drain_until_s: float | None = None
    stop_s: float = 10.0  # what a background task gets after `stopping` (its last round) before it is cancelled


class ById:
    """Handlings a worker reported by the system's id (CONTRACT.md, handled_ids), mapped to seqs
    through the ids the producer's enqueues returned: a handling can arrive before the reply
    that names its id, so the unmapped wait for the next `resolve`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.pending: list[tuple[Any, int]] = []
        self.seq_of: dict[Any, int] = {}
        self.seen_batches = 0

    def handled(self, key: Any, t_ns: int) -> None:
        self.pending.append((key, t_ns))

    def resolve(self) -> int:
        """Record what can be mapped now; how many handlings are still unmapped."""
        batches = self.ledger.batches
        for b in batches[self.seen_batches:]:
            self.seq_of.update((key, b.start + i) for i, key in enumerate(b.ids))
        self.seen_batches = len(batches)
        left = []
        for key, t_ns in self.pending:
            seq = self.seq_of.get(self.ledger._str_ids.get(key, key) if isinstance(key, str) else key)
            if seq is None:
                left.append((key, t_ns))
            else:
                self.ledger.handled_one(seq, t_ns)
        self.pending = left
        return len(left)


class Producer:
    """The system's enqueueing process: enqueue_many that counts a refusal instead of raising."""

    def __init__(self, system: Any, target: Any, ran: Ran) -> None:
        self.system, self.ran = system, ran
        self.target = dataclasses.replace(target, dsn=with_app(target.dsn, PRODUCER_APP))
        self.stack = contextlib.AsyncExitStack()
        self.session: Any = None

    async def install(self) -> None:
        await (await self.open()).install()

    async def open(self) -> Any:
        if self.session is None or self.session.gone:
            await self.stack.aclose()
            self.stack = contextlib.AsyncExitStack()
            self.session = await self.stack.enter_async_context(self.system.session(self.target))
        return self.session

    async def enqueue_many(self, payloads: Sequence[str]) -> list[Any]:
        try:
            return await (await self.open()).enqueue_many(payloads)
        except (AdapterError, OSError) as err:
            t = now_ns()
            self.ran.refused_ns += [t] * len(payloads)
            if len(self.ran.producer_errors) < 100:
                self.ran.producer_errors.append(str(err)[:300])
            await asyncio.sleep(REFUSED_PAUSE_S)
            return []

    async def close(self) -> None:
        await self.stack.aclose()


def _runs(phases: Sequence[Phase]) -> list[list[int]]:
    """Consecutive loaded phases at one rate: each such run is one producer schedule (a burst
    phase is a run of its own: it changes its pace within itself)."""
    out: list[list[int]] = []
    for i, ph in enumerate(phases):
        if not ph.loaded:
            continue
        before = phases[out[-1][-1]] if out else None
        if (before is not None and out[-1][-1] == i - 1 and before.rate == ph.rate
                and "burst" not in (before.kind, ph.kind)):
            out[-1].append(i)
        else:
            out.append([i])
    return out


async def run_cell(system: Any, target: Any, plan: CellPlan, mark: Callable[..., None],
                   hooks: Hooks = Hooks()) -> Ran:
    """Install the system afresh, run the phases, drain, stop everything; the cell as it ran."""
    ledger = Ledger(by_seq=True)

    def handled(seq: int, t_ns: int | None = None) -> None:
        ledger.handled_one(seq, t_ns or now_ns())

    by_id = ById(ledger)
    ran = Ran(ledger=ledger, spans=[], start_ns=0, end_ns=0)
    ctx: fault_hooks.Context | None = None
    if plan.in_process:
        fleet = producer = InProcess(system, target, plan.workers, plan.batch, handled, by_id.handled,
                                     tick_s=plan.tick_s)
    else:
        producer = Producer(system, target, ran)
        fleet = Fleet(system, target, plan.instances, plan.workers, plan.batch, handled, mark, plan.restart_after_s,
                      handled_id=by_id.handled)
        ctx = fault_hooks.Context(fleet, target, mark)
    starts = {run[0]: run for run in _runs(plan.phases)}
    sending: tuple[asyncio.Event, list[asyncio.Task]] | None = None
    out = pacing.Producers()
    running = Running(ledger, by_id, fleet)
    background: list[asyncio.Task] = []
    holders = _holders(plan.phases, hooks.holder)
    holder, admin = None, None  # the holder in place, and the session that ends it
    planned_end_s = 0.0

    async def stop_sending() -> None:
        nonlocal sending
        if sending is not None:
            sending[0].set()
            await asyncio.gather(*sending[1])
            sending = None

    async def start_sending(multiple: float, start_ns: int, until_ns: int | None = None) -> None:
        """One schedule at `multiple` x the reference rate from `start_ns` (until `until_ns`, where
        another follows it), shared by the producers."""
        nonlocal sending
        await stop_sending()
        stop, n = asyncio.Event(), len(enqueuers)
        rate = multiple * plan.reference_jobs_s / n
        sending = (stop, [asyncio.create_task(pacing.produce(enqueue, ledger, rate, start_ns, stop, out, j / n,
                                                             until_ns=until_ns))
                          for j, enqueue in enumerate(enqueuers)])

    def watched() -> list[asyncio.Task]:
        """What runs until the cell stops it: a producer, a study's task, a consumer in process, a
        holder's readers."""
        return [*(sending[1] if sending else ()), *background, *(fleet.tasks if plan.in_process else ()),
                *(getattr(holder, "tasks", ()) if holder is not None else ())]

    try:
        await producer.install()
        await fleet.start_all()
        if ctx is not None:
            await ctx.monitor()  # opened before any fault: connection_exhaustion leaves no slot for it
        if holders:
            admin = await target.connect()
        enqueuers = await fleet.enqueuers(plan.producers) if plan.in_process else [producer.enqueue_many]
        ran.start_ns = running.start_ns = now_ns()
        background = [asyncio.create_task(task(running)) for task in hooks.background]
        for i, ph in enumerate(plan.phases):
            start = now_ns()
            # the producers stop first where this phase has no schedule or one of its own: what they have
            # in flight is the phase before's, and the next schedule's jobs are due from `start`
            if not ph.loaded or i in starts:
                await stop_sending()
            wanted = holders[i] if ph.kind == "hold" else None
            if holder is not None and holder is not wanted:  # then the horizon is released (server-side, checked gone)
                released, holder = holder, None
                await released.stop(admin)
                mark("holder", released.name, "released")
            running.phase = ph
            running.started.append((ph, start))
            if hooks.phase_started is not None:
                hooks.phase_started(ph)
            mark("phase", ph.name, f"{ph.kind}" + (f", {ph.rate:g} x {plan.reference_jobs_s:.4g} jobs/s" if ph.rate else ""))
            if wanted is not None and holder is None:
                holder = wanted  # set first: a start that fails half-way is still stopped
                await holder.start(target, admin)
                mark("holder", holder.name, "taken")
            if i in starts and ph.kind != "burst":
                await start_sending(ph.rate, start)
            span = Span(ph, start, start)
            hook = fault_hooks.make(ph.fault, ph.options) if ph.kind == "fault" else None
            try:
                if hook is not None:
                    mark("fault", ph.fault, "enter")
                    await hook.enter(ctx)
                if ph.kind == "drain":  # its limit counts from when its producers had stopped
                    began = now_ns()
                    ran.drained = await _drained(ledger, by_id, began + int(ph.seconds * 1e9), plan.drain_poll_s,
                                                 watched, None if hooks.drain_until_s is None
                                                 else began + int(hooks.drain_until_s * 1e9))
                    await _watching(asyncio.sleep(hooks.settle_s), watched())
                else:
                    planned_start_s, planned_end_s = planned_end_s, planned_end_s + ph.seconds
                    end_ns = (ran.start_ns + int(planned_end_s * 1e9) if hooks.phase_ending is not None
                              else start + int(ph.seconds * 1e9))
                    begin_ns = ran.start_ns + int(planned_start_s * 1e9) if hooks.phase_ending is not None else start
                    paces = ph.schedule() if ph.kind == "burst" else []
                    for j, (offset_s, multiple) in enumerate(paces):
                        at = start + int(offset_s * 1e9)
                        # each pace is bounded by the next's instant: a switch that comes late (a busy
                        # machine) neither overlaps the two paces nor drops the jobs due before it
                        until = start + int(paces[j + 1][0] * 1e9) if j + 1 < len(paces) else end_ns
                        await _watching(asyncio.sleep(max(0.0, (at - now_ns()) / 1e9)), watched())
                        await start_sending(multiple, at, until)
                        mark("burst", ph.name, f"{multiple:g} x {plan.reference_jobs_s:.4g} jobs/s")
                    second = 1
                    while (hooks.phase_over is not None and not paces
                           and (tick := begin_ns + second * 1_000_000_000) < end_ns):
                        await _watching(asyncio.sleep(max(0.0, (tick - now_ns()) / 1e9)), watched())
                        if hooks.phase_over(running, ph, second):
                            end_ns, planned_end_s = tick, planned_start_s + second
                            mark("phase", ph.name, f"over after {second} s")
                            break
                        second += 1
                    await _watching(asyncio.sleep(max(0.0, (end_ns - now_ns()) / 1e9)), watched())
                    if hooks.phase_ending is not None:
                        await _watching(hooks.phase_ending(running, planned_end_s), watched())
                    by_id.resolve()  # a phase's handlings mapped at its end, not all at once in the drain
            finally:
                if hook is not None:
                    await hook.exit(ctx)
                    mark("fault", ph.fault, "exit")
                    span.checked, span.ok, span.applies = hook.checked, hook.ok, hook.applies
            span.end_ns = now_ns()
            ran.spans.append(span)
        ran.end_ns = now_ns()
    finally:
        if sending is not None:
            sending[0].set()
            await asyncio.gather(*sending[1], return_exceptions=True)
        running.stopping.set()
        if plan.in_process:
            fleet.stop.set()  # the consumers stop with the study's tasks, as one cell
        async with contextlib.AsyncExitStack() as cleanup:  # each runs, last pushed first, whatever one before did
            if ctx is not None:
                cleanup.push_async_callback(ctx.close)
            if producer is not fleet:
                cleanup.push_async_callback(producer.close)
            cleanup.push_async_callback(fleet.close)
            cleanup.push_async_callback(_stopped, background, hooks.stop_s)
            if admin is not None:
                cleanup.push_async_callback(closed, admin)
                if holder is not None:
                    cleanup.push_async_callback(holder.stop, admin)  # a held horizon never outlives its cell
    ran.unmapped = by_id.resolve()
    ran.exits = list(fleet.exits)
    ran.errors, ran.settings, ran.hello = fleet.errors, fleet.settings, fleet.hello
    return ran


def _holders(phases: Sequence[Phase], cells: Any) -> dict[int, Any]:
    """Per hold phase (by index), its holder: a new one of the phase's own kind (`holder:`), else
    the cell's (Hooks.holder); consecutive hold phases of one kind share one, held through both."""
    out: dict[int, Any] = {}
    for i, ph in enumerate(phases):
        if ph.kind != "hold":
            continue
        if ph.holder is None and cells is None:
            raise BenchError(f"hold phase {ph.name!r} names no holder and its cell has none: "
                             "give it one (`holder: idle_xid`)")
        before = out.get(i - 1)
        if ph.holder is None:
            out[i] = cells
        elif before is not None and before.name == ph.holder:
            out[i] = before
        else:
            from benchlib.holders import HOLDERS

            out[i] = HOLDERS[ph.holder]()
    return out


def _check(tasks: Sequence[asyncio.Task]) -> None:
    """Raise for a task that ended before the cell stopped it: its own failure, or that it ended."""
    for task in tasks:
        if task.done():
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # a producer's own failure (not a refusal), a consumer's, a study's task
            raise RuntimeError(f"{task.get_coro().__qualname__} ended before the cell stopped it")


async def _watching(awaitable: Awaitable[Any], tasks: Sequence[asyncio.Task]) -> Any:
    """Await `awaitable`, unless one of `tasks` ends first (a hook waiting on a sampler that died
    would wait for ever, a phase would run on without its producer): `_check` raises then."""
    waiting = asyncio.ensure_future(awaitable)
    try:
        _check(tasks)
        while not waiting.done():
            await asyncio.wait({waiting, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            _check(tasks)
        return waiting.result()
    finally:
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


async def _stopped(tasks: list[asyncio.Task], stop_s: float) -> None:
    """A study's background tasks, ended: each gets `stop_s` after `stopping` is set (its last
    round), then is cancelled; the first one's own failure is raised."""
    if tasks:
        await asyncio.wait(tasks, timeout=stop_s)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()


async def _drained(ledger: Ledger, by_id: ById, deadline_ns: int, poll_s: float,
                   watched: Callable[[], Sequence[asyncio.Task]], until_ns: int | None = None) -> bool:
    """Wait until every acknowledged job was handled at least once, or the deadline; past it, while
    the jobs still missing would be handled by `until_ns` at the rate they have been since the first
    poll (a backlog that is emptying is drained, not cut off; one that is not ends at the
    deadline). A watched task that ended (a consumer's failure) is raised. Each poll looks only at
    the jobs still missing and the acknowledgements since the last (a cell at tens of thousands of
    jobs/s has millions)."""
    missing: set[int] = set()
    counted = 0
    first: tuple[int, int] | None = None  # (when, how many missing) at the first poll
    while True:
        by_id.resolve()
        batches = ledger.batches
        for b in batches[counted:]:
            missing.update(range(b.start, b.start + len(b.ids)))
        counted = len(batches)
        seen = ledger.seen
        missing = {s for s in missing if s not in seen}
        if not missing:
            return True
        _check(watched())
        t = now_ns()
        first = first or (t, len(missing))
        if t >= deadline_ns:
            done = first[1] - len(missing)
            if until_ns is None or done <= 0 or t + len(missing) * (t - first[0]) / done > until_ns:
                return False
        await asyncio.sleep(poll_s)


# --- the reading: by seq, per judged phase ---------------------------------------------------

@dataclass(frozen=True)
class Jobs:
    """A cell's jobs as arrays: acknowledged seqs and when; every handling (seq, when)."""

    acked_seq: np.ndarray
    acked_ns: np.ndarray
    handled_seq: np.ndarray
    handled_ns: np.ndarray

    @classmethod
    def of(cls, ledger: Ledger) -> Jobs:
        seqs, acked = [], []
        for b in ledger.batches:
            seqs.extend(range(b.start, b.start + len(b.ids)))
            acked.extend([b.acked_ns] * len(b.ids))
        keys = np.frombuffer(ledger.handled_keys, np.int64) if ledger.handled_keys else np.empty(0, np.int64)
        times = np.frombuffer(ledger.handled_at, np.int64) if ledger.handled_at else np.empty(0, np.int64)
        return cls(np.asarray(seqs, np.int64), np.asarray(acked, np.int64), keys.copy(), times.copy())

    def first_and_count(self) -> tuple[np.ndarray, np.ndarray]:
        """Per acknowledged job: its first handling (ns, -1 when never) and how often it was handled."""
        n = len(self.acked_seq)
        order = np.argsort(self.acked_seq)
        pos = np.searchsorted(self.acked_seq[order], self.handled_seq)
        pos = np.minimum(pos, max(n - 1, 0))
        hit = (self.acked_seq[order][pos] == self.handled_seq) if n else np.zeros(len(self.handled_seq), bool)
        idx = order[pos[hit]]
        count = np.bincount(idx, minlength=n)
        first = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first, idx, self.handled_ns[hit])
        first[first == np.iinfo(np.int64).max] = -1
        return first, count

    def until(self, end_ns: int) -> Jobs:
        """The same jobs with the handlings up to `end_ns` only (the drain's end: what came while
        the fleet stopped is not counted as done in time)."""
        keep = self.handled_ns <= end_ns
        return Jobs(self.acked_seq, self.acked_ns, self.handled_seq[keep], self.handled_ns[keep])

    def repeat_ns(self) -> np.ndarray:
        """When each handling past a job's first happened (an acknowledged job's)."""
        known = np.isin(self.handled_seq, self.acked_seq)
        seq, t = self.handled_seq[known], self.handled_ns[known]
        order = np.lexsort((t, seq))
        seq, t = seq[order], t[order]
        again = np.concatenate(([False], seq[1:] == seq[:-1])) if len(seq) else np.zeros(0, bool)
        return t[again]

    def unknown(self) -> int:
        """Handlings of seqs no acknowledgement covers (an enqueue that failed after its commit)."""
        return int(np.count_nonzero(~np.isin(self.handled_seq, self.acked_seq)))


def per_second(jobs: Jobs, start_ns: int, end_ns: int) -> dict[str, np.ndarray]:
    """Per second of the cell: jobs acknowledged, first handlings (completions), all handlings."""
    edges = np.arange(start_ns, end_ns + 1_000_000_000, 1_000_000_000, dtype=np.int64)
    first, _ = jobs.first_and_count()
    return {"t_s": (edges[:-1] - start_ns) / 1e9,
            "acked": np.histogram(jobs.acked_ns, edges)[0],
            "completed": np.histogram(first[first >= 0], edges)[0],
            "handlings": np.histogram(jobs.handled_ns, edges)[0]}


def account(jobs: Jobs, spans: Sequence[Span], judged: Sequence[str], refused_ns: Sequence[int],
            exits: Sequence[tuple[int, int, int | None]], start_ns: int, end_ns: int) -> list[dict[str, Any]]:
    """One row per judged phase, counted by seq.

    Its *window* runs to the next judged phase's start; the last one's to the cell's end, the
    drain included, so every acknowledgement, refusal and repeat of the cell after the first
    fault is some window's. Its *recovery* is judged up to the next judged phase's start (the
    last's: the drain's). A window's jobs are those acknowledged before it ends and not handled
    before it began (so a job a killed worker held since the baseline is the kill's), unless an
    earlier window counted them. Its duplicates are the repeat handlings that happened in it,
    whoever's job they were (a job reported before a kill and run again after it is the kill's).
    `jobs` should hold the handlings up to `end_ns` only (Jobs.until)."""
    first, _ = jobs.first_and_count()
    repeats = jobs.repeat_ns()
    by_name = {s.phase.name: s for s in spans}
    marks = [by_name[n] for n in judged if n in by_name]
    loads = [s for s in spans if s.phase.kind == "load" and s.phase.name not in judged]
    base_s = sum((s.end_ns - s.start_ns) for s in loads) / 1e9
    base_done = sum(int(np.count_nonzero((first >= s.start_ns) & (first < s.end_ns))) for s in loads)
    baseline = base_done / base_s if base_s > 0 else None
    drain = next((s for s in spans if s.phase.kind == "drain"), None)
    refused = np.asarray(refused_ns, np.int64)
    assigned = np.full(len(first), -1)
    rows = []
    for k, span in enumerate(marks):
        last = k + 1 == len(marks)
        until = end_ns if last else marks[k + 1].start_ns
        judged_until = (drain.start_ns if drain else end_ns) if last else until
        # its jobs: acknowledged before its window ends and not handled before it began, unless an
        # earlier window counted them already (a job stranded by one fault stays that fault's)
        mine = (assigned < 0) & (jobs.acked_ns < until) & ((first < 0) | (first >= span.start_ns))
        assigned[mine] = k
        stranded = mine & ((first < 0) | (first >= judged_until))
        after = np.sort(first[(first >= span.end_ns)])
        handled = np.sort(jobs.handled_ns[(jobs.handled_ns >= span.start_ns) & (jobs.handled_ns < judged_until)])
        edges = np.concatenate(([span.start_ns], handled, [judged_until]))
        rows.append({
            "phase": span.phase.name, "fault": span.phase.fault,
            "started_s": (span.start_ns - start_ns) / 1e9, "baseline_jobs_s": baseline,
            "fault_s": (span.end_ns - span.start_ns) / 1e9, "window_s": (judged_until - span.start_ns) / 1e9,
            "jobs": int(mine.sum()),
            "refused": int(np.count_nonzero((refused >= span.start_ns) & (refused < until))),
            "stranded": int(stranded.sum()),
            "done_later": int((stranded & (first >= 0)).sum()),
            "unfinished": int(np.count_nonzero(mine & (first < 0))),
            "duplicates": int(np.count_nonzero((repeats >= span.start_ns) & (repeats < until))),
            "first_completion_s": (after[0] - span.end_ns) / 1e9 if len(after) else None,
            "recovered_s": _recovered_after(first, span.end_ns, judged_until, baseline),
            "longest_gap_s": float(np.diff(edges).max()) / 1e9,
            "worker_exits": sum(1 for _, t, _ in exits if span.start_ns <= t < until),
            "verified": "; ".join(span.checked) or None,
            "fault_ok": span.ok,
            "applies": span.applies,
            "last_done_s": (float(first[mine].max()) - span.end_ns) / 1e9 if mine.any() and (first[mine] >= 0).all() else None,
        })
    return rows


def _recovered_after(first: np.ndarray, from_ns: int, until_ns: int, baseline: float | None) -> float | None:
    """Seconds from `from_ns` to the end of the first whole second (sliding, 100 ms steps) with at
    least RECOVERED_SHARE of the baseline's completions; None when none before `until_ns`."""
    if not baseline:
        return None
    done = np.sort(first[(first >= from_ns) & (first < until_ns)])
    need = RECOVERED_SHARE * baseline
    step, width = 100_000_000, 1_000_000_000
    for t in range(from_ns, until_ns - width + 1, step):
        n = np.searchsorted(done, t + width) - np.searchsorted(done, t)
        if n >= need:
            return (t + width - from_ns) / 1e9
    return None


__all__ = ["CellPlan", "Hooks", "Jobs", "Ran", "Running", "Span", "account", "per_second", "run_cell"]
