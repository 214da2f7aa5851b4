"""Slow and stalled clients under gunicorn ([server] client_timeout, here 2 s): a trickled request
head, a trickled body of any route and encoding, or a stalled upload or download cannot hold a
worker thread, partial data is discarded, and everyone else keeps being served. A transfer that is
slow but moving is never cut off."""
from __future__ import annotations

import http.client
import io
import json
import os
import socket
import threading
import time
from typing import Iterator

import pytest

from tests.faults.wire import MiB, Registry, digest, read_reply, send_partial, storage_fds, upload_files, \
    wait_until
from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)
TIMEOUT = 2
SLOW_CLIENTS = 32  # twice the 2 x 8 worker threads
# Connections queue for a thread of the worker that accepted them, and a worker's 8 threads let go
# of their slow clients TIMEOUT after taking them: at worst (all on one worker) in this many rounds.
ROUNDS = SLOW_CLIENTS // 8 + 1
OCTET = "application/octet-stream"
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
TOKEN_FORM = b"grant_type=password&username=alice&password=" + b"x" * 300
TOKEN_JSON = json.dumps({"username": "alice", "password": "x" * 300}).encode()
MANIFEST = json.dumps({"schemaVersion": 2, "padding": "x" * 300}).encode()


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


# Bodies that used to be read by a request thread, the thread waiting on the client as it trickled:
# kind -> method, path, headers, the body as it goes over the wire.
SLOW_BODIES: dict[str, tuple[str, str, dict[str, str], bytes]] = {
    "token endpoint": ("POST", "/auth/token", {"Content-Type": FORM, "Content-Length": str(len(TOKEN_FORM))},
                       TOKEN_FORM),
    "token API chunked": ("POST", "/api/tokens", {"Content-Type": JSON, "Transfer-Encoding": "chunked"},
                          chunked(TOKEN_JSON)),
    "manifest PUT chunked": ("PUT", "/v2/team/app/manifests/slow",
                             {"Content-Type": "application/vnd.oci.image.manifest.v1+json",
                              "Transfer-Encoding": "chunked"}, chunked(MANIFEST)),
    "token API expecting 100-continue": ("POST", "/api/tokens", {"Content-Type": JSON, "Expect": "100-continue",
                                                                "Content-Length": str(len(TOKEN_JSON))}, TOKEN_JSON),
    "a body on a route that takes none": ("POST", "/v2/", {"Content-Length": "300"}, b"y" * 300),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path_factory.mktemp("slow"), {"SVC_SERVER_CLIENT_TIMEOUT": str(TIMEOUT)})
    yield server.start()
    server.stop()


@pytest.fixture(autouse=True)
def no_tracebacks(server: RegistryServer) -> Iterator[None]:
    """Cutting a client off is routine: one warning line, never a stack trace or a 500."""
    yield
    log = server.log_path.read_text()
    assert "Traceback" not in log and '"status":500' not in log


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True if the server closes (or answers and closes) the connection within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.fixture
def slowloris(server: RegistryServer) -> Iterator[list[socket.socket]]:
    """More connections than the server has threads, each trickling its headers a byte at a time."""
    stop = threading.Event()
    host, port = server.host.rsplit(":", 1)
    socks = []
    for _ in range(SLOW_CLIENTS):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(sock)

    def trickle() -> None:
        while not stop.wait(0.25):
            for sock in socks:
                try:
                    sock.send(b"a")
                except OSError:
                    pass

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    yield socks
    stop.set()
    thread.join()
    for sock in socks:
        sock.close()


def test_it_serves_others_while_clients_trickle_their_headers(server, slowloris) -> None:
    time.sleep(0.5)  # every worker thread now holds a trickling connection
    started = time.monotonic()
    reply = Registry(server.host, timeout=30).request("GET", "/v2/_catalog")
    assert reply.status == 200
    assert time.monotonic() - started < ROUNDS * TIMEOUT + 3
    assert all(closed_by_server(sock, ROUNDS * TIMEOUT + 3) for sock in slowloris)
    assert "request head not complete within 2s" in server.log_path.read_text()


def test_it_cuts_off_a_stalled_upload_and_discards_its_partial_chunk(server) -> None:
    client = Registry(server.host)
    blob = os.urandom(2 * MiB)
    location = client.request("POST", "/v2/team/app/blobs/uploads/").header("Location")
    assert client.request("PATCH", location, blob[:MiB], {"Content-Type": OCTET}).status == 202
    stalled = send_partial(server.host, "PATCH", location, {"Content-Length": str(MiB), "Content-Type": OCTET},
                           blob[MiB:MiB + 300_000])
    assert client.request("GET", "/v2/").status == 200  # others are served meanwhile
    stalled.settimeout(TIMEOUT + 5)
    status, body = read_reply(stalled)
    stalled.close()
    assert status in (0, 400), body  # an error in the envelope, or just the closed connection
    wait_until(lambda: not storage_fds(server), what="the upload file to be closed")
    assert client.request("GET", location).header("Range") == f"0-{MiB - 1}"
    assert upload_files(server)[location.rsplit("/", 1)[1]] == MiB
    assert client.request("PATCH", location, blob[MiB:], {"Content-Type": OCTET}).status == 202
    assert client.request("PUT", f"{location}?digest={digest(blob)}").status == 201


def test_it_cuts_off_a_stalled_monolithic_upload_and_a_stalled_manifest(server) -> None:
    client = Registry(server.host)
    sessions_before = len(upload_files(server))
    blob = os.urandom(MiB)
    stalled_blob = send_partial(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(blob)}",
                                {"Content-Length": str(len(blob)), "Content-Type": OCTET}, blob[:1000])
    stalled_manifest = send_partial(server.host, "PUT", "/v2/team/app/manifests/v1",
                                    {"Content-Length": "500",
                                     "Content-Type": "application/vnd.oci.image.manifest.v1+json"},
                                    b'{"schemaVersion": 2,')
    stalled_blob.settimeout(TIMEOUT + 5)
    status, body = read_reply(stalled_blob)
    stalled_blob.close()
    assert status in (0, 400), body
    # A small body (a manifest) has one deadline for all of it: past it, a 408 in the OCI envelope.
    stalled_manifest.settimeout(TIMEOUT + 5)
    status, body = read_reply(stalled_manifest)
    stalled_manifest.close()
    assert status == 408 and json.loads(body)["errors"][0]["code"] == "MANIFEST_INVALID", body
    wait_until(lambda: len(upload_files(server)) == sessions_before, what="the stalled upload to be discarded")
    assert client.request("HEAD", f"/v2/team/app/blobs/{digest(blob)}").status == 404


def test_it_cuts_off_a_stalled_token_request(server) -> None:
    stalled = send_partial(server.host, "POST", "/api/tokens", {"Content-Length": "200",
                                                               "Content-Type": "application/json"},
                           b'{"username": "alice", "pass')
    stalled.settimeout(TIMEOUT + 5)
    status, body = read_reply(stalled)
    stalled.close()
    assert status == 408 and "not received within" in json.loads(body)["error"], body


def test_it_lets_go_of_a_download_the_client_stopped_reading(server) -> None:
    client = Registry(server.host)
    blob = os.urandom(32 * MiB)
    client.push_blob("team/app", blob)
    stalled = send_partial(server.host, "GET", f"/v2/team/app/blobs/{digest(blob)}", {}, b"")
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.recv(1000)
    wait_until(lambda: not storage_fds(server), timeout=TIMEOUT + 5, what="the blob file to be closed")
    stalled.close()


def test_it_never_cuts_off_a_slow_upload_that_keeps_moving(server) -> None:
    client = Registry(server.host)
    blob = os.urandom(64 * 1024)
    sock = send_partial(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(blob)}",
                        {"Content-Length": str(len(blob)), "Content-Type": OCTET}, b"")
    pieces = [blob[i:i + 8192] for i in range(0, len(blob), 8192)]
    for piece in pieces:  # 8 pieces over 4 s: twice the timeout in total, never idle for long
        sock.sendall(piece)
        time.sleep(0.5)
    sock.settimeout(10)
    status, body = read_reply(sock)
    sock.close()
    assert status == 201, body
    assert client.request("GET", f"/v2/team/app/blobs/{digest(blob)}").body == blob


@pytest.mark.parametrize("kind", SLOW_BODIES)
def test_it_reads_a_trickled_body_of_any_route_and_encoding_without_a_thread(server, kind: str) -> None:
    method, path, headers, body = SLOW_BODIES[kind]
    socks = [send_partial(server.host, method, path, headers, body[:1]) for _ in range(SLOW_CLIENTS)]
    stop = threading.Event()

    def trickle() -> None:
        for sent in range(1, len(body) - 1):
            if stop.wait(0.25):
                return
            for sock in socks:
                try:
                    sock.send(body[sent:sent + 1])
                except OSError:
                    pass

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # twice as many tricklers as the server has request threads
        client = Registry(server.host, timeout=30)
        for _ in range(3):
            started = time.monotonic()
            assert client.request("GET", "/v2/").status == 200
            assert time.monotonic() - started < 1.0, f"a request waited behind trickling {kind} bodies"
    finally:
        stop.set()
        thread.join()
    for sock in socks:
        sock.settimeout(TIMEOUT + 5)
        status, reply = read_reply(sock)
        sock.close()
        assert status == 408, (kind, status, reply)
        answer = json.loads(reply)
        if path.startswith("/v2/"):
            assert answer["errors"][0]["code"] in ("MANIFEST_INVALID", "UNKNOWN"), reply
        else:
            assert "not received within 2 seconds" in answer["error"], reply


@pytest.mark.parametrize("method, path, headers", [
    ("POST", "/v2/", {"Content-Length": str(100 * MiB)}),
    ("POST", "/api/tokens", {"Content-Length": str(MiB), "Content-Type": JSON}),
    ("PUT", "/v2/team/app/manifests/big", {"Content-Length": str(5 * MiB), "Content-Type": "application/json"}),
])
def test_it_refuses_a_body_over_its_bound_before_reading_it(server, method: str, path: str,
                                                            headers: dict[str, str]) -> None:
    sock = send_partial(server.host, method, path, headers, b"z" * 1000)
    sock.settimeout(1.0)
    status, reply = read_reply(sock)
    sock.close()
    assert status == 413, reply
    answer = json.loads(reply)
    assert "over the limit" in (answer["errors"][0]["message"] if path.startswith("/v2/") else answer["error"])


def test_it_refuses_a_chunked_body_once_it_grows_over_its_bound(server) -> None:
    sock = send_partial(server.host, "POST", "/api/tokens", {"Transfer-Encoding": "chunked", "Content-Type": JSON},
                        b"8000\r\n" + b"{" * 0x8000 + b"\r\n8001\r\n")
    sock.settimeout(1.0)
    status, reply = read_reply(sock)
    sock.close()
    assert status == 413 and "over the limit of 65536 bytes" in json.loads(reply)["error"], reply


def test_it_answers_100_continue_itself_then_takes_the_body(server) -> None:
    sock = send_partial(server.host, "POST", "/auth/token", {"Content-Type": FORM, "Expect": "100-continue",
                                                             "Content-Length": str(len(TOKEN_FORM))}, b"")
    sock.settimeout(1.0)
    assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    sock.sendall(TOKEN_FORM)
    sock.settimeout(10)
    status, reply = read_reply(sock)
    sock.close()
    assert status == 200 and json.loads(reply)["token"], reply


class _Replies(io.BytesIO):
    """Responses read one after another from the bytes of one connection (http.client closes the
    file it was given after each)."""

    def makefile(self, *_args: object) -> "_Replies":
        return self

    def close(self) -> None:
        pass


def test_it_answers_pipelined_requests_behind_bodies_of_every_encoding(server) -> None:
    form = b"grant_type=password&username=alice&password=secret"
    requests = [
        b"POST /auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n%s"
        % (FORM.encode(), b"5\r\n" + form[:5] + b"\r\n" + chunked(form[5:])),
        b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v2/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        b"POST /auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
        % (FORM.encode(), len(form), form),
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]
    host, port = server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"".join(requests))
        replies = bytearray()
        while data := sock.recv(65536):
            replies += data
    stream = _Replies(bytes(replies))
    statuses = []
    while stream.tell() < len(replies):
        reply = http.client.HTTPResponse(stream)  # type: ignore[arg-type]
        reply.begin()
        reply.read()
        statuses.append(reply.status)
    assert statuses == [200, 200, 405, 200, 200]
