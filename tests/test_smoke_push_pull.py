"""The shortest complete push and pull through the Django test client."""
from __future__ import annotations

import hashlib
import json

import pytest

pytestmark = pytest.mark.django_db


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_it_pushes_and_pulls_an_image(client) -> None:
    layer, config = b"layer-bytes" * 1000, b'{"architecture":"amd64","os":"linux"}'
    for blob in (layer, config):
        start = client.post("/v2/team/app/blobs/uploads/")
        assert start.status_code == 202
        done = client.put(f"{start['Location']}?digest={_digest(blob)}", blob,
                          content_type="application/octet-stream")
        assert done.status_code == 201, done.content
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": _digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": _digest(layer), "size": len(layer)}],
    }).encode()
    put = client.put("/v2/team/app/manifests/v1", manifest,
                     content_type="application/vnd.oci.image.manifest.v1+json")
    assert put.status_code == 201
    assert put["Docker-Content-Digest"] == _digest(manifest)

    got = client.get("/v2/team/app/manifests/v1")
    assert got.content == manifest
    assert got["Content-Type"] == "application/vnd.oci.image.manifest.v1+json"
    blob = client.get(f"/v2/team/app/blobs/{_digest(layer)}")
    assert b"".join(blob.streaming_content) == layer
    assert client.get("/v2/team/app/tags/list").json() == {"name": "team/app", "tags": ["v1"]}
    assert client.get("/v2/_catalog").json() == {"repositories": ["team/app"]}
