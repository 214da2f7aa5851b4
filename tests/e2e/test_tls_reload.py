"""A certificate replaced on disk is served to new connections within seconds, with no restart, while a
connection opened before keeps its own and goes on answering; SIGHUP with a pair that does not load
keeps the running server and its certificate."""
from __future__ import annotations

import http.client
import os
import signal
import time
from pathlib import Path
from typing import Callable

import pytest
from cryptography import x509

from tests.support.certs import CA, Issued, served_certificate, tls_env
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path / "ca")


@pytest.fixture
def issued(ca: CA, tmp_path: Path) -> Issued:
    (tmp_path / "tls").mkdir()
    return ca.issue(tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem")


def _serials(server: RegistryServer, ca: CA, count: int) -> set[int]:
    """The serials that ``count`` new connections are served (workers take them in turn, roughly)."""
    return {served_certificate("127.0.0.1", server.port, ca).serial_number for _ in range(count)}


def _wait_for_serial(server: RegistryServer, ca: CA, serial: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _serials(server, ca, 10) != {serial}:
        assert time.monotonic() < deadline, f"new connections not served serial {serial:x} after {timeout} s"
        time.sleep(0.2)


def _wait_for_reloads(server: RegistryServer, workers: set[int], timeout: float = 20) -> list[dict]:
    """The server's log once every worker has said it reloaded. Each worker looks at the files
    from its own loop, about once a second, so the new connections above may all have been taken
    by one worker while another has yet to look."""
    deadline = time.monotonic() + timeout
    while True:
        entries = server.log_entries("gunicorn.error")
        reloads = {e["pid"] for e in entries if e["message"].startswith("TLS certificate reloaded")}
        if reloads == workers:
            return entries
        assert reloads <= workers and time.monotonic() < deadline, entries
        time.sleep(0.2)


def _peer_serial(connection: http.client.HTTPSConnection) -> int:
    der = connection.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
    return x509.load_der_x509_certificate(der).serial_number


def _health(connection: http.client.HTTPSConnection) -> int:
    connection.request("GET", "/health")
    response = connection.getresponse()
    response.read()
    return response.status


def test_a_replaced_certificate_reaches_new_connections_without_a_restart(
        start_registry: Callable[..., RegistryServer], ca: CA, issued: Issued) -> None:
    server = start_registry(workers=2, ca_file=ca.cert_file, **tls_env(issued))
    pids = server.pids()
    kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=ca.client_context(), timeout=10)
    assert _health(kept) == 200 and _peer_serial(kept) == issued.serial
    assert _serials(server, ca, 6) == {issued.serial}

    renewed = ca.issue(issued.cert, issued.key)  # in place, the key first: a moment with a mismatched pair

    _wait_for_serial(server, ca, renewed.serial)
    assert _health(kept) == 200 and _peer_serial(kept) == issued.serial  # open connections keep theirs
    assert server.pids() == pids  # no worker restarted
    workers = set(pids) - {server.process.pid}  # type: ignore[union-attr]
    entries = _wait_for_reloads(server, workers)
    assert not [e for e in entries if e["level"] in ("error", "critical")], entries
    kept.close()


def test_sighup_with_a_broken_pair_keeps_serving_the_previous_certificate(
        start_registry: Callable[..., RegistryServer], ca: CA, issued: Issued, tmp_path: Path) -> None:
    server = start_registry(workers=1, ca_file=ca.cert_file, **tls_env(issued))
    master = server.process.pid  # type: ignore[union-attr]
    other = ca.issue(tmp_path / "other.pem", tmp_path / "other.key")
    os.replace(other.key, issued.key)  # the key of another certificate: the pair does not load
    booted = len([e for e in server.log_entries() if "Booting worker" in e["message"]])
    os.kill(master, signal.SIGHUP)
    deadline = time.monotonic() + 60
    while len([e for e in server.log_entries() if "Booting worker" in e["message"]]) == booted:
        assert server.process.poll() is None, server.log_path.read_text()[-2000:]  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "no new worker after SIGHUP"
        time.sleep(0.2)
    assert _serials(server, ca, 4) == {issued.serial}
    with server.open("/v2/") as response:
        assert response.status == 200
    warned = [e for e in server.log_entries("gunicorn.error")
              if e["message"].startswith("TLS certificate not reloaded")]
    assert warned and "is not the key of the certificate" in warned[0]["message"]
    # Once the pair is whole again, it is served without another signal.
    os.replace(other.cert, issued.cert)
    _wait_for_serial(server, ca, other.serial)
    assert server.process.poll() is None  # type: ignore[union-attr]
