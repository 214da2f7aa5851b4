"""Slow attackers under gunicorn: 500 connections trickling request heads and 200 trickling bodies (to
the token API, a manifest PUT and an upload PATCH), a byte every half second and reconnecting when
cut off, cannot slow down a well-behaved client: /health and a manifest GET keep answering fast.

Small bodies are answered 408 once ``client_timeout`` has passed; an upload trickling below
``min_body_rate`` is cut off; a head that never completes is closed without an answer.

On the default configuration with authentication on, 320 connections trickling the bodies a
request thread used to wait for (64 of each kind: the token endpoint's form, the token API chunked
and with ``Expect: 100-continue``, a manifest PUT chunked with valid credentials, a body on a route
that takes none) are all held by the worker's loop, and the same probes stay fast."""
from __future__ import annotations

import json
import selectors
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.faults.wire import Registry
from tests.support.auth import basic, write_htpasswd
from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)
TIMEOUT = 4  # [server] client_timeout
HEADS, BODIES = 500, 200
EACH_KIND = 64
ATTACK_SECONDS = 14
TRICKLE_EVERY = 0.5


@dataclass
class Trickler:
    kind: str
    head: bytes
    body: bytes
    sock: socket.socket | None = None
    sent: int = 0
    due: float = 0.0
    answers: list[int] = field(default_factory=list)
    reply: bytes = b""


def _requests(locations: list[str]) -> Iterator[tuple[str, bytes, bytes]]:
    token = json.dumps({"username": "alice", "password": "x" * 200}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {}, "layers": [], "padding": "x" * 300}).encode()
    for n in range(HEADS):
        yield "head", f"GET /v2/team/app/manifests/v{n} HTTP/1.1\r\nHost: x\r\nUser-Agent: {'y' * 40}".encode(), b""
    for n in range(BODIES):
        if n % 3 == 0:
            yield "token", (b"POST /api/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(token)), token
        elif n % 3 == 1:
            yield "manifest", (b"PUT /v2/team/app/manifests/t%d HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               b"application/vnd.oci.image.manifest.v1+json\r\nContent-Length: %d\r\n\r\n"
                               % (n, len(manifest))), manifest
        else:
            location = locations[n // 3]
            yield "upload", (f"PATCH {location} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                             f"Content-Length: 100000\r\n\r\n").encode(), b"z" * 100000


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


def _bodies(authorization: str) -> Iterator[tuple[str, bytes, bytes]]:
    """The bodies that went to a request thread before the loop read every body: EACH_KIND of each."""
    form = b"grant_type=password&username=alice&password=" + b"x" * 200
    token = json.dumps({"username": "alice", "password": "x" * 200}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {}, "layers": [], "padding": "x" * 300}).encode()
    kinds = [
        ("token endpoint", b"POST /auth/token HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           b"application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(form), form),
        ("token API chunked", b"POST /api/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n", _chunked(token)),
        ("manifest PUT chunked", b"PUT /v2/team/app/manifests/slow HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                                 b"Content-Type: application/vnd.oci.image.manifest.v1+json\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n" % authorization.encode(), _chunked(manifest)),
        ("token API expecting 100-continue", b"POST /api/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                             b"application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                                             % len(token), token),
        ("a body on a route that takes none", b"POST /v2/ HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n",
         b"y" * 300),
    ]
    for _ in range(EACH_KIND):
        yield from kinds


class Attack:
    """One thread driving every trickler: the head of a body trickler goes at once, then a byte of the
    rest every TRICKLE_EVERY seconds; a trickler cut off reconnects and starts again."""

    def __init__(self, host: str, tricklers: list[Trickler]) -> None:
        self.address = (host.rsplit(":", 1)[0], int(host.rsplit(":", 1)[1]))
        self.tricklers = tricklers
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, t: Trickler, now: float) -> None:
        t.sock = socket.create_connection(self.address, timeout=5)
        t.sock.setblocking(False)
        t.sent, t.reply = 0, b""
        if t.kind != "head":
            t.sock.send(t.head)
        t.due = now + TRICKLE_EVERY
        self.selector.register(t.sock, selectors.EVENT_READ, t)

    def _drop(self, t: Trickler) -> None:
        assert t.sock is not None
        self.selector.unregister(t.sock)
        t.sock.close()
        t.sock = None
        status = int(t.reply[9:12]) if t.reply.startswith(b"HTTP/1.1 ") else 0
        t.answers.append(status)

    def _run(self) -> None:
        now = time.monotonic()
        for t in self.tricklers:
            self._connect(t, now)
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.05):
                t = key.data
                try:
                    data = t.sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                t.reply += data
                if not data:
                    self._drop(t)
            now = time.monotonic()
            for t in self.tricklers:
                if t.sock is None:
                    self._connect(t, now)
                elif now >= t.due:
                    payload = t.head if t.kind == "head" else t.body
                    if t.sent < len(payload):
                        try:
                            t.sent += t.sock.send(payload[t.sent:t.sent + 1])
                        except OSError:
                            pass
                    t.due = now + TRICKLE_EVERY
        for t in self.tricklers:
            if t.sock is not None:
                t.sock.close()

    def __enter__(self) -> "Attack":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def _probe(client: Registry, path: str, latencies: list[float], failures: list[str],
           stop: threading.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            reply = client.request("GET", path, headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
            if reply.status != 200:
                failures.append(f"{path}: {reply.status}")
        except OSError as exc:
            failures.append(f"{path}: {exc}")
        latencies.append(time.monotonic() - started)
        stop.wait(0.1)


def _measure(client: Registry, host: str, tricklers: list[Trickler]) -> dict[str, list[float]]:
    """Latencies of /health and a manifest GET polled every 100 ms while ``tricklers`` attack; no failure."""
    latencies: dict[str, list[float]] = {"/health": [], "/v2/team/app/manifests/v1": []}
    failures: list[str] = []
    stop = threading.Event()
    with Attack(host, tricklers):
        time.sleep(1.0)  # every attacker connected and trickling
        probes = [threading.Thread(target=_probe, args=(client, path, found, failures, stop))
                  for path, found in latencies.items()]
        for probe in probes:
            probe.start()
        time.sleep(ATTACK_SECONDS)
        stop.set()
        for probe in probes:
            probe.join()
    assert failures == []
    for path, found in latencies.items():
        p99 = statistics.quantiles(found, n=100, method="inclusive")[98]
        assert len(found) > ATTACK_SECONDS * 5 and p99 < 0.25, (path, len(found), p99, max(found))
    return latencies


@pytest.fixture
def server(start_registry) -> RegistryServer:
    return start_registry(SVC_SERVER_CLIENT_TIMEOUT=str(TIMEOUT))


@pytest.fixture
def default_server(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    """The default configuration (client_timeout 60 s, min_body_rate 4 KiB/s), authentication on."""
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_HTPASSWD_FILE=str(users))


def test_it_keeps_answering_well_behaved_clients_under_slow_attackers(server: RegistryServer) -> None:
    client = Registry(server.host, timeout=10)
    manifest_digest, _ = client.push_image("team/app", "v1", [b"layer"])
    locations = []
    for _ in range(BODIES // 3 + 1):
        reply = client.request("POST", "/v2/team/app/blobs/uploads/")
        assert reply.status == 202
        locations.append(reply.headers["location"])
    tricklers = [Trickler(kind, head, body) for kind, head, body in _requests(locations)]
    _measure(client, server.host, tricklers)

    by_kind: dict[str, list[int]] = {}
    for t in tricklers:
        by_kind.setdefault(t.kind, []).extend(t.answers)
    # Each was cut off (and came back) about every TIMEOUT seconds: small bodies with a 408, heads
    # without an answer, uploads once they fell below the minimum rate.
    assert set(by_kind["token"]) == {408} and set(by_kind["manifest"]) == {408}, by_kind
    assert set(by_kind["head"]) == {0} and len(by_kind["head"]) >= HEADS, len(by_kind["head"])
    assert len(by_kind["upload"]) >= BODIES // 3 and set(by_kind["upload"]) <= {0, 400}, by_kind["upload"]
    assert client.request("GET", f"/v2/team/app/manifests/{manifest_digest}").status == 200
    log = server.log_path.read_text()
    assert "Traceback" not in log and '"status":500' not in log


def test_it_holds_slow_bodies_of_every_kind_in_its_loop_on_the_default_config(default_server: RegistryServer) -> None:
    authorization = basic("alice", "wonderland")
    client = Registry(default_server.host, headers={"Authorization": authorization}, timeout=10)
    client.push_image("team/app", "v1", [b"layer"])
    tricklers = [Trickler(kind, head, body) for kind, head, body in _bodies(authorization)]
    assert len(tricklers) == 5 * EACH_KIND

    _measure(client, default_server.host, tricklers)

    # No body was complete, nor client_timeout (60 s) over: every attacker was still connected and
    # unanswered, held by the loop, except for the 100 Continue the loop owes a client that waits.
    assert all(t.answers == [] for t in tricklers), [(t.kind, t.answers) for t in tricklers if t.answers]
    for t in tricklers:
        assert t.reply == (b"HTTP/1.1 100 Continue\r\n\r\n" if "100-continue" in t.kind else b""), (t.kind, t.reply)
    log = default_server.log_path.read_text()
    assert "Traceback" not in log and '"status":500' not in log
