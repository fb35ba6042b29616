"""The `s3` backend: an S3-compatible object store on loopback, with injected latency.

A system with an S3 store (pgqrs's keeps one SQLite file per queue as one object,
written with conditional PUTs) is pointed at a server this module starts and stops
like the PostgreSQL cluster: s3_server.py runs moto's S3 behind a proxy that delays
every response by `latency_ms` (the reference run: 60 ms, no jitter) and admits only
connections whose first request carries a valid Signature Version 4 made with the key
and secret generated here (handed over on stdin, never on argv or in a file). The
process has a parent-death signal and a session of its own; its directory is private
(tempdirs) and removed afterwards; its log (LOG_NAME) is size-capped.

Settings (the study's `settings`, recorded in the manifest and the cell key):
`latency_ms`, the delay added to every response (default 60).
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchlib import tempdirs
from benchlib.errors import BenchError, shown
from benchlib.provision.lifetime import dies_with_us

DEFAULTS = {"latency_ms": "60"}
BUCKET = "benchlib"
REGION = "us-east-1"
READY_TIMEOUT_S = 60.0
LOG_NAME = "s3_server.log"  # in the emulator's directory; size-capped by s3_server


@dataclass(frozen=True)
class S3Plan:
    settings: dict[str, str]
    backend: str = "s3"
    way: str = "emulator"

    @property
    def identity(self) -> dict[str, object]:
        """What a cell's key takes from the store, known before the emulator starts."""
        return {"kind": self.way, "version": f"moto {_moto_version()} (S3), behind benchlib's latency proxy",
                "settings_requested": dict(self.settings)}


def _moto_version() -> str:
    try:
        return version("moto")
    except PackageNotFoundError:
        raise BenchError("the s3 backend needs the moto package (with its server extra): "
                         "pip install 'moto[server]' (it is in requirements.lock)") from None


async def preflight(settings: Mapping[str, str] | None = None, **_: Any) -> S3Plan:
    """Known settings with sane values, and moto installed: else one line, before anything starts."""
    _moto_version()
    settings = {str(k): str(v) for k, v in (settings or {}).items()}
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise BenchError(f"the s3 backend has no setting {shown(unknown[0])}: it knows {', '.join(DEFAULTS)}")
    merged = {**DEFAULTS, **settings}
    try:
        latency = float(merged["latency_ms"])
    except ValueError:
        latency = -1.0
    if not 0 <= latency <= 10_000:
        raise BenchError(f"latency_ms={shown(merged['latency_ms'])} for the s3 backend: give milliseconds from 0 to 10000")
    return S3Plan(merged)


@dataclass
class S3Target:
    """A running emulator: where it listens, the credentials it admits, and fresh objects on demand."""

    endpoint: str
    key_id: str = field(repr=False)
    secret: str = field(repr=False)
    root: Path
    settings: dict[str, str]
    bucket: str = BUCKET
    kind: str = "emulator"
    backend: str = "s3"
    on_this_machine: bool = True  # the store's local SQLite cache lives on this disk
    server_pid: int | None = None  # the emulator process
    _objects: int = 0

    def env(self) -> dict[str, str]:
        """What an S3 client (object_store, boto3) reads to reach this server and no other."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_ALLOW_HTTP": "true"}

    def fresh_object(self, stem: str) -> tuple[str, Path]:
        """A new object key (s3://bucket/stem-N.sqlite) and an empty local cache directory for it:
        a fresh queue per sample, as DROP SCHEMA gives the PostgreSQL systems."""
        self._objects += 1
        name = f"{stem}-{self._objects}"
        cache = self.root / "cache" / name
        cache.mkdir(parents=True)
        return f"s3://{self.bucket}/{name}.sqlite", cache

    async def describe(self) -> dict:
        return {
            "kind": self.kind,
            "location": "loopback S3 emulator",
            "version": f"moto {_moto_version()} (S3), behind benchlib's latency proxy",
            "major": None,
            "binaries": "the moto package",
            "settings_requested": dict(self.settings),
            "settings_not_applied": {},
            "settings_non_default": dict(self.settings),
        }


@asynccontextmanager
async def s3(plan: S3Plan) -> AsyncIterator[S3Target]:
    """Start the emulator, yield its target, and stop it and remove its directory on every exit."""
    root = tempdirs.make("s3")
    key_id, secret = "BENCH" + secrets.token_hex(8).upper(), secrets.token_hex(20)
    proc = None
    try:
        with open(root / LOG_NAME, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchlib.provision.s3_server", str(root), "--bucket", BUCKET,
                 "--latency-ms", plan.settings["latency_ms"], "--log", str(root / LOG_NAME)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=root,
                start_new_session=True, preexec_fn=dies_with_us())
        proc.stdin.write(f"{key_id}\n{secret}\n".encode())
        proc.stdin.close()
        port = _wait_ready(proc, root)
        yield S3Target(endpoint=f"http://127.0.0.1:{port}", key_id=key_id, secret=secret, root=root,
                       settings=dict(plan.settings), server_pid=proc.pid)
    finally:
        if proc is not None:
            _stop(proc)
        tempdirs.remove(root)


def _wait_ready(proc: subprocess.Popen, root: Path) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    os.set_blocking(proc.stdout.fileno(), False)
    buffer = b""
    while time.monotonic() < deadline:
        chunk = proc.stdout.read() or b""
        buffer += chunk
        if b"\n" in buffer:
            line = buffer.split(b"\n", 1)[0].decode()
            if line.startswith("ready "):
                return int(line.split()[1])
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    tail = (root / LOG_NAME).read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
    raise BenchError(f"the S3 emulator did not start: {tail[0]}")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL; synchronous so a cancelled task cannot interrupt it halfway."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            break
    if proc.stdout is not None:
        proc.stdout.close()
