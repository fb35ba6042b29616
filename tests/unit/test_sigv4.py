"""The S3 proxy's Signature Version 4 check (s3_server.sigv4_refusal) against signers that are
not ours: requests boto3 really puts on the wire (a loopback listener records each head),
AWS's documented example, and object_store's own test vector (pgqrs's S3 client). A verifier
checked only against itself would agree with its own mistakes."""
from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime

import boto3
import botocore.config
import pytest

from benchlib.provision.s3_server import MAX_SKEW_S, Request, parse_head, sigv4_refusal

KEY_ID, SECRET = "BENCHTESTKEY0001", "0123456789abcdef0123456789abcdef01234567"
ODD_KEY = "queues/a b+c~(1)=ü.sqlite"  # a space, plus, tilde, parentheses, equals, non-ASCII


def _record_heads(calls) -> list[bytes]:
    """The head of every request boto3 sends while `calls(client)` runs; each is answered 200."""
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                heads.append(data.partition(b"\r\n\r\n")[0] + b"\r\n\r\n")
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{listener.getsockname()[1]}",
                          region_name="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                          config=botocore.config.Config(retries={"max_attempts": 1}))
    try:
        calls(client)
    finally:
        client.close()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone would not)
        listener.close()
        thread.join(5)
    return heads


@pytest.fixture(scope="module")
def boto3_heads() -> list[bytes]:
    def calls(s3) -> None:
        s3.put_object(Bucket="benchlib", Key=ODD_KEY, Body=b"v1", IfNoneMatch="*")
        s3.put_object(Bucket="benchlib", Key=ODD_KEY, Body=b"v2", IfMatch='"0123  etag"')
        s3.get_object(Bucket="benchlib", Key=ODD_KEY, Range="bytes=0-9")
        s3.head_object(Bucket="benchlib", Key=ODD_KEY)
        s3.list_objects_v2(Bucket="benchlib", Prefix="queues/a b+c~ü", Delimiter="/", MaxKeys=5)
        s3.create_multipart_upload(Bucket="benchlib", Key=ODD_KEY)  # ?uploads, a name alone
        s3.delete_object(Bucket="benchlib", Key=ODD_KEY)

    return _record_heads(calls)


def _parsed(head: bytes) -> Request:
    request = parse_head(head)
    assert request is not None
    return request


def test_every_request_boto3_signs_is_admitted(boto3_heads):
    assert len(boto3_heads) == 7
    methods = [head.split(b" ", 1)[0] for head in boto3_heads]
    assert methods == [b"PUT", b"PUT", b"GET", b"HEAD", b"GET", b"POST", b"DELETE"]
    assert b"?uploads" in boto3_heads[5] and b"prefix=" in boto3_heads[4]
    for head in boto3_heads:
        assert sigv4_refusal(_parsed(head), KEY_ID, SECRET, time.time()) is None, head.decode("latin-1")


@pytest.mark.parametrize("tamper, why", [
    (lambda h: h.replace(b"/benchlib/queues/", b"/benchlib/queueZ/", 1), "SignatureDoesNotMatch"),
    (lambda h: h.replace(b"If-None-Match: *", b"If-None-Match: x"), "SignatureDoesNotMatch"),
    (lambda h: h.replace(b"X-Amz-Content-SHA256: ", b"X-Amz-Content-SHA256: 0", 1), "SignatureDoesNotMatch"),
    (lambda h: h.replace(b"PUT ", b"GET ", 1), "SignatureDoesNotMatch"),
    (lambda h: h.replace(b"Credential=" + KEY_ID.encode(), b"Credential=BENCHOTHERKEY0001"), "InvalidAccessKeyId"),
    (lambda h: h.replace(b"AWS4-HMAC-SHA256 ", b"AWS "), "AccessDenied"),
    (lambda h: b"\r\n".join(line for line in h.split(b"\r\n") if not line.lower().startswith(b"authorization")),
     "AccessDenied"),
    (lambda h: h.replace(b"X-Amz-Date: ", b"X-Amz-Datum: ", 1), "AccessDenied"),
    (lambda h: h.replace(b";x-amz-date", b"", 1), "AccessDenied"),
])
def test_a_tampered_request_is_refused(boto3_heads, tamper, why):
    head = boto3_heads[0]
    assert tamper(head) != head
    assert sigv4_refusal(_parsed(tamper(head)), KEY_ID, SECRET, time.time()) == why


def test_a_tampered_query_is_refused(boto3_heads):
    listing = boto3_heads[4]
    assert sigv4_refusal(_parsed(listing.replace(b"max-keys=5", b"max-keys=6")), KEY_ID, SECRET,
                         time.time()) == "SignatureDoesNotMatch"


def test_the_wrong_secret_is_refused(boto3_heads):
    for head in boto3_heads:
        assert sigv4_refusal(_parsed(head), KEY_ID, SECRET[:-1] + "8", time.time()) == "SignatureDoesNotMatch"


def test_headers_that_are_not_signed_do_not_count(boto3_heads):
    """What the signature covers and nothing more: User-Agent is not among SignedHeaders."""
    head = boto3_heads[0]
    assert b"User-Agent: " in head and b"user-agent" not in head.split(b"SignedHeaders=")[1].split(b",")[0]
    assert sigv4_refusal(_parsed(head.replace(b"User-Agent: ", b"User-Agent: x")), KEY_ID, SECRET, time.time()) is None


def test_a_request_signed_too_long_ago_or_ahead_is_refused(boto3_heads):
    request = _parsed(boto3_heads[0])
    signed_at = datetime.strptime(request.values("x-amz-date")[0], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=UTC).timestamp()
    for offset, why in ((MAX_SKEW_S - 5, None), (-(MAX_SKEW_S - 5), None),
                        (MAX_SKEW_S + 5, "RequestTimeTooSkewed"), (-(MAX_SKEW_S + 5), "RequestTimeTooSkewed")):
        assert sigv4_refusal(request, KEY_ID, SECRET, signed_at + offset) == why


def _at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()


def test_aws_documented_example():
    """AWS's S3 example (sig-v4-header-based-auth, GET Object with a Range header)."""
    head = (b"GET /test.txt HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\nRange: bytes=0-9\r\n"
            b"x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"
            b"x-amz-date: 20130524T000000Z\r\n"
            b"Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            b"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            b"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n\r\n")
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert sigv4_refusal(_parsed(head), "AKIAIOSFODNN7EXAMPLE", secret, _at("20130524T000000Z")) is None
    assert sigv4_refusal(_parsed(head.replace(b"bytes=0-9", b"bytes=0-8")), "AKIAIOSFODNN7EXAMPLE", secret,
                         _at("20130524T000000Z")) == "SignatureDoesNotMatch"


def test_object_store_test_vector():
    """object_store 0.12's test_sign_port (the crate pgqrs's S3 store signs with): a listing whose
    query reqwest encoded, on a host with a port."""
    head = (b"GET /tsm-schemas?delimiter=%2F&encoding-type=url&list-type=2&prefix= HTTP/1.1\r\n"
            b"host: localhost:9000\r\nx-amz-date: 20220809T130525Z\r\n"
            b"x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"
            b"authorization: AWS4-HMAC-SHA256 Credential=H20ABqCkLZID4rLe/20220809/us-east-1/s3/aws4_request, "
            b"SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
            b"Signature=9ebf2f92872066c99ac94e573b4e1b80f4dbb8a32b1e8e23178318746e7d1b4d\r\n\r\n")
    secret = "jMqRDgxSsBqqznfmddGdu1TmmZOJQxdM"
    assert sigv4_refusal(_parsed(head), "H20ABqCkLZID4rLe", secret, _at("20220809T130525Z")) is None
    assert sigv4_refusal(_parsed(head.replace(b"prefix=", b"prefix=a")), "H20ABqCkLZID4rLe", secret,
                         _at("20220809T130525Z")) == "SignatureDoesNotMatch"


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.1\r\n Folded: value\r\n\r\n",
    b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
    b"GET /\r\n\r\n",
    b"GET / HTTP/1.1\r\nName : value\r\n\r\n",
])
def test_heads_that_are_not_plain_http_are_not_parsed(head):
    assert parse_head(head) is None
