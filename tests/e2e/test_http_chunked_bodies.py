"""Bodies sent with Transfer-Encoding: chunked (as docker pushes layers) land intact through gunicorn."""
from __future__ import annotations

import json
import os
from typing import Iterator

import pytest

from tests.support.rawhttp import MiB, Client, dechunk, head_headers, raw_exchange, sha256_digest
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
    # the digest's own directory: its two-character parent is shared with any blob whose digest
    # starts alike, and this module's other tests store random ones (a run failed so)
    assert not (root / "blobs" / "sha256" / wrong[7:9] / wrong[7:]).exists()
    assert list((root / "uploads").iterdir()) == []


def test_it_refuses_a_malformed_chunk_and_keeps_the_session(registry) -> None:
    client = Client(registry.host)
    location = client.start_upload("team/app")
    first = os.urandom(1000)
    assert client.request("PATCH", location, body=first, headers=OCTET).status == 202
    broken = (f"PATCH {location} HTTP/1.1\r\nHost: {registry.host}\r\nTransfer-Encoding: chunked\r\n"
              "Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
              "5\r\nhello\r\nZZ\r\nnot a chunk size\r\n0\r\n\r\n")
    head, rest = raw_exchange(registry.host, broken)
    headers = head_headers(head)
    assert head.startswith("HTTP/1.1 400 "), head
    body = dechunk(rest) if headers.get("transfer-encoding") == "chunked" else rest
    assert json.loads(body)["errors"][0]["code"] == "BLOB_UPLOAD_INVALID"
    status = client.request("GET", location)
    assert status.header("Range") == f"0-{len(first) - 1}"  # the half-read chunk was cut back
    last = os.urandom(500)
    digest = sha256_digest(first + last)
    assert client.request("PUT", f"{location}?digest={digest}", body=last, headers=OCTET).status == 201
