"""A pull-through cache's namespace is read-only: pushes, deletes and mounts into it are refused with
UNSUPPORTED; mounting out of it into an ordinary repository is a read, and works."""
from __future__ import annotations

import hashlib
import json

import pytest

from registry.models import BlobLink, Manifest, Tag
from tokens import services
from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import OCI_MANIFEST, body_of, post_upload
from tests.support.upstreams import push_image

pytestmark = pytest.mark.django_db(transaction=True)


def refused(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 405, response.content
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "UNSUPPORTED"
    return error["message"]


@pytest.fixture
def cached(client, upstream, mirror):  # type: ignore[no-untyped-def]
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "v1", layers=1)
    client.get("/v2/hub/library/alpine/manifests/v1", headers={"Accept": OCI_MANIFEST})
    for digest in pushed.blobs:
        body_of(client.get(f"/v2/hub/library/alpine/blobs/{digest}"))
    stored()
    return pushed


def test_pushes_are_refused(client, cached) -> None:
    data = b"new layer"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    message = refused(post_upload(client, "hub/library/alpine", f"?digest={digest}", data))
    assert "read-only pull-through cache" in message
    refused(client.post("/v2/hub/library/alpine/blobs/uploads/"))
    refused(client.put("/v2/hub/library/alpine/manifests/v2", b"{}", content_type=OCI_MANIFEST))
    refused(client.put("/v2/hub/newrepo/manifests/v2", b"{}", content_type=OCI_MANIFEST))
    assert not Tag.objects.filter(name="v2").exists()


def test_deletes_are_refused(client, cached) -> None:
    refused(client.delete(f"/v2/hub/library/alpine/manifests/{cached.digest}"))
    refused(client.delete("/v2/hub/library/alpine/manifests/v1"))
    layer = next(iter(cached.blobs))
    refused(client.delete(f"/v2/hub/library/alpine/blobs/{layer}"))
    assert Manifest.objects.filter(digest=cached.digest).exists()
    assert BlobLink.objects.filter(repository__name="hub/library/alpine", blob__digest=layer).exists()


def test_a_mount_into_the_cache_is_refused_and_out_of_it_works(client, cached) -> None:
    layer = next(iter(cached.blobs))
    refused(client.post(f"/v2/hub/library/copy/blobs/uploads/?mount={layer}&from=hub/library/alpine"))
    out = client.post(f"/v2/team/copy/blobs/uploads/?mount={layer}&from=hub/library/alpine")
    assert out.status_code == 201
    assert BlobLink.objects.filter(repository__name="team/copy", blob__digest=layer).exists()


def test_pulls_need_the_read_role_with_auth_on(client, auth_on, cached) -> None:
    accept = {"Accept": OCI_MANIFEST}
    assert client.get("/v2/hub/library/alpine/manifests/v1", headers=accept).status_code == 401
    reader = {**accept, "Authorization": bearer(services.create_token("alice", "read").token)}
    assert client.get("/v2/hub/library/alpine/manifests/v1", headers=reader).status_code == 200
    assert client.get("/v2/hub/library/alpine/manifests/v1", headers={
        **accept, "Authorization": basic("alice", "wonderland")}).status_code == 200
    # Nobody deletes here: not a reader (whose role says no first), not an admin.
    denied = client.delete("/v2/hub/library/alpine/manifests/v1", headers=reader)
    assert denied.status_code == 403 and json.loads(denied.content)["errors"][0]["code"] == "DENIED"
    admin = {"Authorization": bearer(services.create_token("alice", "admin").token)}
    refused(client.delete("/v2/hub/library/alpine/manifests/v1", headers=admin))


def test_an_anonymous_write_is_asked_for_credentials_and_learns_nothing_of_the_upstream(
        client, auth_on, upstream, cached) -> None:  # noqa: F811
    for response in (client.post("/v2/hub/library/alpine/blobs/uploads/"),
                     client.delete("/v2/hub/library/alpine/manifests/v1")):
        assert response.status_code == 401
        assert upstream.url.split("://")[1] not in response.content.decode()
