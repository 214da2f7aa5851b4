"""An upstream that serves wrong bytes for a digest: under gunicorn the client's transfer is cut
short (it never receives the blob complete), nothing is stored, the cache says why in its log, and
skopeo's copy fails instead of succeeding with bad bytes."""
from __future__ import annotations

import http.client
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
    assert f"for blob {corrupt.layer_digest} of bad/library/bad that hash to" in cache.log_path.read_text()
