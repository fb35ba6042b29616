"""An immediate crash of a throwaway server: every process killed at once, nothing left
behind, the same data directory recovered, and committed work still there."""
from __future__ import annotations

import psutil
import pytest

from benchlib.errors import BenchError
from benchlib.provision import PgServer, open_backend

pytestmark = pytest.mark.integration


def _server_processes(server: PgServer) -> list[psutil.Process]:
    """Every process of this cluster: the postmaster (its data dir on the command line) and its children."""
    root = str(server.cluster.data_dir)
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if root in " ".join(p.info["cmdline"] or []):
            found += [p, *p.children(recursive=True)]
    return found


async def test_crash_and_restart_keeps_committed_rows_and_leaves_no_process():
    async with open_backend("postgres") as server:
        conn = await server.connect()
        await conn.execute("CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 1000)")
        await conn.close()
        before = _server_processes(server)
        assert len(before) > 3  # postmaster, checkpointer, walwriter, ...
        server.crash_and_restart()
        assert all(not p.is_running() or p.status() != psutil.STATUS_ZOMBIE for p in before)
        assert not any(p.is_running() for p in before)  # killed and reaped, no zombie kept
        after = _server_processes(server)
        assert after and not {p.pid for p in after} & {p.pid for p in before}
        conn = await server.connect()
        assert await conn.fetchval("SELECT count(*) FROM t") == 1000
        await conn.close()
        log = server.cluster.log_path.read_text()
        assert "database system was interrupted" in log or "not properly shut down" in log


async def test_a_server_that_is_not_ours_is_never_crashed(pg_server):
    theirs = PgServer(dsn=pg_server.dsn, kind="dsn")
    with pytest.raises(BenchError, match="cannot crash a dsn server"):
        theirs.crash_and_restart()
