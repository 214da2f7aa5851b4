"""20 clients pulling the same uncached 64 MiB layer through the cache at once: the upstream (the
CNCF registry, counted in its access log) serves it once, and every client gets the right bytes.
A worker lets only so many of them wait on the upstream ([[proxy]] max_concurrent_fetches, half its
threads): the others are told 503 with Retry-After at once and get the blob when they come back, as
docker and containerd do."""
from __future__ import annotations

import hashlib
import http.client
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import unavailable
from tests.support.server import RegistryServer
from tests.support.upstreams import Distribution, UpstreamUnavailable, push_blob

pytestmark = pytest.mark.e2e
CLIENTS = 20
SIZE = 64 * 1024 * 1024


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def pull(cache: RegistryServer, path: str, refused: list[str]) -> tuple[int, int, str]:
    """The blob, after as many 503s as it takes, each waited out as its Retry-After says."""
    for _attempt in range(10):
        conn = http.client.HTTPConnection("127.0.0.1", cache.port, timeout=300)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            hasher, size = hashlib.sha256(), 0
            while piece := response.read(1024 * 1024):
                hasher.update(piece)
                size += len(piece)
            if response.status != 503:
                return response.status, size, "sha256:" + hasher.hexdigest()
            refused.append(response.getheader("Retry-After", ""))
            time.sleep(int(response.getheader("Retry-After", "60")))
        finally:
            conn.close()
    raise AssertionError("still refused after 10 attempts")


def test_twenty_clients_one_upstream_fetch(upstream: Distribution, start_registry: Callable[..., RegistryServer],
                                           tmp_path: Path) -> None:
    layer = os.urandom(SIZE)
    digest = push_blob(upstream.url, "library/big", layer)
    workdir = tmp_path / "cache"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "hub"\nurl = "{upstream.url}"\n')
    cache = start_registry(name="cache")

    results: list[tuple[int, int, str]] = []
    refused: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(CLIENTS)

    def client() -> None:
        try:
            start.wait()
            results.append(pull(cache, f"/v2/hub/library/big/blobs/{digest}", refused))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors
    assert results == [(200, SIZE, digest)] * CLIENTS
    assert all(0 < int(seconds) <= 10 for seconds in refused), refused
    assert upstream.served("GET", f"/v2/library/big/blobs/{digest}") == 1
