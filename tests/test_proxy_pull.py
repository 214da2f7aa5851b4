"""Pulls through a pull-through cache: a miss fetches from the upstream (a real CNCF registry), the
same bytes and digests come back, and the next pull is answered here without asking it again."""
from __future__ import annotations

import hashlib
import json

import pytest
from django.test import Client

from registry.models import Blob, BlobLink, Manifest, Tag
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of, error_code
from tests.support.upstreams import OCI_INDEX, OCI_MANIFEST, push_image, push_multiarch

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = ", ".join([OCI_MANIFEST, OCI_INDEX])


def get(client: Client, path: str, **headers: str):  # type: ignore[no-untyped-def]
    return client.get(path, headers={"Accept": ACCEPT, **headers})


def test_it_pulls_an_image_by_tag_with_the_upstream_digests_and_bytes(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "3.20")
    response = get(client, "/v2/hub/library/alpine/manifests/3.20")
    assert response.status_code == 200
    assert response["Docker-Content-Digest"] == pushed.digest
    assert response["Content-Type"] == OCI_MANIFEST
    assert hashlib.sha256(response.content).hexdigest() == pushed.digest.split(":")[1]
    for digest, data in pushed.blobs.items():
        got = client.get(f"/v2/hub/library/alpine/blobs/{digest}")
        assert got.status_code == 200 and got["Docker-Content-Digest"] == digest
        assert body_of(got) == data
    stored()
    assert Blob.objects.filter(digest__in=list(pushed.blobs)).count() == len(pushed.blobs)


def test_the_second_pull_is_answered_without_the_upstream(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/busybox", "1")
    paths = ["/v2/hub/library/busybox/manifests/1", f"/v2/hub/library/busybox/manifests/{pushed.digest}"]
    paths += [f"/v2/hub/library/busybox/blobs/{digest}" for digest in pushed.blobs]
    for path in paths:
        assert body_of(get(client, path))
    served = upstream.log_path.read_text()
    for path in paths:
        assert get(client, path).status_code == 200
    assert upstream.log_path.read_text() == served  # not one request more
    for digest in pushed.blobs:  # each blob was fetched once
        assert upstream.served("GET", f"/v2/library/busybox/blobs/{digest}") == 1


def test_a_multi_arch_index_and_its_platform_images_by_digest(client, upstream, mirror) -> None:
    mirror()
    pushed = push_multiarch(upstream.url, "library/multi", "latest")
    index = get(client, "/v2/hub/library/multi/manifests/latest")
    assert index.status_code == 200 and index["Docker-Content-Digest"] == pushed.digest
    assert index["Content-Type"] == OCI_INDEX
    for child in json.loads(index.content)["manifests"]:
        manifest = get(client, f"/v2/hub/library/multi/manifests/{child['digest']}")
        assert manifest.status_code == 200 and manifest["Docker-Content-Digest"] == child["digest"]
        for layer in json.loads(manifest.content)["layers"]:
            blob = client.get(f"/v2/hub/library/multi/blobs/{layer['digest']}")
            assert body_of(blob) == pushed.blobs[layer["digest"]]
    assert Manifest.objects.filter(repository__name="hub/library/multi").count() == 3


def test_head_of_a_manifest_caches_it_and_head_of_a_blob_only_asks(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/heads", "v1", layers=1)
    head = client.head("/v2/hub/library/heads/manifests/v1", headers={"Accept": ACCEPT})
    assert head.status_code == 200 and head["Docker-Content-Digest"] == pushed.digest
    assert int(head["Content-Length"]) > 0 and head.content == b""
    assert Tag.objects.filter(repository__name="hub/library/heads", name="v1").exists()
    layer = next(iter(pushed.blobs))
    blob = client.head(f"/v2/hub/library/heads/blobs/{layer}")
    assert blob.status_code == 200 and int(blob["Content-Length"]) == len(pushed.blobs[layer])
    assert not Blob.objects.filter(digest=layer).exists()  # a HEAD fetches nothing


def test_a_ranged_miss_is_stored_whole_and_the_range_served(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/ranged", "v1", layers=1, layer_size=300_000)
    get(client, "/v2/hub/library/ranged/manifests/v1")
    digest, data = max(pushed.blobs.items(), key=lambda item: len(item[1]))
    response = client.get(f"/v2/hub/library/ranged/blobs/{digest}", headers={"Range": "bytes=1000-1999"})
    assert response.status_code == 206 and body_of(response) == data[1000:2000]
    assert BlobLink.objects.filter(repository__name="hub/library/ranged", blob__digest=digest).exists()


def test_what_the_upstream_lacks_is_unknown_here_too(client, upstream, mirror) -> None:
    mirror()
    push_image(upstream.url, "library/there", "v1", layers=1)
    assert error_code(get(client, "/v2/hub/library/there/manifests/v2")) == "MANIFEST_UNKNOWN"
    assert error_code(get(client, "/v2/hub/library/nowhere/manifests/v1")) == "MANIFEST_UNKNOWN"
    missing = "sha256:" + "0" * 64
    response = client.get(f"/v2/hub/library/there/blobs/{missing}")
    assert response.status_code == 404 and error_code(response) == "BLOB_UNKNOWN"
    assert error_code(get(client, "/v2/hub/manifests/v1")) in {"NAME_UNKNOWN", "MANIFEST_UNKNOWN"}


def test_cached_content_is_ordinary_for_the_catalog_and_tags_list(client, upstream, mirror) -> None:
    mirror()
    push_image(upstream.url, "library/listed", "v1", layers=1)
    get(client, "/v2/hub/library/listed/manifests/v1")
    assert "hub/library/listed" in json.loads(client.get("/v2/_catalog").content)["repositories"]
    assert json.loads(client.get("/v2/hub/library/listed/tags/list").content)["tags"] == ["v1"]
