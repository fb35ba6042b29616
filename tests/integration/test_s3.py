"""The s3 backend: moto's S3 behind our latency proxy, ours alone, gone afterwards."""
from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import boto3
import botocore.exceptions
import psutil
import pytest

from benchlib.errors import BenchError
from benchlib.provision import open_backend

pytestmark = pytest.mark.integration


def _client(env: dict[str, str], key_id: str | None = None, secret: str | None = None):
    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                        aws_access_key_id=key_id or env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=secret or env["AWS_SECRET_ACCESS_KEY"])


def _emulators() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if "benchlib.provision.s3_server" in " ".join(
        p.info["cmdline"] or [])]


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
        with pytest.raises(botocore.exceptions.ClientError, match="403"):
            await asyncio.to_thread(stranger.list_objects_v2, Bucket=target.bucket)
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
    assert any(p.ppid() == proc.pid for p in _emulators())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while [p for p in _emulators() if p.status() != psutil.STATUS_ZOMBIE] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in _emulators() if p.status() != psutil.STATUS_ZOMBIE] == []
