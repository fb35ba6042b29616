"""The pgbench script is the design's own SQL: nothing rewritten but the parameters."""
from __future__ import annotations

import re

import pytest

from benchlib import pgbench, queues
from benchlib.errors import BenchError

PUBLIC = ["skip_locked", "skip_locked_delete", "claim_then_delete", "pgmq"]


def _flat(statement: str) -> str:
    return " ".join(re.sub(r"^\s*--.*$", "", statement, flags=re.MULTILINE).split()).rstrip(";")


@pytest.mark.parametrize("name", PUBLIC)
def test_the_script_sends_the_designs_dequeue_and_ack_verbatim(name):
    sql = queues.QUEUES[name].SQL
    lines = pgbench.script(sql).splitlines()
    assert _flat(sql["dequeue"]).replace("$1", ":batch") in lines[0]
    assert lines[0].startswith("WITH d AS (") and lines[0].endswith("AS ids FROM d AS t(i) \\gset")
    if "ack" in sql:
        assert lines[1] == _flat(sql["ack"]).replace("$1", ":ids") + ";"
    else:  # the dequeue finished the job (claim-and-delete): nothing else to send
        assert len(lines) == 1
    assert "$" not in "".join(lines) and "--" not in "".join(lines)


def test_which_systems_get_a_limit():
    assert all(pgbench.applies(queues.QUEUES[n], "postgres") for n in PUBLIC)
    for name in ("pgqrs", "procrastinate", "pgqueuer"):  # their SQL is the library's own
        assert not pgbench.applies(queues.QUEUES[name], "postgres")
    assert not pgbench.applies(queues.QUEUES["sqlite"], "sqlite")
    assert "no dequeue" in pgbench.support(queues.QUEUES["rotation"])


@pytest.mark.parametrize("report", [
    # PostgreSQL 15's pgbench
    "transaction type: -\nscaling factor: 1\nquery mode: prepared\nnumber of clients: 2\n"
    "number of threads: 1\nnumber of transactions per client: 500\n"
    "number of transactions actually processed: 1000/1000\nlatency average = 1.2 ms\n"
    "initial connection time = 3.1 ms\ntps = 1650.250000 (without initial connection time)\n",
    # PostgreSQL 18's adds failures and retries
    "number of transactions actually processed: 1000/1000\nnumber of failed transactions: 0 (0.000%)\n"
    "latency average = 1.2 ms\ninitial connection time = 3.1 ms\n"
    "tps = 1650.250000 (without initial connection time)\n",
])
def test_pgbench_report_is_read(report):
    assert pgbench.parse(report) == (1000, 1650.25)


def test_a_report_without_a_rate_is_an_error_not_a_number():
    with pytest.raises(BenchError, match="no transaction count or tps"):
        pgbench.parse("pgbench: error: connection to server failed\n")
