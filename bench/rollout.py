"""A rollout: hundreds of slow clients pulling (or pushing) at once while probes measure the server.

Pullers each download one blob, rate-limited on the client side (their socket's receive buffer is
small, so the server really waits on them), hash it and check the digest. Pushers each push a blob in
chunks, sending at a fixed rate. Meanwhile one client GETs the health endpoint and one a manifest,
every ``PROBE_INTERVAL`` seconds on a new connection each time (as a kubelet probes), and the server
tree's PSS is sampled. Clients run in a few processes (``selectors`` for pullers, threads for
pushers) so that the load generator itself stays cheap.
"""
from __future__ import annotations

import hashlib
import http.client
import multiprocessing
import os
import selectors
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from bench.load import quiet_child
from bench.servers import Endpoint, pss_bytes

MIB = 1024 * 1024
PROBE_INTERVAL = 0.1
WARMUP = 5.0  # seconds from the start of the load before probe latency is judged
PROCESSES = 10
RECEIVE_BUFFER = 128 * 1024
PUSH_PIECE = 64 * 1024


@dataclass(frozen=True)
class Probes:
    p99: float
    worst_after_warmup: float
    worst: float
    failed: int


@dataclass(frozen=True)
class RolloutResult:
    ok: int
    failed: int
    seconds: float
    health: Probes
    manifest: Probes
    peak_pss: int


class _Puller:
    __slots__ = ("sock", "head", "need", "got", "hasher", "started", "reading", "status", "done")

    def __init__(self, address: tuple[str, int], request: bytes) -> None:
        self.sock = socket.create_connection(address, timeout=60)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        self.sock.sendall(request)
        self.sock.setblocking(False)
        self.head = b""
        self.need = -1
        self.got = 0
        self.hasher = hashlib.sha256()
        self.started = time.monotonic()
        self.reading = False
        self.status = 0
        self.done = False

    def budget(self, rate: float, now: float) -> int:
        return int(rate * (now - self.started) + 64 * 1024 - self.got)

    def take(self, data: bytes) -> None:
        if self.need < 0:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.head[:end].decode("latin-1").lower().split("\r\n")
            self.status = int(lines[0][9:12])
            for line in lines[1:]:
                if line.startswith("content-length:"):
                    self.need = int(line.split(":", 1)[1])
            self.need = max(self.need, 0)
            data, self.head = self.head[end + 4:], b""
        self.hasher.update(data)
        self.got += len(data)


def _pull_process(address: tuple[str, int], path: str, count: int, rate: float, digest: str,
                  out: Any) -> None:
    quiet_child()
    request = f"GET {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nConnection: close\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    results: list[bool] = []
    pullers = []
    for _ in range(count):
        try:
            pullers.append(_Puller(address, request))
        except OSError:
            results.append(False)
    live = len(pullers)
    while live:
        now = time.monotonic()
        for puller in pullers:
            wanted = not puller.done and puller.budget(rate, now) > 16 * 1024
            if wanted != puller.reading:
                (selector.register if wanted else selector.unregister)(puller.sock, *(
                    (selectors.EVENT_READ, puller) if wanted else ()))
                puller.reading = wanted
        for key, _ in selector.select(timeout=0.02):
            puller = key.data
            try:
                data = puller.sock.recv(max(min(puller.budget(rate, time.monotonic()), 256 * 1024), 1))
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                puller.take(data)
            if not data or (0 <= puller.need <= puller.got):
                selector.unregister(puller.sock)
                puller.reading = False
                puller.sock.close()
                puller.done = True
                live -= 1
                results.append(puller.status == 200 and puller.got == puller.need
                               and "sha256:" + puller.hasher.hexdigest() == digest)
    out.send(results)
    out.close()


def _push_one(address: tuple[str, int], repo: str, size: int, chunk: int, rate: float) -> bool:
    piece = os.urandom(16) * (PUSH_PIECE // 16)
    hasher = hashlib.sha256()
    started = time.monotonic()
    conn = http.client.HTTPConnection(*address, timeout=120)
    try:
        conn.request("POST", f"/v2/{repo}/blobs/uploads/", headers={"Content-Length": "0"})
        response = conn.getresponse()
        response.read()
        location = response.getheader("Location") or ""
        offset = sent = 0
        while response.status == 202 and offset < size:
            length = min(chunk, size - offset)
            conn.putrequest("PATCH", location)
            for name, value in (("Content-Type", "application/octet-stream"), ("Content-Length", str(length)),
                                ("Content-Range", f"{offset}-{offset + length - 1}")):
                conn.putheader(name, value)
            conn.endheaders()
            left = length
            while left:
                part = piece[: min(len(piece), left)]
                conn.send(part)
                hasher.update(part)
                left -= len(part)
                sent += len(part)
                time.sleep(max(0.0, sent / rate - (time.monotonic() - started)))
            response = conn.getresponse()
            response.read()
            location = response.getheader("Location") or location
            offset += length
        if response.status != 202:
            return False
        sep = "&" if "?" in location else "?"
        conn.request("PUT", f"{location}{sep}digest=sha256:{hasher.hexdigest()}", headers={"Content-Length": "0"})
        response = conn.getresponse()
        response.read()
        return response.status == 201
    except OSError:
        return False
    finally:
        conn.close()


def _push_process(address: tuple[str, int], repo: str, count: int, size: int, chunk: int, rate: float,
                  out: Any) -> None:
    quiet_child()
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(_push_one(address, repo, size, chunk, rate)))
               for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.send(results)
    out.close()


def _probe(endpoint: Endpoint, path: str, headers: dict[str, str], stop: threading.Event,
           samples: list[tuple[float, float, int]], epoch: float) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
            conn.close()
        except OSError:
            status = 0
        took = time.monotonic() - started
        samples.append((started - epoch, took, status))
        stop.wait(max(0.0, PROBE_INTERVAL - took))


def _judge(samples: list[tuple[float, float, int]]) -> Probes:
    settled = [took * 1000 for at, took, _ in samples if at >= WARMUP] or [0.0]
    p99 = statistics.quantiles(settled, n=100, method="inclusive")[98] if len(settled) > 1 else settled[0]
    worst = max((took * 1000 for _, took, _ in samples), default=0.0)
    return Probes(p99, max(settled), worst, sum(1 for *_, status in samples if status != 200))


def run(endpoint: Endpoint, server_pids: Callable[[], list[int]], health_path: str, manifest_path: str,
        clients: int, start_clients: Callable[[Any, int], Any]) -> RolloutResult:
    """Start ``clients`` load clients with ``start_clients(ctx, share)`` (each returning a process
    and a pipe on which it sends its list of outcomes) and probe until they are all done."""
    ctx = multiprocessing.get_context("fork")
    stop = threading.Event()
    health: list[tuple[float, float, int]] = []
    manifest: list[tuple[float, float, int]] = []
    peak = [0]
    epoch = time.monotonic()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], pss_bytes(server_pids()))
            stop.wait(0.2)

    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    helpers = [threading.Thread(target=_probe, args=(endpoint, health_path, {}, stop, health, epoch)),
               threading.Thread(target=_probe, args=(endpoint, manifest_path, accept, stop, manifest, epoch)),
               threading.Thread(target=sample)]
    for helper in helpers:
        helper.start()
    procs: list[Any] = []
    outcomes: list[bool] = []
    try:
        for index in range(PROCESSES):
            share = clients // PROCESSES + (1 if index < clients % PROCESSES else 0)
            procs.append(start_clients(ctx, share))
        for process, pipe in procs:
            outcomes += pipe.recv()
            process.join()
    finally:
        for process, _ in procs:
            if process.is_alive():
                process.terminate()
        seconds = time.monotonic() - epoch
        stop.set()
        for helper in helpers:
            helper.join()
    ok = sum(outcomes)
    return RolloutResult(ok, clients - ok, seconds, _judge(health), _judge(manifest), peak[0])


def pullers(endpoint: Endpoint, path: str, rate: float, digest: str) -> Callable[[Any, int], Any]:
    def start(ctx: Any, share: int) -> Any:
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_pull_process, args=((endpoint.host, endpoint.port), path, share, rate,
                                                          digest, sender), daemon=True)
        process.start()
        sender.close()
        return process, receiver

    return start


def pushers(endpoint: Endpoint, repo: str, size: int, chunk: int, rate: float) -> Callable[[Any, int], Any]:
    def start(ctx: Any, share: int) -> Any:
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_push_process, args=((endpoint.host, endpoint.port), repo, share, size,
                                                          chunk, rate, sender), daemon=True)
        process.start()
        sender.close()
        return process, receiver

    return start
