"""The S3 emulator as one child process: moto's S3 on a private unix socket, reached only
through a loopback proxy that adds a fixed latency and admits only our own clients.

    python -m benchlib.provision.s3_server ROOT --latency-ms 60 --bucket B --log ROOT/s3_server.log
    (stdin: the access key id, then the secret access key, one a line)

Why it is built this way:
- moto (PyPI, server mode) is the S3 implementation: it honours the conditional writes
  pgqrs's S3 store relies on (`If-None-Match: *` to create, `If-Match: <etag>` to
  replace); we write no S3 of our own. moto checks no signature at all.
- moto listens on a unix socket inside ROOT (0700, ours), so nothing but this process
  can reach it. S3 clients need an http:// endpoint, so the proxy listens on a loopback
  TCP port, which every account on the machine can reach; the proxy is the only guard.
- The latency is injected the way the reference run's toxiproxy `latency` toxic does
  it: every chunk coming back from the store is delivered `latency` ms after it
  arrived (no jitter), so each request/response pays it once and concurrent requests
  are not serialised behind each other.
- It runs in its own process so the proxy's work never competes with the harness's
  event loop; the parent gives it a parent-death signal and its own session
  (s3.py), like the PostgreSQL server.

What the proxy checks, on the first request of each connection (sigv4_refusal):
- an `Authorization: AWS4-HMAC-SHA256` header whose credential is our key id with an
  `<date>/<region>/s3/aws4_request` scope (any region: the key is what matters);
- x-amz-date within 15 minutes of our clock and on the scope's date;
- the signature, recomputed with our secret over the request as it came in: method,
  path as sent (S3 signs it encoded once, not normalised), query decoded and encoded
  again the AWS way, the headers listed in SignedHeaders (which must include host,
  x-amz-date and x-amz-content-sha256) and the declared x-amz-content-sha256, and
  compared in constant time. Refusals answer 403 with S3's error code (no more than S3
  itself tells a stranger) and close. The check is a small pure function, not botocore's
  SigV4Auth: a verifier must take the client's choice of signed headers and its bytes as
  sent, where a signer makes its own; tests/unit/test_sigv4.py holds it to requests boto3
  puts on the wire, AWS's documented example and object_store's test vector.
What it does not check, knowingly:
- the body against its declared hash (UNSIGNED-PAYLOAD and streaming payloads pass);
- later requests on an admitted keep-alive connection (only the first one is read;
  after it the proxy copies bytes both ways);
- replay: a signed header captured within its 15 minutes would be admitted again
  (capturing loopback traffic needs root, who can read the secret anyway);
- presigned URLs (query-string auth) and Signature Version 2: no client of ours uses
  them (boto3 and pgqrs's object_store sign V4 headers), so they are refused.
What keeps a local account from starving it: the first request's header must arrive
within HEADER_TIMEOUT_S; connections without a signed header yet are capped, a new one
evicting the oldest (a real client sends its signed header at once, so it gets in
while a flood churns); all connections are capped, within the file-descriptor limit
(raised from soft to hard), a newcomer dropped only when every slot is admitted; and everything the process logs (asyncio, werkzeug, moto,
uncaught exceptions, stray stderr after start-up) goes to a rotating log of at most
2 x LOG_BYTES, where refusals are counted once a minute, not written one by one.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import logging
import os
import re
import resource
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from urllib.parse import quote_from_bytes, unquote_to_bytes

LOG_BYTES = 1 << 20
MAX_HEAD = 64 * 1024
HEADER_TIMEOUT_S = 5.0
MAX_PENDING = 256
MAX_CONNECTIONS = 1024
LISTEN_QUEUE = 4096  # connections the kernel holds for us to accept (capped by somaxconn)
FDS_PER_CONNECTION = 3  # the client's socket, ours to moto, moto's end of it
MAX_SKEW_S = 15 * 60
REPORT_EVERY_S = 60.0

log = logging.getLogger("benchlib.s3_server")


@dataclass(frozen=True)
class Request:
    """The head of a request as it came over the wire: header names lower-cased, values trimmed."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


def parse_head(head: bytes) -> Request | None:
    """The request line and header fields, or None when they are not plain HTTP/1.x.
    latin-1 keeps every byte as one character, so a value hashes to the bytes that were sent."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = []
    for line in filter(None, lines[1:]):
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():  # also refuses obsolete line folding
            return None
        headers.append((name.lower(), value.strip(" \t")))
    return Request(parts[0], parts[1], tuple(headers))


def _encode(text: str) -> str:
    """AWS's URI encoding of a query name or value: decoded first ('+' is a space, as S3 and
    object_store read a query), then only A-Z a-z 0-9 - _ . ~ left bare."""
    return quote_from_bytes(unquote_to_bytes(text.replace("+", " ").encode("latin-1")), safe="-_.~")


def _header_value(values: list[str]) -> str:
    """A signed header's canonical value: each value trimmed (parse_head did it), runs of blanks as
    one space, repeated fields joined with commas."""
    return ",".join(re.sub(r"[ \t]+", " ", value) for value in values)


def canonical_query(query: str) -> str:
    pairs = sorted((_encode(name), _encode(value)) for name, _, value in
                   (part.partition("=") for part in query.split("&") if part))
    return "&".join(f"{name}={value}" for name, value in pairs)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode("latin-1"), hashlib.sha256).digest()
    return key


def sigv4_refusal(request: Request, key_id: str, secret: str, now: float) -> str | None:
    """None when `request` carries a valid AWS Signature Version 4 made with our key (the
    module docstring says what that covers); else why not, as S3's error code."""
    authorization = request.values("authorization")
    if len(authorization) != 1:
        return "AccessDenied"
    algorithm, _, fields = authorization[0].partition(" ")
    params = dict(field.strip().partition("=")[::2] for field in fields.split(","))
    if algorithm != "AWS4-HMAC-SHA256" or set(params) != {"Credential", "SignedHeaders", "Signature"}:
        return "AccessDenied"
    credential = params["Credential"].split("/")
    if len(credential) != 5 or credential[3:] != ["s3", "aws4_request"]:
        return "AccessDenied"
    if not hmac.compare_digest(credential[0].encode("latin-1"), key_id.encode()):
        return "InvalidAccessKeyId"
    dates, payload_hashes = request.values("x-amz-date"), request.values("x-amz-content-sha256")
    if len(dates) != 1 or len(payload_hashes) != 1 or not re.fullmatch(r"\d{8}T\d{6}Z", dates[0]):
        return "AccessDenied"
    try:
        signed_at = datetime.strptime(dates[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return "AccessDenied"
    if credential[1] != dates[0][:8]:
        return "AccessDenied"
    if abs(now - signed_at) > MAX_SKEW_S:
        return "RequestTimeTooSkewed"
    signed = params["SignedHeaders"].split(";")
    if not {"host", "x-amz-date", "x-amz-content-sha256"} <= set(signed) or not all(map(request.values, signed)):
        return "AccessDenied"
    path, _, query = request.target.partition("?")
    if not path.startswith("/"):
        return "AccessDenied"
    canonical = "\n".join([
        request.method, path, canonical_query(query),
        *(f"{name}:{_header_value(request.values(name))}" for name in signed),
        "", params["SignedHeaders"], payload_hashes[0]])
    scope = "/".join(credential[1:])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", dates[0], scope,
                         hashlib.sha256(canonical.encode("latin-1")).hexdigest()])
    expected = hmac.new(signing_key(secret, *credential[1:4]), to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), params["Signature"].encode("latin-1")):
        return "SignatureDoesNotMatch"
    return None


def _refusal(code: str) -> bytes:
    body = f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code></Error>'.encode()
    return (b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))


class Gate:
    """The connections the proxy holds: pending (no signed header yet, oldest first) and
    admitted, with a cap on each kind's share, and the refusals since the last report."""

    def __init__(self, max_pending: int, max_total: int) -> None:
        self.max_pending, self.max_total = max_pending, max_total
        self.pending: dict[asyncio.StreamWriter, None] = {}
        self.admitted: set[asyncio.StreamWriter] = set()
        self.refused: Counter[str] = Counter()

    def arrive(self, writer: asyncio.StreamWriter) -> bool:
        """Room for a new connection, made by evicting the oldest pending one if need be;
        False only when every slot is held by an admitted connection."""
        if len(self.pending) >= self.max_pending or len(self.pending) + len(self.admitted) >= self.max_total:
            if not self.pending:
                self.refused["full"] += 1
                return False
            oldest = next(iter(self.pending))
            del self.pending[oldest]
            oldest.transport.abort()
            self.refused["evicted"] += 1
        self.pending[writer] = None
        return True

    def admit(self, writer: asyncio.StreamWriter) -> None:
        del self.pending[writer]
        self.admitted.add(writer)

    def leave(self, writer: asyncio.StreamWriter) -> None:
        self.pending.pop(writer, None)
        self.admitted.discard(writer)

    async def report(self) -> None:
        while True:
            await asyncio.sleep(REPORT_EVERY_S)
            if self.refused:
                log.info("refused in the last %.0f s: %s; now %d pending, %d admitted", REPORT_EVERY_S,
                         ", ".join(f"{why} {n}" for why, n in self.refused.most_common()),
                         len(self.pending), len(self.admitted))
                self.refused.clear()


def serve_moto(sock_path: Path) -> None:
    """moto's S3 (all of moto's services, dispatched by the request's signature) on a unix socket."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs) -> None:  # one line per request would drown the log
            pass

    server = make_server(f"unix://{sock_path}", 0, DomainDispatcherApplication(create_backend_app), threaded=True,
                         request_handler=Quiet)
    server.handle_error = lambda request, address: log.exception("moto: a connection failed")
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


async def proxy(sock_path: Path, key_id: str, secret: str, latency_ms: float, gate: Gate) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not gate.arrive(writer):
            writer.transport.abort()
            return
        upstream_writer = None
        try:
            try:
                async with asyncio.timeout(HEADER_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except TimeoutError:
                gate.refused["header timeout"] += 1
                return
            request = parse_head(head)
            why = "AccessDenied" if request is None else sigv4_refusal(request, key_id, secret, time.time())
            if why:
                gate.refused[why] += 1
                writer.write(_refusal(why))
                return
            gate.admit(writer)
            up_reader, upstream_writer = await asyncio.open_unix_connection(str(sock_path))
            upstream_writer.write(head)
            await asyncio.gather(_pump(reader, upstream_writer, 0.0), _pump(up_reader, writer, latency_ms / 1000))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.LimitOverrunError:
            gate.refused["header too large"] += 1
        finally:
            gate.leave(writer)
            for w in (upstream_writer, writer):
                if w is not None:
                    w.close()

    # asyncio accepts up to `backlog` connections per wake-up and starts their handlers after: at
    # most half the pending cap per batch, so a flood cannot evict a real client between its
    # accept and the read of the header it sent at once. The kernel's queue is made longer
    # afterwards: a full one drops a real client's SYN too, which costs it a 1 s retransmit.
    sock = socket.create_server(("127.0.0.1", 0))
    server = await asyncio.start_server(handle, sock=sock, limit=MAX_HEAD,
                                        backlog=max(8, min(128, gate.max_pending // 2)))
    sock.listen(LISTEN_QUEUE)
    return server


def bounded_log(path: Path) -> None:
    """Everything the process logs, into `path` rotated at LOG_BYTES with one backup: a flood
    of errors costs at most 2 x LOG_BYTES of disk (one run once wrote 142 MB in a minute)."""
    handler = RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=1)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    log.setLevel(logging.INFO)
    logging.captureWarnings(True)
    logging.raiseExceptions = False  # a failing handler must not write to stderr, which is the log
    sys.excepthook = lambda kind, value, tb: log.critical("uncaught", exc_info=(kind, value, tb))
    threading.excepthook = lambda a: log.error("uncaught in thread %s", a.thread.name if a.thread else "?",
                                               exc_info=(a.exc_type, a.exc_value, a.exc_traceback))


def stderr_into_log() -> None:
    """After start-up, fd 2 (anything writing to stderr, C code included) feeds the log line
    by line. Before it, stderr is the log file itself, so a start-up error is in its last
    line even when the process dies at once."""
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def forward() -> None:
        with open(read_fd, "rb") as pipe:
            for line in iter(lambda: pipe.readline(8192), b""):
                log.warning("stderr: %s", line.decode(errors="replace").rstrip())

    threading.Thread(target=forward, daemon=True, name="stderr").start()


def connection_caps() -> tuple[int, int, int]:
    """(pending, total, fd limit): the soft fd limit raised to the hard one, and the caps kept
    within it, each connection costing up to FDS_PER_CONNECTION descriptors in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    total = MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else \
        max(16, min(MAX_CONNECTIONS, (soft - 64) // FDS_PER_CONNECTION))
    return min(MAX_PENDING, total // 2), total, soft


async def main(root: Path, bucket: str, latency_ms: float) -> None:
    key_id, secret = sys.stdin.readline().strip(), sys.stdin.readline().strip()
    if not key_id or not secret:
        raise SystemExit("s3_server: give the access key id and the secret on stdin, one a line")
    sock_path = root / "moto.sock"
    serve_moto(sock_path)
    status = await _request(sock_path, (
        f"PUT /{bucket} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n"
        f"Authorization: AWS4-HMAC-SHA256 Credential={key_id}/20000101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=0\r\n\r\n").encode())
    if b" 200 " not in status:
        raise SystemExit(f"s3_server: creating bucket {bucket} failed: {status.decode(errors='replace').strip()}")
    max_pending, max_total, fd_limit = connection_caps()
    gate = Gate(max_pending, max_total)
    server = await proxy(sock_path, key_id, secret, latency_ms, gate)
    port = server.sockets[0].getsockname()[1]
    log.info("proxy on 127.0.0.1:%d: at most %d connections, %d of them without a signed header "
             "(%.0f s to send it); fd limit %d", port, max_total, max_pending, HEADER_TIMEOUT_S, fd_limit)
    print(f"ready {port}", flush=True)  # the parent waits for this line
    stderr_into_log()
    async with server:
        await asyncio.gather(server.serve_forever(), gate.report())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--log", type=Path, required=True, help="also our stderr: s3.py shows its last line "
                    "when start-up fails")
    args = ap.parse_args()
    bounded_log(args.log)
    try:
        asyncio.run(main(args.root, args.bucket, args.latency_ms))
    except KeyboardInterrupt:
        pass
