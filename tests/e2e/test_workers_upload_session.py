"""An upload session lives in storage and the database, not in a worker: any worker, or a restarted
server, continues it."""
from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.rawhttp import Client, sha256_digest
from tests.support.server import AccessEntry, RegistryServer, access_log_env, read_access_log

pytestmark = pytest.mark.e2e

OCTET = "application/octet-stream"


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """Workers stopped inside this block are continued when it ends."""
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def pause_when_idle(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP a worker once it is idle, so that the kernel hands the next connection to another.

    gunicorn logs a request before Django's request_finished runs (which may close a database
    connection); a worker stopped in between could keep SQLite locked and stall the others. Idle:
    every thread sleeping and no CPU time spent over three looks 50 ms apart.
    """
    deadline = time.monotonic() + timeout
    looks: list[tuple[int, bool]] = []
    while len(looks) < 3 or len(set(looks[-3:])) != 1 or not looks[-1][1]:
        assert time.monotonic() < deadline, f"worker {pid} did not become idle"
        looks.append(activity(pid))
        time.sleep(0.05)
    os.kill(pid, signal.SIGSTOP)


def activity(pid: int) -> tuple[int, bool]:
    """(CPU ticks of all the worker's threads, whether every thread is sleeping)."""
    ticks, sleeping = 0, True
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue  # a thread that just ended
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        sleeping = sleeping and fields[0] == "S"
    return ticks, sleeping


def logged_patches(log: Path, count: int) -> list[AccessEntry]:
    """The PATCH requests in the access log, once ``count`` of them are there."""
    entries = read_access_log(log, until=lambda entries: len(patches_in(entries)) >= count)
    return patches_in(entries)


def patches_in(entries: list[AccessEntry]) -> list[AccessEntry]:
    return [e for e in entries if e.method == "PATCH"]


def patch(client: Client, location: str, offset: int, chunk: bytes) -> int:
    reply = client.request("PATCH", location, body=chunk, headers={
        "Content-Type": OCTET, "Content-Range": f"{offset}-{offset + len(chunk) - 1}"})
    assert reply.status == 202, reply
    end = offset + len(chunk)
    assert reply.header("Range") == f"0-{end - 1}"
    return end


def test_it_continues_a_session_on_every_worker_and_after_a_restart(start_registry, tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    server: RegistryServer = start_registry(workers=3, **access_log_env(log))
    client = Client(server.host)
    chunks = [os.urandom(300_000 + i) for i in range(5)]
    location = client.start_upload("team/app")
    offset, served_by, stopped = 0, [], []
    with paused(stopped):
        for chunk in chunks[:3]:
            offset = patch(client, location, offset, chunk)
            served_by.append(logged_patches(log, count=len(served_by) + 1)[-1].pid)
            stopped.append(served_by[-1])
            pause_when_idle(served_by[-1])
    assert len(set(served_by)) == 3, served_by

    server.stop()
    server.start()
    status = client.request("GET", location)
    assert status.status == 204
    assert status.header("Range") == f"0-{offset - 1}"
    assert status.header("Location") == location
    offset = patch(client, location, offset, chunks[3])
    digest = sha256_digest(b"".join(chunks))
    done = client.request("PUT", f"{location}?digest={digest}", body=chunks[4],
                          headers={"Content-Type": OCTET})
    assert done.status == 201, done
    assert client.request("GET", f"/v2/team/app/blobs/{digest}").body == b"".join(chunks)


def test_it_refuses_an_out_of_order_chunk_on_another_worker(start_registry) -> None:
    server = start_registry(workers=3)
    clients = [Client(server.host) for _ in range(3)]
    location = clients[0].start_upload("team/app")
    first = os.urandom(100_000)
    end = patch(clients[1], location, 0, first)
    for start in (0, end + 1):  # a retried chunk, then a gap
        refused = clients[2].request("PATCH", location, body=b"x" * 10, headers={
            "Content-Type": OCTET, "Content-Range": f"{start}-{start + 9}"})
        assert refused.status == 416
        assert refused.header("Range") == f"0-{end - 1}"
    assert clients[0].request("GET", location).header("Range") == f"0-{end - 1}"
