"""Clients that vanish in the middle of an upload or a download leave no open file, no temp data
and no stuck session behind; the registry keeps serving everyone else."""
from __future__ import annotations

import os
import time

import pytest

from tests.faults.wire import MiB, Registry, digest, read_reply, reset, send_partial, storage_fds, \
    storage_problems, storage_root, upload_files, wait_until, worker_fds
from tests.support.server import RegistryServer

OCTET = "application/octet-stream"


def fd_counts(server: RegistryServer) -> dict[int, int]:
    """Per process: the descriptors a request opens and must close, i.e. sockets and storage files.
    (Database connections stay open on purpose, one per worker thread; see ``db_fds_bounded``.)"""
    root = str(storage_root(server).resolve())
    return {pid: sum(1 for t in targets if t.startswith(("socket:", root)))
            for pid, targets in worker_fds(server).items()}


def db_fds_bounded(server: RegistryServer) -> bool:
    """Each worker holds at most one database connection (3 files with WAL) per thread."""
    db = str(server.workdir.resolve() / "db.sqlite3")
    threads = int(server.env().get("SVC_SERVER_THREADS", "8"))
    return all(sum(1 for t in targets if t.startswith(db)) <= 3 * threads
               for targets in worker_fds(server).values())


def settle(server: RegistryServer, baseline: dict[int, int]) -> None:
    """Wait until every process has no more of those descriptors open than before the faults."""
    wait_until(lambda: all(fd_counts(server).get(pid, 0) <= n for pid, n in baseline.items())
               and not storage_fds(server), timeout=20, what="descriptors to be closed")
    assert db_fds_bounded(server)


def sessions(server: RegistryServer) -> set[str]:
    return set(upload_files(server))


@pytest.fixture
def client(shared_registry: RegistryServer) -> Registry:
    client = Registry(shared_registry.host)
    for _ in range(4):  # let every worker open what it keeps open for good
        client.request("GET", "/v2/_catalog")
    return client


def test_it_discards_monolithic_uploads_of_clients_that_vanish(shared_registry, client) -> None:
    server = shared_registry
    baseline, before = fd_counts(server), sessions(server)
    for i in range(8):
        blob = os.urandom(4 * MiB)
        sock = send_partial(server.host, "POST", f"/v2/team/app/blobs/uploads/?digest={digest(blob)}",
                            {"Content-Length": str(len(blob)), "Content-Type": OCTET}, blob[: MiB + i * 1000])
        time.sleep(0.1)
        reset(sock) if i % 2 else sock.close()
    settle(server, baseline)
    wait_until(lambda: sessions(server) == before, what="vanished uploads to be discarded")
    assert storage_problems(server) == []
    client.push_blob("team/app", os.urandom(MiB))


def test_it_cuts_an_interrupted_chunk_back_and_keeps_the_session_usable(shared_registry, client) -> None:
    server = shared_registry
    baseline = fd_counts(server)
    blob = os.urandom(3 * MiB)
    location = client.request("POST", "/v2/team/app/blobs/uploads/").header("Location")
    assert client.request("PATCH", location, blob[:MiB], {"Content-Type": OCTET}).status == 202
    for i in range(4):
        sock = send_partial(server.host, "PATCH", location,
                            {"Content-Length": str(2 * MiB), "Content-Type": OCTET}, blob[MiB:MiB + 300_000])
        time.sleep(0.1)
        reset(sock) if i % 2 else sock.close()
    chunked = send_partial(server.host, "PATCH", location, {"Transfer-Encoding": "chunked", "Content-Type": OCTET},
                           b"%x\r\n" % 100_000 + blob[MiB:MiB + 100_000] + b"\r\n")
    time.sleep(0.1)
    chunked.close()
    settle(server, baseline)
    assert client.request("GET", location).header("Range") == f"0-{MiB - 1}"
    assert upload_files(server)[location.rsplit("/", 1)[1]] == MiB
    rest = client.request("PATCH", location, blob[MiB:], {"Content-Type": OCTET})
    assert rest.status == 202, rest.body  # no lock or half-chunk was left behind
    assert client.request("PUT", f"{location}?digest={digest(blob)}").status == 201
    assert storage_problems(server) == []


def test_it_closes_blob_files_of_clients_that_stop_reading(shared_registry, client) -> None:
    server = shared_registry
    blob = os.urandom(16 * MiB)
    client.push_blob("team/app", blob)
    baseline = fd_counts(server)
    for i in range(8):
        headers = {"Range": f"bytes={i * MiB}-"} if i % 3 == 2 else {}
        sock = send_partial(server.host, "GET", f"/v2/team/app/blobs/{digest(blob)}", headers, b"")
        sock.recv(64 * 1024)
        time.sleep(0.05)
        reset(sock) if i % 2 else sock.close()
    settle(server, baseline)
    sock = send_partial(server.host, "GET", f"/v2/team/app/blobs/{digest(blob)}", {"Connection": "close"}, b"")
    status, body = read_reply(sock)
    sock.close()
    assert status == 200 and body == blob
