"""A client that tries HTTPS first on this plain-HTTP port (docker, podman and skopeo do with an
insecure registry) is closed on at once, so it falls back to HTTP without waiting; bytes that cannot
be HTTP get a 400 at once; neither leaves a warning or a traceback in the log. At log level debug
each worker says so once, in one JSON line, however many probes it closes."""
from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)

CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + b"\x00" * 64


def _answer_within(host: str, data: bytes, seconds: float) -> bytes:
    address = (host.rsplit(":", 1)[0], int(host.rsplit(":", 1)[1]))
    with socket.create_connection(address, timeout=seconds) as sock:
        sock.sendall(data)
        started, received = time.monotonic(), b""
        while chunk := sock.recv(4096):
            received += chunk
        assert time.monotonic() - started < seconds
        return received


def test_a_tls_handshake_is_closed_at_once_and_logged_quietly(registry) -> None:
    for _ in range(3):
        assert _answer_within(registry.host, CLIENT_HELLO, 1.0) == b""
    log = registry.log_path.read_text()
    assert "Traceback" not in log and '"level":"warning"' not in log and "TLS" not in log  # debug level only
    assert _answer_within(registry.host, b"\x00\x01garbage\r\n", 1.0).startswith(b"HTTP/1.1 400")


def _probe_lines(server: RegistryServer) -> list[dict[str, Any]]:
    return [e for e in server.log_entries() if "TLS handshake" in e["message"]]


def test_at_debug_each_worker_logs_its_tls_probes_once_as_one_json_line(
        start_registry: Callable[..., RegistryServer]) -> None:
    server = start_registry(workers=2, SVC_SERVER_LOG_LEVEL="debug")
    workers = set(server.pids()) - {server.process.pid}  # type: ignore[union-attr]
    assert len(workers) == 2, server.pids()
    probes = 0
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Probes arriving together are accepted by both workers; go on until each has closed one...
        deadline = time.monotonic() + 60
        while {e["pid"] for e in _probe_lines(server)} != workers and time.monotonic() < deadline:
            answers = list(pool.map(lambda _: _answer_within(server.host, CLIENT_HELLO, 5.0), range(8)))
            assert answers == [b""] * 8
            probes += 8
        # ...then as many again: none of them adds a line.
        assert list(pool.map(lambda _: _answer_within(server.host, CLIENT_HELLO, 5.0), range(probes))) \
            == [b""] * probes
    lines = _probe_lines(server)  # every line parses as JSON (log_entries), a worker writes before closing
    assert sorted(line["pid"] for line in lines) == sorted(workers), (probes, lines)
    for line in lines:
        assert line["level"] == "debug" and line["logger"] == "gunicorn.error", line
        assert "traceback" not in line and "127.0.0.1" in line["message"], line
    text = server.log_path.read_text()
    assert "Traceback" not in text and '"level":"warning"' not in text
    assert sum("TLS handshake" in raw for raw in text.splitlines()) == 2  # one physical line each
