"""The JSON-lines worker contract (benchlib/queues/adapters/CONTRACT.md), end to end:
the reference adapter on a real server, and adapters that break the contract or
linger, which must end in a one-line error and leave no process behind."""
from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from contextlib import ExitStack

import psutil
import pytest
from processes import adapter_runnable, stopped, until_async

from benchlib import queues
from benchlib.queues import jsonlines
from benchlib.queues.jsonlines import AdapterError, JsonLinesSystem
from benchlib.studies.drain.measure import drain_worker_once

pytestmark = pytest.mark.integration


def _system(tmp_path, body: str) -> JsonLinesSystem:
    script = tmp_path / "adapter.py"
    script.write_text(textwrap.dedent(body))

    class Scripted(JsonLinesSystem):
        name = "scripted"
        summary = "a test adapter"
        command = [sys.executable, str(script)]

    return Scripted()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_reference_adapter_speaks_the_contract(pg_db):
    """Version 2: a hello with settings and tables; jobs reported by the seq in their payload;
    requests answered by id while workers work (a producer's `produce`, with `enqueued` events)."""
    system = queues.get("reference_adapter")
    async with system.session(pg_db) as adapter:
        hello = adapter.hello
        assert hello["system"] == "reference" and hello["batch"] is True and hello["contract"] == 2
        assert hello["tables"] == ["reference_adapter_jobs"] and "idle_pause_ms" in hello["settings"]
        await adapter.install()
        ids = await adapter.enqueue_many(['{"seq": 0}', '{"seq": 1}', '{"seq": 2}'])
        assert len(set(ids)) == 3
        seen, acked, stop = [], [], asyncio.Event()

        def handled(seq, t_ns):
            seen.append((seq, t_ns))
            if len(seen) == 6:
                stop.set()

        work = asyncio.create_task(adapter.work(2, 2, handled, stop, True))
        await asyncio.gather(*(adapter.produce([f'{{"seq": {i}}}'], lambda seq, t: acked.append(seq))
                               for i in range(3, 6)))
        await asyncio.wait_for(work, 30)
        assert sorted(s for s, _ in seen) == list(range(6)) and sorted(acked) == [3, 4, 5]
        assert all(isinstance(t, int) and t > 0 for _, t in seen)
        with pytest.raises(AdapterError, match="unknown op 'dance'"):
            await adapter.request(op="dance")
        await adapter.uninstall()
        pid = adapter.proc.pid
    assert _gone(pid)


async def test_an_adapter_that_does_not_say_hello_is_one_clear_error(tmp_path, pg_db):
    system = _system(tmp_path, """
        import sys
        print("Traceback: something went wrong", file=sys.stderr)
        print("not json")
    """)
    with pytest.raises(AdapterError, match="first line is not a hello.*something went wrong"):
        async with system.session(pg_db):
            pass


async def test_an_adapter_that_dies_mid_work_fails_the_sample_not_the_harness(tmp_path, pg_db):
    system = _system(tmp_path, """
        import json, sys
        print(json.dumps({"hello": {"system": "dies", "version": "0", "batch": True}}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            op, rid = request["op"], request["id"]
            if op == "enqueue":
                print(json.dumps({"id": rid, "ok": True, "ids": list(range(len(request["payloads"])))}), flush=True)
            elif op == "work":
                print(json.dumps({"id": rid, "ok": True}), flush=True)
                print(json.dumps({"handled": [[0, 1]]}), flush=True)
                print("crashing now", file=sys.stderr, flush=True)
                sys.exit(3)
            else:
                print(json.dumps({"id": rid, "ok": True}), flush=True)
    """)
    with pytest.raises(AdapterError, match="adapter stop: the adapter exited.*crashing now"):
        await asyncio.wait_for(drain_worker_once(pg_db, system, consumers=1, batch=1, prefill=5,
                                                 idle_timeout_s=0.5), 30)


async def test_a_lingering_adapter_is_killed_with_its_children(tmp_path, pg_db, monkeypatch):
    """An adapter that ignores end-of-input (and has a child of its own) is SIGKILLed, group and all."""
    monkeypatch.setattr(jsonlines, "STOP_GRACE_S", 0.5)
    system = _system(tmp_path, """
        import json, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(json.dumps({"hello": {"system": "stubborn", "version": "0", "batch": False,
                                    "child": child.pid}}), flush=True)
        time.sleep(600)
    """)
    async with system.session(pg_db) as adapter:
        pid, child = adapter.proc.pid, adapter.hello["child"]
        assert psutil.pid_exists(child)
    assert _gone(pid)
    await asyncio.sleep(0.2)
    assert _gone(child)


async def test_cancelling_a_sample_mid_work_stops_the_adapter(pg_db):
    system = queues.get("reference_adapter")
    pids = []

    async def sample():
        async with system.session(pg_db) as adapter:
            pids.append(adapter.proc.pid)
            await adapter.install()
            await adapter.enqueue_many([f'{{"seq": {i}}}' for i in range(10)])
            await adapter.work(1, 1, lambda *_: None, asyncio.Event())  # never stops by itself

    task = asyncio.create_task(sample())
    await asyncio.sleep(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pids and _gone(pids[0])
    assert os.getpgid(os.getpid()) != pids[0]  # it had a process group of its own


async def test_a_stopped_adapter_fails_its_sample_in_one_line_naming_it(pg_db, monkeypatch):
    """A SIGSTOPped adapter answers nothing: the `stop` the drain's idle watchdog sends waited for
    good (a River drain held over ten minutes). Each request has a deadline (ANSWER_DEADLINE_S,
    60 s; 3 s here): the sample fails in one line naming the adapter, and the stopped adapter is
    ended and reaped on the way out."""
    adapter_runnable("river")
    monkeypatch.setattr(jsonlines, "ANSWER_DEADLINE_S", 3.0)
    with ExitStack() as still_stopped:  # the adapter stays stopped through the session's close
        async with queues.get("river").session(pg_db) as adapter:
            await adapter.install()
            await adapter.enqueue_many([f'{{"seq": {i}}}' for i in range(20)])
            seen, stop = [], asyncio.Event()
            work = asyncio.create_task(adapter.work(1, 10, lambda seq, t_ns: seen.append(seq), stop))
            await until_async(lambda: seen or None)  # working
            pid = adapter.proc.pid
            still_stopped.enter_context(stopped(psutil.Process(pid)))
            stop.set()  # as the watchdog does: no progress (here: every job handled)
            asked = time.monotonic()
            with pytest.raises(AdapterError, match=rf"^the river adapter \(pid {pid}\) did not send its reply to "
                                                   r"`stop` within 3 s"):
                await asyncio.wait_for(work, 30)
            took = time.monotonic() - asked
        assert _gone(pid)
    assert took < 3 + 10



async def test_what_an_adapter_s_output_still_carries_after_it_exited_is_read_not_dropped(tmp_path, pg_db):
    """At the end of its input an adapter exits at once, its last report still on its way through
    its stdout (here a process it left writes it half a second later): the harness reads the
    pipe to its end before it lets the readers go (asyncio's wait() returns once the pipes have
    closed, and the stop grace bounds it)."""
    system = _system(tmp_path, """
        import json, subprocess, sys
        print(json.dumps({"hello": {"system": "last-words", "version": "0", "batch": False}}), flush=True)
        sys.stdin.read()
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); "
                          "print('{\\"handled\\": [[7, 1]]}', flush=True)"])
    """)
    seen = []
    async with system.session(pg_db) as adapter:
        adapter.handled = lambda seq, t_ns: seen.append(seq)
    assert seen == [7]
