"""Eight clients pushing the same blob, or different manifests to one tag, at the same moment, leave
one consistent result and never a 5xx."""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

import pytest

from tests.support.images import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST
from tests.support.rawhttp import MiB, Client, Reply, sha256_digest
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

CLIENTS = 8
OCTET = {"Content-Type": "application/octet-stream"}
T = TypeVar("T")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(tmp_path_factory.mktemp("concurrent"), workers=3).start()
    yield server
    server.stop()


def at_once(task: Callable[[int, threading.Barrier], T]) -> list[T]:
    """Run ``task(i, barrier)`` in CLIENTS threads; each waits on the barrier before its racing step."""
    barrier = threading.Barrier(CLIENTS, timeout=60)
    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(lambda i: task(i, barrier), range(CLIENTS)))


def push_same_blob(client: Client, data: bytes, mode: int, barrier: threading.Barrier) -> Reply:
    """Three ways docker, skopeo and oras push a blob; all reach the committing request together."""
    digest = sha256_digest(data)
    if mode == 0:
        barrier.wait()
        return client.request("POST", f"/v2/team/app/blobs/uploads/?digest={digest}", body=data, headers=OCTET)
    location = client.start_upload("team/app")
    last = data
    if mode == 2:
        patched = client.request("PATCH", location, body=[data[:MiB]], headers=OCTET, chunked=True)
        assert patched.status == 202, patched
        last = data[MiB:]
    barrier.wait()
    return client.request("PUT", f"{location}?digest={digest}", body=last, headers=OCTET)


def test_it_stores_one_blob_when_eight_clients_push_it_at_once(registry: RegistryServer) -> None:
    client = Client(registry.host)
    data = os.urandom(3 * MiB + 7)
    digest = sha256_digest(data)
    replies = at_once(lambda i, barrier: push_same_blob(client, data, i % 3, barrier))
    assert [r.status for r in replies] == [201] * CLIENTS, replies
    assert {r.header("Docker-Content-Digest") for r in replies} == {digest}
    pulled = client.request("GET", f"/v2/team/app/blobs/{digest}")
    assert pulled.body == data
    root = registry.workdir / "registry"
    assert list((root / "blobs").rglob("data")) == [root / "blobs" / "sha256" / digest[7:9] / digest[7:] / "data"]
    assert list((root / "uploads").iterdir()) == []


def image_manifest(client: Client, name: str, layer: str, i: int) -> bytes:
    config = json.dumps({"architecture": "amd64", "os": "linux", "pusher": i}).encode()
    config_digest = client.push_blob(name, config)
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer, "size": MiB}],
    }).encode()


def assert_complete(client: Client, name: str, manifest: bytes) -> None:
    """The manifest is served byte for byte by digest, and every blob it references is there."""
    digest = sha256_digest(manifest)
    served = client.request("GET", f"/v2/{name}/manifests/{digest}", headers={"Accept": OCI_MANIFEST})
    assert served.status == 200
    assert served.body == manifest
    doc = json.loads(manifest)
    for descriptor in [doc["config"], *doc["layers"]]:
        assert client.request("HEAD", f"/v2/{name}/blobs/{descriptor['digest']}").status == 200


@pytest.mark.parametrize("round_", range(2))
def test_it_leaves_the_tag_on_one_complete_manifest_when_eight_push_it(registry: RegistryServer,
                                                                        round_: int) -> None:
    client = Client(registry.host)
    name = f"team/race{round_}"
    layer = client.push_blob(name, os.urandom(MiB))
    manifests = [image_manifest(client, name, layer, i) for i in range(CLIENTS)]

    def push(i: int, barrier: threading.Barrier) -> Reply:
        barrier.wait()
        return client.push_manifest(name, "latest", manifests[i], OCI_MANIFEST)

    replies = at_once(push)
    assert [r.status for r in replies] == [201] * CLIENTS, replies
    tagged = client.request("GET", f"/v2/{name}/manifests/latest", headers={"Accept": OCI_MANIFEST})
    assert tagged.status == 200
    assert tagged.body in manifests
    assert tagged.header("Docker-Content-Digest") == sha256_digest(tagged.body)
    for manifest in manifests:
        assert_complete(client, name, manifest)
    assert client.request("GET", f"/v2/{name}/tags/list").json()["tags"] == ["latest"]


def test_it_stores_one_manifest_when_eight_push_the_same_one(registry: RegistryServer) -> None:
    client = Client(registry.host)
    name = "team/same"
    manifest = image_manifest(client, name, client.push_blob(name, os.urandom(MiB)), 0)

    def push(i: int, barrier: threading.Barrier) -> Reply:
        barrier.wait()
        return client.push_manifest(name, f"t{i}", manifest, OCI_MANIFEST)

    replies = at_once(push)
    assert [r.status for r in replies] == [201] * CLIENTS, replies
    assert_complete(client, name, manifest)
    tags = client.request("GET", f"/v2/{name}/tags/list").json()["tags"]
    assert tags == [f"t{i}" for i in range(CLIENTS)]
    for i in range(CLIENTS):
        tagged = client.request("HEAD", f"/v2/{name}/manifests/t{i}", headers={"Accept": OCI_MANIFEST})
        assert tagged.header("Docker-Content-Digest") == sha256_digest(manifest)
