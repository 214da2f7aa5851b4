"""Fixed-duration request load over keep-alive connections, in a few client processes.

Each process drives its share of the connections from one ``selectors`` loop over raw sockets with a
prebuilt request, so the client spends microseconds per request and the server, not the client, is
what is measured. A response is complete when its headers and Content-Length bytes have arrived (a
HEAD response has no body whatever its Content-Length says).
"""
from __future__ import annotations

import multiprocessing
import selectors
import signal
import socket
import statistics
import time
from dataclasses import dataclass

from bench.servers import Endpoint


@dataclass(frozen=True)
class LoadResult:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def build_request(method: str, path: str, endpoint: Endpoint, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {endpoint.netloc}"]
    if endpoint.authorization:
        lines.append(f"Authorization: {endpoint.authorization}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class _Conn:
    __slots__ = ("sock", "buf", "started", "need")

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.started = 0.0
        self.need = -1  # total bytes of the response once its headers are parsed


def _response_size(buf: bytearray, head: bool) -> tuple[int, int]:
    """(bytes of the whole response or -1 if headers are incomplete, status)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return -1, 0
    header = bytes(buf[:end]).lower()
    status = int(header[9:12])
    length = 0
    at = header.find(b"\r\ncontent-length:")
    if at >= 0 and not head and status not in (204, 304):
        stop = header.find(b"\r\n", at + 2)
        length = int(header[at + 17: stop if stop >= 0 else len(header)])
    elif b"transfer-encoding: chunked" in header and not head:
        raise RuntimeError("chunked responses are not supported by the load client")
    return end + 4 + length, status


def quiet_child() -> None:
    """In a client process: Ctrl-C is the parent's to handle, and its SIGTERM ends us silently."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _drive(address: tuple[str, int], request: bytes, connections: int, duration: float,
           head: bool, out: multiprocessing.connection.Connection) -> None:
    quiet_child()
    sel = selectors.DefaultSelector()
    latencies: list[float] = []
    errors = 0
    conns = [_Conn(address) for _ in range(connections)]
    start = time.perf_counter()
    deadline = start + duration
    for conn in conns:
        conn.started = time.perf_counter()
        conn.sock.send(request)
        sel.register(conn.sock, selectors.EVENT_READ, conn)
    open_conns = len(conns)
    while open_conns:
        for key, _ in sel.select(timeout=5):
            conn: _Conn = key.data
            data = conn.sock.recv(262144)
            if not data:
                raise RuntimeError("the server closed a keep-alive connection")
            conn.buf += data
            if conn.need < 0:
                conn.need, status = _response_size(conn.buf, head)
                if conn.need >= 0 and not 200 <= status < 300:
                    errors += 1
            if conn.need < 0 or len(conn.buf) < conn.need:
                continue
            now = time.perf_counter()
            latencies.append(now - conn.started)
            del conn.buf[: conn.need]
            conn.need = -1
            if now >= deadline:
                sel.unregister(conn.sock)
                conn.sock.close()
                open_conns -= 1
                continue
            conn.started = now
            conn.sock.send(request)
    out.send((latencies, errors, time.perf_counter() - start))
    out.close()


def hammer(endpoint: Endpoint, method: str, path: str, headers: dict[str, str],
           connections: int = 16, duration: float = 10.0, processes: int = 2) -> LoadResult:
    """Keep ``connections`` requests in flight for ``duration`` seconds; latency percentiles in ms."""
    request = build_request(method, path, endpoint, headers)
    ctx = multiprocessing.get_context("fork")
    per_process = [connections // processes + (1 if i < connections % processes else 0)
                   for i in range(processes)]
    pipes, workers = [], []
    for share in per_process:
        receiver, sender = ctx.Pipe(duplex=False)
        worker = ctx.Process(target=_drive, args=((endpoint.host, endpoint.port), request, share,
                                                  duration, method == "HEAD", sender), daemon=True)
        worker.start()
        sender.close()
        pipes.append(receiver)
        workers.append(worker)
    latencies: list[float] = []
    errors, seconds = 0, 0.0
    try:
        for receiver, worker in zip(pipes, workers, strict=True):
            lat, err, took = receiver.recv()
            worker.join()
            latencies += lat
            errors += err
            seconds = max(seconds, took)
    except BaseException:  # interrupted: the clients must not outlive the servers they load
        for worker in workers:
            worker.terminate()
        raise
    if not latencies:
        return LoadResult(0, errors, seconds, 0.0, 0.0)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return LoadResult(len(latencies), errors, seconds, cuts[49] * 1000, cuts[98] * 1000)
