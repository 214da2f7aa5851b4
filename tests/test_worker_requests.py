"""What the worker's event loop reads of a request before a thread sees it (regsite/request_reader.py),
and the limits of a connection a thread reads (regsite/client_timeouts.py)."""
from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from regsite import client_timeouts
from regsite.client_timeouts import ClientSocket
from regsite.request_reader import SMALL_BODY, Ready, Refused, RequestReader, _could_be_http, error_body

MANIFEST_LIMIT = 4 * 1024 * 1024


def head(request_line: str, **headers: str) -> bytes:
    lines = [request_line] + [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read(*pieces: bytes) -> tuple[Ready | None, RequestReader]:
    """Feed ``pieces`` one at a time, as they might arrive."""
    reader = RequestReader(MANIFEST_LIMIT)
    ready = None
    for piece in pieces:
        assert ready is None, "complete before its last piece"
        ready = reader.feed(piece)
    return ready, reader


def trickled(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def refusal(*pieces: bytes) -> Refused:
    with pytest.raises(Refused) as refused:
        read(*pieces)
    return refused.value


@pytest.mark.parametrize("line, length", [
    ("PUT /v2/team/app/manifests/v1 HTTP/1.1", MANIFEST_LIMIT),
    ("PUT /v2/team/app/manifests/v1?tag=a&tag=b HTTP/1.1", 500),
    ("POST /api/tokens HTTP/1.1", SMALL_BODY),
    ("POST /auth/token HTTP/1.1", 80),
    ("POST /v2/ HTTP/1.1", 300),  # a route that takes no body: read, so the connection stays in step
    ("DELETE /v2/team/app/manifests/v1 HTTP/1.1", 10),
    ("POST /a/route/added/tomorrow HTTP/1.1", 1000),
])
def test_it_reads_the_whole_body_of_any_route_up_to_its_bound(line: str, length: int) -> None:
    request = head(line, Content_Length=str(length)) + b"x" * length
    ready, _ = read(*[request[:-1], request[-1:]])
    assert ready == Ready(request)


@pytest.mark.parametrize("line, length, limit", [
    ("PUT /v2/team/app/manifests/v1 HTTP/1.1", MANIFEST_LIMIT + 1, MANIFEST_LIMIT),
    ("POST /api/tokens/list HTTP/1.1", SMALL_BODY + 1, SMALL_BODY),
    ("POST /v2/ HTTP/1.1", 10**12, SMALL_BODY),
    ("GET /v2/team/app/manifests/v1 HTTP/1.1", SMALL_BODY + 1, SMALL_BODY),
])
def test_it_refuses_a_body_over_its_bound_from_the_head_alone(line: str, length: int, limit: int) -> None:
    refused = refusal(head(line, Content_Length=str(length)))
    assert (refused.status, refused.message) == (413, f"request body of {length} bytes is over the limit of "
                                                      f"{limit} bytes")


@pytest.mark.parametrize("line", [
    "PATCH /v2/team/app/blobs/uploads/abc HTTP/1.1",
    "POST /v2/team/app/blobs/uploads/?digest=sha256:00 HTTP/1.1",
    "PUT /v2/team/app/blobs/uploads/abc?digest=sha256:00 HTTP/1.1",
    "PUT http://registry:4000/v2/team/app/blobs/uploads/abc?digest=sha256:00 HTTP/1.1",
])
def test_it_hands_an_upload_on_with_its_head_for_its_body_to_stream(line: str) -> None:
    for framing in ({"Content_Length": str(10 * MANIFEST_LIMIT)}, {"Transfer_Encoding": "chunked"}):
        request = head(line, Expect="100-continue", **framing)
        ready, reader = read(request + b"abc")
        assert ready == Ready(request + b"abc", upload=True) and not reader.continue_due


def test_an_upload_without_a_body_is_an_ordinary_request() -> None:
    for request in (head("PUT /v2/a/blobs/uploads/x?digest=d HTTP/1.1", Content_Length="0"),
                    head("POST /v2/a/blobs/uploads/ HTTP/1.1")):
        assert read(request)[0] == Ready(request)


def test_it_de_chunks_a_body_arriving_a_byte_at_a_time_and_hands_it_on_with_its_length() -> None:
    body = (b"5\r\nhello\r\n"
            b"1;name=value\r\n \r\n"
            b"10\r\n" + b"w" * 16 + b"\r\n"
            b"0\r\nX-Trailer: dropped\r\n\r\n")
    request = head("POST /api/tokens HTTP/1.1", Host="x", Transfer_Encoding="chunked") + body
    ready, _ = read(*trickled(request))
    assert ready == Ready(head("POST /api/tokens HTTP/1.1", Host="x", Content_Length="22") + b"hello " + b"w" * 16)


def test_it_hands_on_what_was_pipelined_after_a_body() -> None:
    then = b"GET /v2/ HTTP/1.1\r\n\r\nGET /he"
    chunked = head("PUT /v2/a/manifests/v1 HTTP/1.1", Transfer_Encoding="chunked") + b"2\r\n{}\r\n0\r\n\r\n"
    assert read(chunked + then)[0] == Ready(head("PUT /v2/a/manifests/v1 HTTP/1.1", Content_Length="2") + b"{}" + then)
    sized = head("POST /v2/ HTTP/1.1", Content_Length="2") + b"{}"
    assert read(sized + then)[0] == Ready(sized + then)


def test_it_owes_100_continue_for_a_body_it_waits_for_and_drops_the_expectation() -> None:
    ready, reader = read(head("POST /api/tokens HTTP/1.1", Expect="100-continue", Content_Length="2"))
    assert ready is None and reader.continue_due
    reader.continue_due = False
    assert reader.feed(b"{}") == Ready(head("POST /api/tokens HTTP/1.1", Content_Length="2") + b"{}")
    ready, reader = read(head("POST /api/tokens HTTP/1.1", Expect="100-Continue", Transfer_Encoding="chunked"))
    assert ready is None and reader.continue_due
    _, reader = read(head("POST /v2/ HTTP/1.0", Expect="100-continue", Content_Length="2"))  # ignored on 1.0
    assert not reader.continue_due
    request = head("POST /api/tokens HTTP/1.1", Expect="100-continue", Transfer_Encoding="chunked") + b"0\r\n\r\n"
    ready, reader = read(request)  # the client did not wait: nothing is owed
    assert ready == Ready(head("POST /api/tokens HTTP/1.1", Content_Length="0")) and not reader.continue_due


def test_it_refuses_a_continue_it_would_not_read_without_asking_for_the_body() -> None:
    refused = refusal(head("POST /api/tokens HTTP/1.1", Expect="100-continue", Content_Length=str(SMALL_BODY + 1)))
    assert refused.status == 413


@pytest.mark.parametrize("pieces, status, message", [
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked", Content_Length="5")], 400, "with a Content-Length"),
    ([head("POST /a HTTP/1.0", Transfer_Encoding="chunked")], 400, "HTTP/1.0"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="gzip, chunked")], 501, "must be chunked"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked, chunked")], 501, "must be chunked"),
    ([b"POST /a HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"], 400, "more than one"),
    ([head("POST /a HTTP/1.1", Content_Length="-1")], 400, "invalid Content-Length"),
    ([head("POST /a HTTP/1.1", Content_Length="1e3")], 400, "invalid Content-Length"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked"), b"zz\r\n"], 400, "chunk size"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked"), b"2\r\nabXY"], 400, "does not end with CRLF"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked"), b"1" * 5000], 400, "line too long"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked"), b"10001\r\n"], 413, "over the limit of 65536"),
    ([head("POST /a HTTP/1.1", Transfer_Encoding="chunked"), b"ffff\r\n" + b"x" * 0xffff + b"\r\n2\r\n"], 413,
     "over the limit"),
    ([b"SSH-2.0-OpenSSH_9.2\r\n"], 400, "not an HTTP/1.1 request"),
    ([b"GET / HTTP/1.1\r\nX: " + b"y" * (64 * 1024)], 431, "request head too large"),
])
def test_it_refuses_framing_it_cannot_trust(pieces: list[bytes], status: int, message: str) -> None:
    refused = refusal(*pieces)
    assert refused.status == status and message in refused.message, refused.message


def test_it_finds_a_head_sent_a_byte_at_a_time_without_rescanning_it() -> None:
    request = head("GET /v2/ HTTP/1.1", Host="x", User_Agent="y" * 2000)
    assert read(*trickled(request))[0] == Ready(request)
    assert read(b"\r\n" + request)[0] == Ready(b"\r\n" + request)  # one empty line first is allowed


def test_it_answers_each_path_in_the_shape_its_clients_read() -> None:
    assert error_body(b"PUT /v2/a/manifests/v1 HTTP/1.1", "late")["errors"][0]["code"] == "MANIFEST_INVALID"
    assert error_body(b"PATCH /v2/a/blobs/uploads/x HTTP/1.1", "late")["errors"][0]["code"] == \
        "BLOB_UPLOAD_INVALID"
    assert error_body(b"GET /v2/a/tags/list HTTP/1.1", "late")["errors"][0]["code"] == "UNKNOWN"
    assert error_body(b"POST /auth/token HTTP/1.1", "late") == {
        "errors": [{"code": "UNSUPPORTED", "message": "late"}], "error": "late"}
    assert error_body(b"POST /api/tokens HTTP/1.1", "late") == {"error": "late"}
    assert error_body(b"garbage", "late") == {"error": "late"}


def _pair(idle: float, rate: int) -> tuple[ClientSocket, socket.socket]:
    server, client = socket.socketpair()
    adopted = ClientSocket.adopt(server, idle, rate)
    adopted.setblocking(True)
    adopted.streaming = True  # an upload's: the one kind of body a thread reads
    return adopted, client


@contextmanager
def sending(client: socket.socket, piece: bytes, every: float) -> Iterator[None]:
    """The client sends ``piece`` every ``every`` seconds while the server reads: a slow client."""
    stop = threading.Event()

    def send() -> None:
        while not stop.wait(every):
            try:
                client.send(piece)
            except OSError:
                return

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_it_cuts_off_a_body_below_the_minimum_rate() -> None:
    server, client = _pair(idle=0.5, rate=1000)
    with server, client, sending(client, b"x", 0.1):  # 10 bytes a second, against a minimum of 1000
        deadline = time.monotonic() + 5
        with pytest.raises(TimeoutError):
            while time.monotonic() < deadline:
                server.recv(100)
        assert server.gave_up and server.recv(100) == b""


@pytest.mark.serial  # timing-sensitive: run alone (make test)
def test_it_keeps_a_body_at_the_minimum_rate() -> None:
    server, client = _pair(idle=0.3, rate=1000)
    with server, client, sending(client, b"x" * 200, 0.1):  # 2000 bytes a second: four rate windows
        received, started = 0, time.monotonic()
        while time.monotonic() - started < 1.2:
            received += len(server.recv(1000))
        assert received >= 2000 and not server.gave_up


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


def test_a_thread_never_waits_on_a_client_for_a_request_the_loop_read() -> None:
    server, client = _pair(idle=5, rate=0)
    server.streaming = False
    with server, client:
        started = time.monotonic()
        assert server.recv(100) == b""  # the end of the stream at once: nothing more is coming
        assert time.monotonic() - started < 0.5


def test_it_holds_an_upload_body_to_the_minimum_rate_from_its_first_seconds(monkeypatch) -> None:
    monkeypatch.setattr(client_timeouts, "RATE_GRACE", 0.5, raising=False)
    server, client = _pair(idle=30, rate=1000)
    with server, client:
        started = time.monotonic()
        with pytest.raises(TimeoutError), sending(client, b"x", 0.1):  # 10 B/s against a minimum of 1000
            while time.monotonic() - started < 5:
                server.recv(100)
        assert time.monotonic() - started < 2, "judged only after client_timeout"
        assert server.gave_up


def test_it_cuts_off_an_upload_body_that_never_starts_once_its_grace_is_spent(monkeypatch) -> None:
    monkeypatch.setattr(client_timeouts, "RATE_GRACE", 0.3, raising=False)
    server, client = _pair(idle=5, rate=1000)
    with server, client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            server.recv(100)
        assert time.monotonic() - started < 2, "waited for client_timeout"
        assert server.gave_up and server.gettimeout() == 5


@pytest.mark.serial  # timing-sensitive: run alone (make test)
def test_it_lets_an_upload_pause_after_a_fast_start(monkeypatch) -> None:
    monkeypatch.setattr(client_timeouts, "RATE_GRACE", 0.2, raising=False)
    server, client = _pair(idle=1.0, rate=1000)

    def send() -> None:
        client.send(b"x" * 2000)  # a second's worth and more: credit for a pause of up to idle
        time.sleep(0.6)
        client.send(b"x" * 1000)

    with server, client:
        sender = threading.Thread(target=send)
        sender.start()
        assert len(server.recv(4000)) == 2000
        assert len(server.recv(4000)) == 1000 and not server.gave_up
        sender.join()


def test_time_the_view_spends_between_reads_is_not_charged_to_the_client(monkeypatch) -> None:
    monkeypatch.setattr(client_timeouts, "RATE_GRACE", 0.2, raising=False)
    server, client = _pair(idle=5, rate=1000)
    with server, client:
        client.sendall(b"x" * 300)  # all there at once; the server is the slow one
        for _ in range(3):
            time.sleep(0.3)
            assert len(server.recv(100)) == 100
        assert not server.gave_up
