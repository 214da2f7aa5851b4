"""What the worker's event loop decides from a request head alone (regsite/worker.py), and the minimum
body rate of a connection a thread reads (regsite/client_timeouts.py)."""
from __future__ import annotations

import socket
import time

import pytest

from regsite.client_timeouts import ClientSocket
from regsite.worker import SMALL_BODY, _could_be_http, body_to_read, error_body, is_upload

MANIFEST_LIMIT = 4 * 1024 * 1024


def head(request_line: str, **headers: str) -> bytes:
    lines = [request_line] + [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return "\r\n".join(lines).encode()


@pytest.mark.parametrize("line, length, expected", [
    ("PUT /v2/team/app/manifests/v1 HTTP/1.1", 500, 500),
    ("PUT /v2/team/app/manifests/v1?tag=a&tag=b HTTP/1.1", 500, 500),
    ("PUT /v2/team/app/manifests/v1 HTTP/1.1", MANIFEST_LIMIT, MANIFEST_LIMIT),
    ("PUT /v2/team/app/manifests/v1 HTTP/1.1", MANIFEST_LIMIT + 1, 0),  # the view answers 413
    ("POST /api/tokens HTTP/1.1", 80, 80),
    ("POST /api/tokens/revoke HTTP/1.1", SMALL_BODY, SMALL_BODY),
    ("POST /api/tokens/list HTTP/1.1", SMALL_BODY + 1, 0),
    ("POST /ui/sign-in HTTP/1.1", 300, 300),
    ("PATCH /v2/team/app/blobs/uploads/abc HTTP/1.1", 100, 0),
    ("POST /v2/team/app/blobs/uploads/?digest=sha256:00 HTTP/1.1", 100, 0),
    ("PUT /v2/team/app/blobs/uploads/abc?digest=sha256:00 HTTP/1.1", 100, 0),
    ("GET /v2/team/app/manifests/v1 HTTP/1.1", 100, 0),
])
def test_it_reads_only_small_bodies_in_the_loop(line: str, length: int, expected: int) -> None:
    assert body_to_read(head(line, Content_Length=str(length)), MANIFEST_LIMIT) == expected


def test_it_leaves_chunked_and_expect_continue_bodies_to_a_thread() -> None:
    line = "POST /api/tokens HTTP/1.1"
    assert body_to_read(head(line, Transfer_Encoding="chunked"), MANIFEST_LIMIT) == 0
    assert body_to_read(head(line, Content_Length="80", Expect="100-continue"), MANIFEST_LIMIT) == 0
    assert body_to_read(head(line, Content_Length="eighty"), MANIFEST_LIMIT) == 0
    assert body_to_read(head(line), MANIFEST_LIMIT) == 0


def test_it_sends_uploads_with_a_body_to_the_upload_threads() -> None:
    assert is_upload(head("PATCH /v2/a/blobs/uploads/x HTTP/1.1", Content_Length="10"))
    assert is_upload(head("PUT /v2/a/b/blobs/uploads/x?digest=d HTTP/1.1", Transfer_Encoding="chunked"))
    assert not is_upload(head("PUT /v2/a/blobs/uploads/x?digest=d HTTP/1.1", Content_Length="0"))
    assert not is_upload(head("POST /v2/a/blobs/uploads/ HTTP/1.1"))
    assert not is_upload(head("PUT /v2/a/manifests/blobs HTTP/1.1", Content_Length="10"))


def test_it_answers_each_path_in_the_shape_its_clients_read() -> None:
    assert error_body(b"PUT /v2/a/manifests/v1 HTTP/1.1", "late")["errors"][0]["code"] == "MANIFEST_INVALID"
    assert error_body(b"PATCH /v2/a/blobs/uploads/x HTTP/1.1", "late")["errors"][0]["code"] == \
        "BLOB_UPLOAD_INVALID"
    assert error_body(b"GET /v2/a/tags/list HTTP/1.1", "late")["errors"][0]["code"] == "UNKNOWN"
    assert error_body(b"POST /api/tokens HTTP/1.1", "late") == {"error": "late"}
    assert error_body(b"garbage", "late") == {"error": "late"}


def _pair(idle: float, rate: int) -> tuple[ClientSocket, socket.socket]:
    server, client = socket.socketpair()
    adopted = ClientSocket.adopt(server, idle, rate)
    adopted.setblocking(True)
    return adopted, client


def test_it_cuts_off_a_body_below_the_minimum_rate() -> None:
    server, client = _pair(idle=0.5, rate=1000)
    with server, client:
        deadline = time.monotonic() + 5
        with pytest.raises(TimeoutError):
            while time.monotonic() < deadline:
                client.send(b"x")  # 10 bytes a second, against a minimum of 1000
                server.recv(100)
                time.sleep(0.1)
        assert server.gave_up and server.recv(100) == b""


@pytest.mark.serial  # timing-sensitive: run alone (make test)
def test_it_keeps_a_body_at_the_minimum_rate() -> None:
    server, client = _pair(idle=0.3, rate=1000)
    with server, client:
        received = 0
        for _ in range(12):  # 2000 bytes a second for 1.2 s: four rate windows
            client.send(b"x" * 200)
            received += len(server.recv(1000))
            time.sleep(0.1)
        assert received == 2400 and not server.gave_up


def test_it_cuts_off_a_stalled_body_after_the_idle_timeout() -> None:
    server, client = _pair(idle=0.2, rate=0)
    with server, client:
        with pytest.raises(TimeoutError):
            server.recv(100)
        assert server.gave_up


@pytest.mark.parametrize("start, http", [
    (b"GET /v2/ HTTP/1.1", True), (b"PATCH", True), (b"PO", True), (b"", True), (b"\r\nGET / H", True),
    (b"\x16\x03\x01\x02\x00\x01", False), (b"hello world", False), (b"GET/v2/", False),
    (b"SSH-2.0-OpenSSH", False),
])
def test_it_tells_early_whether_a_connection_can_be_http(start: bytes, http: bool) -> None:
    assert _could_be_http(start) is http
