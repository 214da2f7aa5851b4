"""What gunicorn puts on the wire for HEAD and for Range GETs served through its sendfile path."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterator

import pytest

from tests.support.images import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST
from tests.support.rawhttp import MiB, Client, dechunk, head_headers, raw_exchange, sha256_digest
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

NAME = "team/app"


@dataclass(frozen=True)
class Pushed:
    server: RegistryServer
    blob: bytes
    blob_digest: str
    manifest: bytes
    manifest_digest: str


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    server = RegistryServer(tmp_path_factory.mktemp("head-range")).start()
    client = Client(server.host)
    blob = os.urandom(3 * MiB + 12345)  # several of the view's 1 MiB blocks, not a multiple of them
    config = b'{"architecture":"amd64","os":"linux"}'
    blob_digest, config_digest = client.push_blob(NAME, blob), client.push_blob(NAME, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": blob_digest, "size": len(blob)}],
    }, indent=3).encode()
    assert client.push_manifest(NAME, "v1", manifest, OCI_MANIFEST).status == 201
    yield Pushed(server, blob, blob_digest, manifest, sha256_digest(manifest))
    server.stop()


def raw(server: RegistryServer, method: str, path: str, *headers: str) -> tuple[int, dict[str, str], bytes]:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {server.host}", *headers, "Connection: close", "", ""]
    head, rest = raw_exchange(server.host, "\r\n".join(lines))
    return int(head.split(" ", 2)[1]), head_headers(head), rest


def test_it_answers_head_on_a_blob_with_its_length_and_no_body(pushed: Pushed) -> None:
    status, headers, rest = raw(pushed.server, "HEAD", f"/v2/{NAME}/blobs/{pushed.blob_digest}")
    assert status == 200
    assert headers["content-length"] == str(len(pushed.blob))
    assert headers["docker-content-digest"] == pushed.blob_digest
    assert headers["accept-ranges"] == "bytes"
    assert rest == b""


def test_it_answers_head_on_a_manifest_with_its_length_and_no_body(pushed: Pushed) -> None:
    status, headers, rest = raw(pushed.server, "HEAD", f"/v2/{NAME}/manifests/v1", f"Accept: {OCI_MANIFEST}")
    assert status == 200
    assert headers["content-length"] == str(len(pushed.manifest))
    assert headers["content-type"] == OCI_MANIFEST
    assert headers["docker-content-digest"] == pushed.manifest_digest
    assert rest == b""


@pytest.mark.parametrize("path", ["/v2/", f"/v2/{NAME}/tags/list", "/v2/_catalog", f"/v2/{NAME}/manifests/v1"])
def test_it_answers_head_with_the_length_a_get_would_have(pushed: Pushed, path: str) -> None:
    get_status, get_headers, get_body = raw(pushed.server, "GET", path, f"Accept: {OCI_MANIFEST}")
    status, headers, rest = raw(pushed.server, "HEAD", path, f"Accept: {OCI_MANIFEST}")
    assert (status, get_status) == (200, 200)
    assert headers["content-length"] == get_headers["content-length"] == str(len(get_body))
    assert headers.get("content-type") == get_headers.get("content-type")
    assert rest == b""


@pytest.mark.parametrize("path", [
    f"/v2/{NAME}/blobs/sha256:{'0' * 64}",
    f"/v2/{NAME}/manifests/missing",
    "/v2/nobody/here/manifests/v1",
])
def test_it_answers_head_on_something_unknown_with_404_and_no_body(pushed: Pushed, path: str) -> None:
    status, headers, rest = raw(pushed.server, "HEAD", path)
    assert status == 404
    assert int(headers["content-length"]) > 0  # the length of the error a GET would carry
    assert rest == b""


@pytest.mark.parametrize("header, start, end", [
    ("bytes=0-0", 0, 0),
    ("bytes=100-2097157", 100, 2097157),
    (f"bytes={MiB - 1}-{MiB}", MiB - 1, MiB),
    ("bytes=3000000-", 3000000, 3 * MiB + 12344),
    ("bytes=-1000", 3 * MiB + 12345 - 1000, 3 * MiB + 12344),
    ("bytes=3145000-99999999", 3145000, 3 * MiB + 12344),
])
def test_it_sends_exactly_the_requested_range(pushed: Pushed, header: str, start: int, end: int) -> None:
    status, headers, rest = raw(pushed.server, "GET", f"/v2/{NAME}/blobs/{pushed.blob_digest}", f"Range: {header}")
    assert status == 206
    assert headers["content-range"] == f"bytes {start}-{end}/{len(pushed.blob)}"
    assert headers["content-length"] == str(end - start + 1)
    assert rest == pushed.blob[start:end + 1]  # read to EOF: not one byte more on the wire


def test_it_serves_ranges_back_to_back_on_one_connection(pushed: Pushed) -> None:
    client = Client(pushed.server.host)
    conn = client.connect()
    try:
        for start in range(0, len(pushed.blob), 700_001):
            end = min(start + 500_000, len(pushed.blob) - 1)
            reply = client.request("GET", f"/v2/{NAME}/blobs/{pushed.blob_digest}",
                                   headers={"Range": f"bytes={start}-{end}"}, conn=conn)
            assert reply.status == 206
            assert reply.body == pushed.blob[start:end + 1]
        whole = client.request("GET", f"/v2/{NAME}/blobs/{pushed.blob_digest}", conn=conn)
        assert whole.status == 200
        assert whole.body == pushed.blob
    finally:
        conn.close()


def test_it_refuses_a_range_past_the_end_with_416(pushed: Pushed) -> None:
    size = len(pushed.blob)
    status, headers, rest = raw(pushed.server, "GET", f"/v2/{NAME}/blobs/{pushed.blob_digest}",
                                f"Range: bytes={size}-")
    assert status == 416
    assert headers["content-range"] == f"bytes */{size}"
    body = dechunk(rest) if headers.get("transfer-encoding") == "chunked" else rest
    assert json.loads(body)["errors"][0]["code"] == "RANGE_INVALID"
