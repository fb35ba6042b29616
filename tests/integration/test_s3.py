"""The s3 backend: moto's S3 behind our latency proxy, ours alone, gone afterwards."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import botocore.config
import botocore.exceptions
import psutil
import pytest

from benchlib.errors import BenchError
from benchlib.provision import open_backend
from benchlib.provision.s3 import LOG_NAME, _wait_ready
from benchlib.provision.s3_server import HEADER_TIMEOUT_S, LOG_BYTES

pytestmark = pytest.mark.integration


def _client(env: dict[str, str], key_id: str | None = None, secret: str | None = None, **config):
    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                        aws_access_key_id=key_id or env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=secret or env["AWS_SECRET_ACCESS_KEY"],
                        config=botocore.config.Config(**config))


def _status(error: botocore.exceptions.ClientError) -> tuple[int, str]:
    return error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"]


def _emulators(parent: int | None = None) -> list[psutil.Process]:
    """The S3 emulators started from this test process (or from `parent`): its descendants, not
    every emulator on the machine, which would count another xdist worker's. An emulator that
    outlives the harness that started it is re-parented, so tests of that case keep the
    emulator's own Process and ask it (_still_running)."""
    out = []
    for p in psutil.Process(parent or os.getpid()).children(recursive=True):
        try:
            if "benchlib.provision.s3_server" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:  # gone (or a zombie) since it was listed
            pass
    return out


def _still_running(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:  # reaped between the two questions
            pass
    return out


async def test_conditional_writes_latency_and_strangers():
    """What pgqrs's S3 store relies on: create-if-absent and replace-if-unchanged; every
    response pays the injected latency; a client without our key is turned away; and
    nothing (process, directory) is left afterwards."""
    async with open_backend("s3", settings={"latency_ms": "80"}) as target:
        root, env = target.root, target.env()
        s3 = _client(env)

        def exercise():
            s3.put_object(Bucket=target.bucket, Key="q.sqlite", Body=b"v1", IfNoneMatch="*")
            with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
                s3.put_object(Bucket=target.bucket, Key="q.sqlite", Body=b"v2", IfNoneMatch="*")
            etag = s3.head_object(Bucket=target.bucket, Key="q.sqlite")["ETag"]
            with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
                s3.put_object(Bucket=target.bucket, Key="q.sqlite", Body=b"v2", IfMatch='"not-the-etag"')
            s3.put_object(Bucket=target.bucket, Key="q.sqlite", Body=b"v2", IfMatch=etag)
            t0 = time.monotonic()
            body = s3.get_object(Bucket=target.bucket, Key="q.sqlite")["Body"].read()
            return body, time.monotonic() - t0

        body, took = await asyncio.to_thread(exercise)
        assert body == b"v2" and took >= 0.080
        stranger = _client(env, key_id="AKIASTRANGER", secret="x")
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            await asyncio.to_thread(stranger.list_objects_v2, Bucket=target.bucket)
        assert _status(refused.value) == (403, "InvalidAccessKeyId")
        assert len(_emulators()) == 1
        described = await target.describe()
        assert described["settings_requested"] == {"latency_ms": "80"} and "moto" in described["version"]
    assert not root.exists() and _emulators() == []


@pytest.mark.parametrize("settings, message", [
    ({"latency": "60"}, "no setting 'latency'"),
    ({"latency_ms": "-1"}, "milliseconds from 0"),
    ({"latency_ms": "soon"}, "milliseconds from 0"),
])
async def test_bad_settings_are_refused_before_anything_starts(settings, message):
    with pytest.raises(BenchError, match=message):
        async with open_backend("s3", settings=settings):
            pass
    assert _emulators() == []


def test_a_killed_harness_takes_its_emulator_with_it(tmp_path, started_as):
    """SIGKILL leaves no `finally` to run: the emulator's parent-death signal stops it anyway,
    also when the harness inherited an ignored SIGQUIT (CI once found an emulator alive)."""
    script = ("import asyncio\nfrom benchlib.provision import open_backend\n"
              "async def main():\n"
              "    async with open_backend('s3') as t:\n"
              "        print('ready', flush=True)\n"
              "        await asyncio.sleep(60)\n"
              "asyncio.run(main())\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=started_as)
    assert proc.stdout.readline().strip() == "ready"
    started = _emulators(proc.pid)
    assert len(started) == 1 and started[0].ppid() == proc.pid
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while _still_running(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _still_running(started) == []


async def test_our_key_id_without_our_secret_is_refused():
    """The proxy checks the signature, not only the key id in it: a PUT signed with our key id
    and a wrong secret is refused, and nothing is written."""
    async with open_backend("s3", settings={"latency_ms": "0"}) as target:
        env = target.env()
        forger = _client(env, secret="not-" + env["AWS_SECRET_ACCESS_KEY"], retries={"max_attempts": 1})
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            await asyncio.to_thread(forger.put_object, Bucket=target.bucket, Key="forged", Body=b"x")
        assert _status(refused.value) == (403, "SignatureDoesNotMatch")
        with pytest.raises(botocore.exceptions.ClientError) as missing:
            await asyncio.to_thread(_client(env).head_object, Bucket=target.bucket, Key="forged")
        assert _status(missing.value)[0] == 404


async def test_a_connection_that_never_sends_its_header_is_closed():
    async with open_backend("s3", settings={"latency_ms": "0"}) as target:
        port = int(target.endpoint.rsplit(":", 1)[1])

        def half_a_request() -> tuple[bytes, float]:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"GET /benchlib HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
                sock.settimeout(HEADER_TIMEOUT_S + 10)
                t0 = time.monotonic()
                return sock.recv(1024), time.monotonic() - t0

        data, took = await asyncio.to_thread(half_a_request)
        assert data == b"" and HEADER_TIMEOUT_S - 1 < took < HEADER_TIMEOUT_S + 3


HARNESS = """
import asyncio, json, resource, sys
from benchlib.provision import open_backend
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096))  # a common default; the emulator inherits it
async def main():
    async with open_backend('s3', settings={'latency_ms': '0'}) as t:
        print(json.dumps({'env': t.env(), 'root': str(t.root), 'bucket': t.bucket}), flush=True)
        await asyncio.to_thread(sys.stdin.read)
asyncio.run(main())
"""


class Flood:
    """Idle half-requests to `port`, as a hostile local account sends them to starve a server
    that holds every connection it accepts: 50 connects in flight at a time (so the listen
    queue does not overflow), `hold` connections kept (the oldest dropped), on a thread of
    its own. `stalled` once a connect does not complete in 3 s: the server stopped accepting."""

    HALF_A_REQUEST = b"PUT /benchlib/x HTTP/1.1\r\nHost: 127.0.0.1\r\n"

    def __init__(self, port: int, hold: int) -> None:
        self.port, self.hold = port, hold
        self.opened = 0
        self.stalled = False
        self._writers: list[asyncio.StreamWriter] = []
        self._first = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def _open(self, n: int) -> None:
        in_flight = asyncio.Semaphore(50)

        async def one() -> None:
            async with in_flight:
                if self.stalled:
                    return
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 3)
                except TimeoutError:
                    self.stalled = True
                    return
                except OSError:
                    return
                writer.write(self.HALF_A_REQUEST)
                self._writers.append(writer)
                self.opened += 1
                if len(self._writers) > self.hold:
                    self._writers.pop(0).close()

        await asyncio.gather(*(one() for _ in range(n)))

    async def _run(self, first: int, batch: int, every_s: float) -> None:
        try:
            await self._open(first)
            self._first.set()
            while not self._stop.is_set():
                await asyncio.gather(self._open(0 if self.stalled else batch), asyncio.sleep(every_s))
        finally:
            self._first.set()
            for writer in self._writers:
                writer.close()  # close(), not transport.abort(): a writer whose peer had gone warned when collected
            await asyncio.sleep(0)

    def start(self, first: int, batch: int, every_s: float) -> None:
        """`first` connections (returns once they are open or the server stalled), then `batch`
        more every `every_s` until stop()."""
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(first, batch, every_s),), daemon=True)
        self._thread.start()
        self._first.wait()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


# The flood's own sockets, which the emulator may drop first: one whose open_connection finished
# as its wait_for timed out is never handed to us, and warns when collected (100 did, once, under CI).
@pytest.mark.filterwarnings("ignore:Exception ignored in.*StreamWriter:pytest.PytestUnraisableExceptionWarning")
def test_a_flood_of_idle_connections_does_not_starve_our_client():
    """A harness started with the common 1024 soft fd limit: an account flooding the proxy with
    thousands of idle half-requests (more than its fd limit, and than the pending cap), still
    flooding while our client works, neither keeps a genuine client out nor fills the disk
    with a log; the emulator raised its soft fd limit to the hard one."""
    emulator = None
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    flood = None
    try:
        started = json.loads(harness.stdout.readline())
        env, root = started["env"], Path(started["root"])
        (emulator,) = _emulators(harness.pid)
        assert emulator.rlimit(psutil.RLIMIT_NOFILE) == (4096, 4096)
        flood = Flood(int(env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]), hold=4000)
        flood.start(first=3000, batch=100, every_s=0.05)
        t0 = time.monotonic()
        for n in range(5):  # a new client each time: a new connection through the gate
            s3 = _client(env, connect_timeout=5, read_timeout=5, retries={"max_attempts": 1})
            s3.put_object(Bucket=started["bucket"], Key=f"k{n}", Body=b"v")
            assert s3.get_object(Bucket=started["bucket"], Key=f"k{n}")["Body"].read() == b"v"
            s3.close()
        took = time.monotonic() - t0
        assert flood.opened > 3000 and not flood.stalled and took < 10
        assert emulator.num_fds() < 4096
        logged = sum(f.stat().st_size for f in root.glob(LOG_NAME + "*"))
        assert logged <= 2 * LOG_BYTES + 65536
    finally:
        if flood is not None:
            flood.stop()
        harness.stdin.close()
        harness.wait(60)
        harness.stdout.close()
    assert emulator is None or _still_running([emulator]) == []


def test_a_start_up_error_reaches_the_parent(tmp_path):
    """Before it is ready the emulator's stderr is its log, so s3.py can show the last line:
    here, a secret that never came (it is read from stdin, never from argv)."""
    with open(tmp_path / LOG_NAME, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "benchlib.provision.s3_server", str(tmp_path),
                                 "--bucket", "benchlib", "--log", str(tmp_path / LOG_NAME)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    try:
        proc.stdin.write(b"BENCHKEYIDONLY\n")
        proc.stdin.close()
        with pytest.raises(BenchError, match="did not start: s3_server: give the access key id and the secret"):
            _wait_ready(proc, tmp_path)
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
