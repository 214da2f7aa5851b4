"""Under gunicorn: listing one user's tokens and serving /metrics cost the same with 10 or 10,000
tokens in storage, with either token backend (5,000 token files made every /metrics scrape read
each of them: 0.35 s, and slowed every other request)."""
from __future__ import annotations

import json
import sqlite3
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest

from tests.support.auth import write_htpasswd
from tests.support.rawhttp import Client
from tests.support.server import RegistryServer

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # timing-sensitive: run alone (make test)
ALICE = json.dumps({"username": "alice", "password": "wonderland"}).encode()
JSON = {"Content-Type": "application/json"}


def add_tokens(server: RegistryServer, backend: str, count: int) -> None:
    """Token records of other users, written straight into storage (as many creates would)."""
    now = datetime.now(timezone.utc)
    records = []
    for n in range(count):
        digest = uuid.uuid4().hex * 2
        records.append((digest, f"user{n % 500}", ("read", "write", "admin")[n % 3], "",
                        now, now + timedelta(days=1 + n % 30)))
    if backend == "files":
        directory = server.workdir / "tokens"
        for digest, owner, role, description, created, expires in records:
            (directory / digest).write_text(json.dumps({
                "owner": owner, "role": role, "description": description, "created_at": created.isoformat(),
                "expires_at": expires.isoformat(), "hash": digest}))
        return
    with sqlite3.connect(server.workdir / "db.sqlite3") as db:
        db.executemany("INSERT INTO tokens_token (digest, owner, role, description, created_at, expires_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       [(d, o, r, s, c.strftime("%Y-%m-%d %H:%M:%S"), e.strftime("%Y-%m-%d %H:%M:%S"))
                        for d, o, r, s, c, e in records])


def timings(http: Client, runs: int = 15) -> tuple[float, float]:
    """Median seconds of a /metrics scrape and of listing alice's tokens."""
    scrape, listing = [], []
    for _ in range(runs):
        started = time.perf_counter()
        assert http.request("GET", "/metrics").status == 200
        scrape.append(time.perf_counter() - started)
        started = time.perf_counter()
        reply = http.request("POST", "/api/tokens/list", ALICE, JSON)
        listing.append(time.perf_counter() - started)
        assert reply.status == 200 and len(reply.json()["tokens"]) == 3
    return statistics.median(scrape), statistics.median(listing)


@pytest.mark.parametrize("backend", ["files", "database"])
def test_listing_and_metrics_do_not_slow_down_with_many_tokens(start_registry: Callable[..., RegistryServer],
                                                              tmp_path: Path, backend: str) -> None:
    (tmp_path / "server").mkdir()
    write_htpasswd(tmp_path / "server" / "users.htpasswd", {"alice": "wonderland"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_TOKEN_BACKEND=backend)
    http = Client(server.host)
    for _ in range(3):
        assert http.request("POST", "/api/tokens", ALICE, JSON).status == 201
    add_tokens(server, backend, 7)
    timings(http, runs=4)  # each worker's first look (the files backend builds its index)
    few = timings(http)

    add_tokens(server, backend, 9_990)
    time.sleep(2.1)  # past the index's rescan window for a directory that just changed
    warm = time.perf_counter()
    timings(http, runs=4)
    warm = time.perf_counter() - warm
    many = timings(http)
    print(f"\n{backend}: /metrics {few[0] * 1000:.1f} ms with 10 tokens, {many[0] * 1000:.1f} ms with "
          f"10,000; listing alice's {few[1] * 1000:.1f} ms / {many[1] * 1000:.1f} ms; the first looks after "
          f"adding 9,990: {warm:.2f} s for 8 requests")
    assert many[0] < 2 * few[0] + 0.010, (few, many)
    assert many[1] < 2 * few[1] + 0.010, (few, many)
