"""With PostgreSQL, each worker holds at most ``[database] pool_size`` connections, however many clients
there are: 60 at once (manifest GETs, slow blob downloads, slow uploads) on 2 workers with a pool of
2 never open more than 4, and every request succeeds."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from tests.faults.wire import MiB, Registry, digest
from tests.support.postgres import Postgres
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e
WORKERS, POOL = 2, 2


def _connections(postgres: Postgres, database: str) -> int:
    name = database.rsplit("/", 1)[1]
    return int(postgres.query("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                              f"'{name}' AND backend_type = 'client backend'"))


def _slow_download(host: str, path: str, size: int, failures: list[str]) -> None:
    address = (host.rsplit(":", 1)[0], int(host.rsplit(":", 1)[1]))
    with socket.create_connection(address, timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while True:
            data = sock.recv(16 * 1024)
            if not data:
                break
            received += data
            time.sleep(0.01)
    if not received.startswith(b"HTTP/1.1 200") or len(received.split(b"\r\n\r\n", 1)[1]) != size:
        failures.append(f"download: {received[:40]!r}")


def _slow_upload(client: Registry, data: bytes, failures: list[str]) -> None:
    reply = client.request("POST", "/v2/team/pool/blobs/uploads/")
    location = reply.headers["location"]
    half = len(data) // 2
    for start, piece in ((0, data[:half]), (half, data[half:])):
        reply = client.request("PATCH", location, piece, {"Content-Type": "application/octet-stream",
                                                          "Content-Range": f"{start}-{start + len(piece) - 1}"})
        if reply.status != 202:
            failures.append(f"PATCH: {reply.status}")
            return
        location = reply.headers["location"]
        time.sleep(0.5)
    sep = "&" if "?" in location else "?"
    if client.request("PUT", f"{location}{sep}digest={digest(data)}").status != 201:
        failures.append("PUT")


def test_it_never_holds_more_connections_than_its_pools(start_registry, postgres: Postgres) -> None:
    database = postgres.new_database()
    server: RegistryServer = start_registry(workers=WORKERS, SVC_DATABASE_URL=database,
                                            SVC_DATABASE_POOL_SIZE=str(POOL))
    client = Registry(server.host)
    blob = os.urandom(4 * MiB)
    manifest_digest, _ = client.push_image("team/pool", "v1", [blob])
    blob_path = f"/v2/team/pool/blobs/{digest(blob)}"

    failures: list[str] = []
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _connections(postgres, database))
            done.wait(0.1)

    def manifests() -> None:
        for _ in range(30):
            if client.request("GET", "/v2/team/pool/manifests/v1").status != 200:
                failures.append("manifest GET")

    jobs = ([threading.Thread(target=manifests) for _ in range(30)]
            + [threading.Thread(target=_slow_download, args=(server.host, blob_path, len(blob), failures))
               for _ in range(20)]
            + [threading.Thread(target=_slow_upload, args=(client, os.urandom(MiB), failures)) for _ in range(10)])
    sampler = threading.Thread(target=sample)
    sampler.start()
    for job in jobs:
        job.start()
    for job in jobs:
        job.join()
    done.set()
    sampler.join()

    assert failures == []
    assert 0 < peak[0] <= WORKERS * POOL, peak[0]
    assert client.request("GET", f"/v2/team/pool/manifests/{manifest_digest}").status == 200
