"""A tuning probe whose statement did not answer in time, on real servers: where every other client
backend of our own server ends when told to, the probe is a failed row and the run goes on; where
one cannot end (it is stopped) or the server is a user's (DSN), the NoAnswer still ends the run."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import psutil
import pytest
from processes import stopped

from benchlib.errors import NoAnswer
from benchlib.provision import open_backend
from benchlib.studies.tuning.measure import probe_failure

pytestmark = pytest.mark.integration

STALLED = NoAnswer("the server's backend pid 1 did not answer an ack within 60 s: it is stopped, or waits on a lock "
                   "a stopped backend holds, so the run ends here")


async def _others(server) -> int:
    conn = await server.connect()
    try:
        return await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                   "AND pid <> pg_backend_pid()")
    finally:
        await conn.close()


async def test_a_probe_that_waited_on_a_live_session_is_a_failed_row_and_every_backend_ends():
    """A live session holds a lock that a second one waits on (what an ack waited on): both are
    ended server-side, so the probe's failure is kept as a row; the run would go on."""
    async with open_backend("postgres") as server:
        holder, waiter = await server.connect(), await server.connect()
        try:
            await holder.execute("CREATE TABLE jobs (id int)")
            await holder.execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
            waiting = asyncio.create_task(waiter.execute("SELECT count(*) FROM jobs"))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            try:
                raise RuntimeError("the consumer failed") from STALLED  # as a consumer task reports it
            except RuntimeError as err:
                reason = await probe_failure(server, err)
            assert reason == ("NoAnswer: the server's backend pid 1 did not answer an ack within 60 s; every client "
                              "backend was then ended and the run went on")
            assert await _others(server) == 0
            await asyncio.gather(waiting, return_exceptions=True)  # ended, or answered as the lock went
        finally:
            holder.terminate()
            waiter.terminate()


async def test_a_stopped_backend_still_ends_the_run():
    """A SIGSTOPped backend cannot act on its SIGTERM: end_clients says so within its deadline,
    and the NoAnswer is raised, as everywhere else."""
    async with open_backend("postgres") as server:
        conn = await server.connect()
        try:
            backend = psutil.Process(conn.get_server_pid())
            with stopped(backend):
                assert not await server.end_clients(within_s=1.0)
                with pytest.raises(NoAnswer, match="did not answer an ack"):
                    await probe_failure(replace(server), STALLED)
            await asyncio.sleep(0.2)  # continued, it acts on the SIGTERMs it was sent
            assert await server.end_clients(within_s=5.0) and await _others(server) == 0
        finally:
            conn.terminate()


async def test_on_a_users_server_nothing_is_ended_and_the_run_ends():
    """A server we did not start (a DSN) has sessions that are not ours: none is terminated."""
    async with open_backend("postgres") as server:
        conn = await server.connect()
        try:
            users = replace(server, kind="dsn", cluster=None)
            assert not await users.end_clients()
            with pytest.raises(NoAnswer):
                await probe_failure(users, STALLED)
            assert await conn.fetchval("SELECT 1") == 1  # still there
        finally:
            await conn.close()


async def test_any_other_failure_is_its_reason():
    async with open_backend("postgres") as server:
        assert await probe_failure(server, ValueError("bad batch")) == "ValueError: bad batch"
