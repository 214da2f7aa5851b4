"""A client that tries HTTPS first on this plain-HTTP port (docker, podman and skopeo do with an
insecure registry) is closed on at once, so it falls back to HTTP without waiting; bytes that cannot
be HTTP get a 400 at once; neither leaves a warning or a traceback in the log."""
from __future__ import annotations

import socket
import time

import pytest

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
