"""Bodies sent with Transfer-Encoding: chunked (as docker pushes layers) land intact through gunicorn."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.rawhttp import MiB, Client, sha256_digest
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

OCTET = {"Content-Type": "application/octet-stream"}
# Odd sizes on purpose: chunk boundaries must not line up with anything the server reads in.
PIECE_SIZES = (1, 7, 64 * 1024 + 3, MiB, 3 * MiB + 11)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path_factory.mktemp("chunked")).start()
    yield server
    server.stop()


def pieces() -> list[bytes]:
    return [os.urandom(n) for n in PIECE_SIZES]


def test_it_stores_a_chunked_patch_then_an_empty_put(registry) -> None:
    client = Client(registry.host)
    parts = pieces()
    data = b"".join(parts)
    location = client.start_upload("team/app")
    patched = client.request("PATCH", location, body=iter(parts), headers=OCTET, chunked=True)
    assert patched.status == 202, patched
    assert patched.header("Range") == f"0-{len(data) - 1}"
    digest = sha256_digest(data)
    done = client.request("PUT", f"{location}?digest={digest}", headers={"Content-Length": "0"})
    assert done.status == 201, done
    assert done.header("Docker-Content-Digest") == digest
    pulled = client.request("GET", f"/v2/team/app/blobs/{digest}")
    assert pulled.status == 200
    assert pulled.body == data


def test_it_takes_the_last_chunk_of_a_closing_put_chunked(registry) -> None:
    client = Client(registry.host)
    first, last = os.urandom(2 * MiB + 5), os.urandom(MiB + 17)
    location = client.start_upload("team/app")
    assert client.request("PATCH", location, body=[first], headers=OCTET, chunked=True).status == 202
    digest = sha256_digest(first + last)
    done = client.request("PUT", f"{location}?digest={digest}", body=iter([last[:9], last[9:]]),
                          headers=OCTET, chunked=True)
    assert done.status == 201, done
    assert client.request("GET", f"/v2/team/app/blobs/{digest}").body == first + last


def test_it_takes_a_chunked_monolithic_post(registry) -> None:
    client = Client(registry.host)
    parts = pieces()
    digest = sha256_digest(b"".join(parts))
    done = client.request("POST", f"/v2/team/app/blobs/uploads/?digest={digest}", body=iter(parts),
                          headers=OCTET, chunked=True)
    assert done.status == 201, done
    assert client.request("GET", f"/v2/team/app/blobs/{digest}").body == b"".join(parts)


def test_it_refuses_a_chunked_body_whose_digest_does_not_match(registry) -> None:
    client = Client(registry.host)
    parts = pieces()
    wrong = sha256_digest(b"something else")
    refused = client.request("POST", f"/v2/team/app/blobs/uploads/?digest={wrong}", body=iter(parts),
                             headers=OCTET, chunked=True)
    assert refused.status == 400
    assert refused.json()["errors"][0]["code"] == "DIGEST_INVALID"
    assert client.request("HEAD", f"/v2/team/app/blobs/{wrong}").status == 404
    root = registry.workdir / "registry"
    assert not (root / "blobs" / "sha256" / wrong[7:9]).exists()
    assert list((root / "uploads").iterdir()) == []
