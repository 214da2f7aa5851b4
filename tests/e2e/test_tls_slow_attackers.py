"""Slow TLS clients under gunicorn with ``[server] tls_cert``: 200 connections trickling a ClientHello
a byte every half second, 200 silent after connecting, and 40 readers of a large blob that read
nothing, all reconnecting when cut off, cannot slow down a well-behaved HTTPS client: /health (a new
connection and handshake each time) and a manifest GET keep a p99 under 250 ms. The handshake
shares the first request head's ``client_timeout``: a trickled one is cut off with a warning and
counted, a silent one closed quietly; a reader that stops is cut off as over plain HTTP."""
from __future__ import annotations

import http.client
import os
import selectors
import socket
import ssl
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.faults.wire import Registry
from tests.support.certs import CA, tls_env
from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)
TIMEOUT = 4  # [server] client_timeout
ATTACK_SECONDS = 14
TRICKLE_EVERY = 0.5
BLOB = 8 * 1024 * 1024
STALLED = "stalled reader"


def _client_hello(ca: CA) -> bytes:
    """The first flight of a real TLS client, to trickle."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ca.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


class Attackers:
    """One thread driving every attacking connection: each sends a byte of its ``trickle`` every
    TRICKLE_EVERY seconds and reconnects when the server closes it (``closed`` counts those per
    kind). A stalled reader never reads, so it cannot see the server close it: it is replaced by a
    new one every TIMEOUT + 1 seconds."""

    def __init__(self, kinds: dict[str, tuple[int, Callable[[], tuple[socket.socket, bytes]]]]) -> None:
        self.kinds = kinds
        self.closed = {kind: 0 for kind in kinds}
        self.selector = selectors.DefaultSelector()
        self.stalled: list[tuple[socket.socket, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, kind: str) -> None:
        sock, trickle = self.kinds[kind][1]()
        if kind == STALLED:
            self.stalled.append((sock, time.monotonic() + TIMEOUT + 1))
            return
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, [kind, trickle, time.monotonic() + TRICKLE_EVERY])

    def _run(self) -> None:
        for kind, (count, _open) in self.kinds.items():
            for _ in range(count):
                self._connect(kind)
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.05):
                try:
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.selector.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]
                    self.closed[key.data[0]] += 1
                    self._connect(key.data[0])
            now = time.monotonic()
            for key in list(self.selector.get_map().values()):
                trickle, due = key.data[1], key.data[2]
                if trickle and now >= due:
                    try:
                        key.data[1] = trickle[key.fileobj.send(trickle[:1]):]  # type: ignore[union-attr]
                    except OSError:
                        pass
                    key.data[2] = now + TRICKLE_EVERY
            for sock, renew in [entry for entry in self.stalled if entry[1] <= now]:
                self.stalled.remove((sock, renew))
                sock.close()
                self._connect(STALLED)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        for sock, _renew in self.stalled:
            sock.close()

    def __enter__(self) -> "Attackers":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def _probe(call: Callable[[], int], latencies: list[float], failures: list[str], stop: threading.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            status = call()
            if status != 200:
                failures.append(str(status))
        except OSError as exc:
            failures.append(repr(exc))
        latencies.append(time.monotonic() - started)
        stop.wait(0.1)


@pytest.fixture
def server(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> Iterator[tuple[RegistryServer, CA]]:
    ca = CA(tmp_path / "ca")
    (tmp_path / "tls").mkdir()
    issued = ca.issue(tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem")
    yield start_registry(ca_file=ca.cert_file, SVC_SERVER_CLIENT_TIMEOUT=str(TIMEOUT), **tls_env(issued)), ca


def test_slow_and_silent_tls_clients_leave_probes_fast(server: tuple[RegistryServer, CA]) -> None:
    registry, ca = server
    client = Registry(registry.host, timeout=10, context=ca.client_context())
    digest, _ = client.push_image("team/app", "v1", [b"layer"])
    layer = client.push_blob("team/app", os.urandom(BLOB))
    hello = _client_hello(ca)

    def connect(receive_buffer: int = 0) -> socket.socket:
        sock = socket.socket()
        if receive_buffer:  # before connecting: a small window, no autotuning
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", registry.port))
        return sock

    def stalled_reader() -> tuple[socket.socket, bytes]:
        tls = ca.client_context().wrap_socket(connect(4096), server_hostname="127.0.0.1")
        tls.sendall(f"GET /v2/team/app/blobs/{layer} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return tls, b""

    kinds = {"hello trickler": (200, lambda: (connect(), hello)), "silent": (200, lambda: (connect(), b"")),
             STALLED: (40, stalled_reader)}
    latencies: dict[str, list[float]] = {"health": [], "manifest": []}
    failures: list[str] = []
    stop = threading.Event()

    def health() -> int:
        connection = http.client.HTTPSConnection("127.0.0.1", registry.port, context=ca.client_context(), timeout=10)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status
        finally:
            connection.close()

    kept = http.client.HTTPSConnection("127.0.0.1", registry.port, context=ca.client_context(), timeout=10)

    def manifest() -> int:
        kept.request("GET", f"/v2/team/app/manifests/{digest}",
                      headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        response = kept.getresponse()
        response.read()
        return response.status

    with Attackers(kinds) as attack:
        time.sleep(1.5)  # every attacker connected
        probes = [threading.Thread(target=_probe, args=(call, latencies[name], failures, stop))
                  for name, call in (("health", health), ("manifest", manifest))]
        for probe in probes:
            probe.start()
        time.sleep(ATTACK_SECONDS)
        stop.set()
        for probe in probes:
            probe.join()
    kept.close()

    assert failures == []
    for name, found in latencies.items():
        p99 = statistics.quantiles(found, n=100, method="inclusive")[98]
        assert len(found) > ATTACK_SECONDS * 4 and p99 < 0.25, (name, len(found), p99, max(found))
    # Each kind was cut off (and came back) about every TIMEOUT seconds.
    rounds = ATTACK_SECONDS // TIMEOUT - 1
    assert attack.closed["hello trickler"] >= 200 * rounds and attack.closed["silent"] >= 200 * rounds, attack.closed
    assert registry.metric("registry_client_timeouts_total", phase="handshake") >= 200 * rounds
    assert registry.metric("registry_client_timeouts_total", phase="response") >= 40 * rounds
    log = registry.log_path.read_text()
    assert "Traceback" not in log and '"status":500' not in log
    assert "TLS handshake not complete within 4s" in log
