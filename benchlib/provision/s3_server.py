"""The S3 emulator as one child process: moto's S3 on a private unix socket, reached only
through a loopback proxy that adds a fixed latency and admits only our own clients.

    python -m benchlib.provision.s3_server ROOT --latency-ms 60 --bucket B  (key on stdin)

Why it is built this way:
- moto (PyPI, server mode) is the S3 implementation: it honours the conditional writes
  pgqrs's S3 store relies on (`If-None-Match: *` to create, `If-Match: <etag>` to
  replace); we write no S3 of our own.
- moto listens on a unix socket inside ROOT (0700, ours), so nothing but this process
  can reach it. S3 clients need an http:// endpoint, so the proxy listens on a loopback
  TCP port; loopback is reachable by every account on the machine, so the proxy admits
  a connection only when its first request is signed with the access key id the harness
  generated for this server (a random secret handed over on stdin, never on argv).
- The latency is injected the way the reference run's toxiproxy `latency` toxic does
  it: every chunk coming back from the store is delivered `latency` ms after it
  arrived (no jitter), so each request/response pays it once and concurrent requests
  are not serialised behind each other.
- It runs in its own process so the proxy's work never competes with the harness's
  event loop; the parent gives it a parent-death signal and its own session
  (s3.py), like the PostgreSQL server.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from pathlib import Path

REJECT = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
MAX_HEAD = 64 * 1024


def serve_moto(sock_path: Path) -> None:
    """moto's S3 (all of moto's services, dispatched by the request's signature) on a unix socket."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs) -> None:  # one line per request would drown the log
            pass

    server = make_server(f"unix://{sock_path}", 0, DomainDispatcherApplication(create_backend_app), threaded=True,
                         request_handler=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True, name="moto").start()


async def _request(sock_path: Path, head: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(sock_path))
    writer.write(head)
    await writer.drain()
    status = await reader.readline()
    writer.close()
    return status


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay_s: float) -> None:
    """Copy src to dst, each chunk `delay_s` after it arrived (order kept, nothing serialised)."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await chunks.get()
            if not data:
                break
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            dst.write(data)
            await dst.drain()

    sender = asyncio.create_task(deliver())
    try:
        while data := await src.read(65536):
            chunks.put_nowait((loop.time() + delay_s, data))
    finally:
        chunks.put_nowait((0.0, b""))
        await sender
        if dst.can_write_eof():
            dst.write_eof()


def _admitted(head: bytes, key_id: str) -> bool:
    """The first request of a connection is signed with our access key id (AWS SigV4 or V2)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            text = value.decode("latin-1")
            return f"Credential={key_id}/" in text or f"AWS {key_id}:" in text
    return False


async def proxy(sock_path: Path, key_id: str, latency_ms: float) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_writer = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD or not _admitted(head, key_id):
                writer.write(REJECT)
                await writer.drain()
                return
            up_reader, upstream_writer = await asyncio.open_unix_connection(str(sock_path))
            upstream_writer.write(head)
            await asyncio.gather(_pump(reader, upstream_writer, 0.0), _pump(up_reader, writer, latency_ms / 1000))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            for w in (upstream_writer, writer):
                if w is not None:
                    w.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, limit=MAX_HEAD)


async def main(root: Path, bucket: str, latency_ms: float) -> None:
    key_id = sys.stdin.readline().strip()
    if not key_id:
        raise SystemExit("s3_server: no access key id on stdin")
    sock_path = root / "moto.sock"
    serve_moto(sock_path)
    status = await _request(sock_path, (
        f"PUT /{bucket} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n"
        f"Authorization: AWS4-HMAC-SHA256 Credential={key_id}/20000101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=0\r\n\r\n").encode())
    if b" 200 " not in status:
        raise SystemExit(f"s3_server: creating bucket {bucket} failed: {status.decode(errors='replace').strip()}")
    server = await proxy(sock_path, key_id, latency_ms)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)  # the parent waits for this line
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    args = ap.parse_args()
    try:
        asyncio.run(main(args.root, args.bucket, args.latency_ms))
    except KeyboardInterrupt:
        pass
