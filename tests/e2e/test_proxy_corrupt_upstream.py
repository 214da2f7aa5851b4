"""An upstream that serves wrong bytes for a digest: under gunicorn the client's transfer is cut
short (it never receives the blob complete), nothing is stored, the cache says why in its log, and
skopeo's copy fails instead of succeeding with bad bytes. A blob small enough to be checked before
its answer begins gets the OCI 502 instead; an upstream lost mid-stream cuts the transfer short
too, logged in one line, without a traceback."""
from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import Skopeo
from tests.support.server import RegistryServer
from tests.support.upstreams import CorruptUpstream

pytestmark = pytest.mark.e2e
SIZE = 8 * 1024 * 1024 + 4321


@pytest.fixture
def corrupt() -> Iterator[CorruptUpstream]:
    server = CorruptUpstream(os.urandom(SIZE)).start()
    yield server
    server.stop()


def test_wrong_bytes_are_never_stored_or_served_complete(corrupt: CorruptUpstream, skopeo: Skopeo,
                                                         start_registry: Callable[..., RegistryServer],
                                                         tmp_path: Path) -> None:
    workdir = tmp_path / "cache"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "bad"\nurl = "{corrupt.url}"\n')
    cache = start_registry(name="cache")

    for _attempt in range(2):
        conn = http.client.HTTPConnection("127.0.0.1", cache.port, timeout=60)
        conn.request("GET", f"/v2/bad/library/bad/blobs/{corrupt.layer_digest}")
        response = conn.getresponse()
        assert response.status == 200 and int(response.getheader("Content-Length")) == SIZE
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        assert len(cut.value.partial) < SIZE
        conn.close()
    assert corrupt.blob_gets == 2  # nothing was kept: the second pull asked again

    failed = skopeo.run("copy", "--src-tls-verify=false", f"docker://{cache.host}/bad/library/bad:latest",
                        f"oci:{tmp_path / 'out'}:x", check=False)
    assert failed.returncode != 0
    stored = [p for p in (workdir / "registry").rglob("*")
              if p.is_file() and ("blobs" in p.parts or "uploads" in p.parts)]
    assert not [p for p in stored if ".probe-" not in p.name]
    log = cache.log_path.read_text()
    assert f"for blob {corrupt.layer_digest} of bad/library/bad that hash to" in log
    assert "Traceback" not in log and "Error handling request" not in log  # a cut is no crash


@pytest.fixture
def cache(corrupt: CorruptUpstream, start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    workdir = tmp_path / "cache"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "bad"\nurl = "{corrupt.url}"\n')
    return start_registry(name="cache")


def test_a_small_corrupt_blob_is_an_oci_502(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> None:
    small = CorruptUpstream(os.urandom(100 * 1024)).start()
    try:
        workdir = tmp_path / "cache"
        workdir.mkdir()
        (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "bad"\nurl = "{small.url}"\n')
        cache = start_registry(name="cache")
        conn = http.client.HTTPConnection("127.0.0.1", cache.port, timeout=60)
        conn.request("GET", f"/v2/bad/library/bad/blobs/{small.layer_digest}")
        response = conn.getresponse()
        body = response.read()
        assert response.status == 502, body[:300]
        assert response.getheader("Content-Type") == "application/json" and int(response.getheader("Retry-After")) > 0
        error = json.loads(body)["errors"][0]
        assert error["code"] == "UNAVAILABLE" and "do not match" in error["message"]
        conn.close()
        assert "Traceback" not in cache.log_path.read_text()
    finally:
        small.stop()


def test_an_upstream_lost_mid_stream_cuts_the_transfer_without_a_traceback(corrupt: CorruptUpstream,
                                                                          cache: RegistryServer) -> None:
    corrupt.truncate = True
    conn = http.client.HTTPConnection("127.0.0.1", cache.port, timeout=60)
    conn.request("GET", f"/v2/bad/library/bad/blobs/{corrupt.layer_digest}")
    response = conn.getresponse()
    assert response.status == 200
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    assert len(cut.value.partial) < SIZE // 2 + 1
    conn.close()
    log = cache.log_path.read_text()
    assert "Traceback" not in log and "Error handling request" not in log
    assert f"blob {corrupt.layer_digest}" in log and "ended after" in log
