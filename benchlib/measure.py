"""Client-side measurement: latency recording, exact percentiles, the fsync limit.

Latencies are integers from the monotonic nanosecond clock, kept whole (an
`array('q')` costs 8 bytes an operation, so even 10^6 operations are 8 MB).
Percentiles are computed exactly over every operation of a sample with numpy, never
from a capped or pre-sorted subset (METHOD rule 4).
"""
from __future__ import annotations

import resource
import re
import subprocess
import time
from array import array
from collections.abc import Iterable

import numpy as np

from benchlib import tempdirs
from benchlib.provision.binaries import ServerBinaries

now_ns = time.perf_counter_ns
PERCENTILES = (50, 95, 99)


class Latencies:
    """Durations of one kind of operation, in nanoseconds."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = array("q")

    def add(self, duration_ns: int) -> None:
        self.ns.append(duration_ns)

    def __len__(self) -> int:
        return len(self.ns)

    @classmethod
    def merged(cls, parts: Iterable[Latencies]) -> Latencies:
        out = cls()
        for p in parts:
            out.ns.extend(p.ns)
        return out

    def summary_ms(self, prefix: str) -> dict[str, float | None]:
        """{prefix_p50_ms, _p95_ms, _p99_ms, _max_ms}; None when there were no operations."""
        return percentiles_ms(np.frombuffer(self.ns, dtype=np.int64) if self.ns else np.empty(0, np.int64), prefix)

    def mean_ms(self) -> float | None:
        """The mean, for comparison with studies that publish only an average."""
        return float(np.frombuffer(self.ns, dtype=np.int64).mean() / 1e6) if self.ns else None


def tree_cpu_s(pid: int | None) -> float | None:
    """CPU seconds of a process and every descendant, live or already reaped by its parent."""
    if pid is None:
        return None
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process (SQLite's among them)
    return r.ru_utime + r.ru_stime


class CpuMeter:
    """CPU seconds spent between `start()` and `stop()` by the harness's own process and by
    the server's process tree (None where the server is not ours to read: a user's DSN).

    Wall time says how long; CPU time says who spent it. On two cores shared by client and
    server, a harness that costs more CPU per job than pgbench takes that CPU from the server.
    """

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self._client = self._server = 0.0

    def start(self) -> CpuMeter:
        self._client, self._server = _own_cpu_s(), tree_cpu_s(self.server_pid)
        return self

    def spent(self) -> tuple[float, float | None]:
        """(client, server) CPU seconds since start(): raw, so that several spans add up."""
        server = tree_cpu_s(self.server_pid)
        return (_own_cpu_s() - self._client,
                server - self._server if server is not None and self._server is not None else None)

    def stop(self, jobs: int) -> dict[str, float | None]:
        """{client_cpu_us_per_job, server_cpu_us_per_job} since start()."""
        client, server = _own_cpu_s() - self._client, tree_cpu_s(self.server_pid)
        per = 1e6 / jobs if jobs else None
        return {"client_cpu_us_per_job": client * per if per else None,
                "server_cpu_us_per_job": (server - self._server) * per
                if per and server is not None and self._server is not None else None}


def percentiles_ms(values_ns: np.ndarray, prefix: str) -> dict[str, float | None]:
    """{prefix_p50_ms, _p95_ms, _p99_ms, _max_ms} of nanosecond values; None when there are none.

    "linear" interpolation between closest ranks: exact over every value, never a sample.
    """
    keys = [f"{prefix}_p{p}_ms" for p in PERCENTILES] + [f"{prefix}_max_ms"]
    if values_ns.size == 0:
        return dict.fromkeys(keys)
    values = values_ns / 1e6
    q = np.percentile(values, PERCENTILES, method="linear")
    return dict(zip(keys, [float(x) for x in q] + [float(values.max())]))


def fsync_rate(binaries: ServerBinaries | None, seconds: int = 1) -> float | None:
    """fdatasync'ed 8 kB writes per second on this machine's temp disk (pg_test_fsync).

    The ceiling on durable commits per second for one session; reported next to the
    throughput so a reader can see how close a design comes to the disk. None when
    pg_test_fsync is not available. Only the first section of its output is needed,
    so we stop it there. It runs as ourselves in our own private directory: it needs no
    server account, so binaries only we can reach (a venv in /root) will do.
    """
    exe = binaries.bindir / "pg_test_fsync" if binaries else None
    if exe is None or not exe.exists():
        return None
    root = tempdirs.make("fsync")
    rate = None
    try:
        with subprocess.Popen([str(exe), "-s", str(seconds), "-f", str(root / "probe")], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=root) as proc:
            try:
                for line in proc.stdout:
                    m = re.match(r"\s*fdatasync\s+([\d.]+) ops/sec", line)
                    if m:
                        rate = float(m.group(1))
                        break
            finally:
                proc.kill()
    finally:
        tempdirs.remove(root)
    return rate
