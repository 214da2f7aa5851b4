"""Pulls that do not name a cache's prefix still reach it: containerd's ``?ns=<host>`` (hosts.toml
mirrors) and Docker Engine's mirror URL with a path (``/<prefix>/v2/...``)."""
from __future__ import annotations

import pytest

from registry.models import Repository
from tests.support.auth import auth_on, auth_paths, basic, bearer, write_htpasswd  # noqa: F401  (fixtures)
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, proxy_entry, start_upstream, upstream  # noqa: F401
from tests.support.registry_client import body_of, error_code
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}


def test_ns_reaches_the_mirror_whose_host_matches(client, upstream, mirror) -> None:
    mirror()  # prefix "hub", host "docker.io"
    pushed = push_image(upstream.url, "library/alpine", "latest", layers=1)
    response = client.get("/v2/library/alpine/manifests/latest?ns=docker.io", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    assert response["OCI-Namespace"] == "docker.io"
    for digest, data in pushed.blobs.items():
        blob = client.get(f"/v2/library/alpine/blobs/{digest}?ns=docker.io")
        assert body_of(blob) == data and blob["OCI-Namespace"] == "docker.io"
    assert client.head(f"/v2/library/alpine/manifests/{pushed.digest}?ns=docker.io",
                       headers=ACCEPT).status_code == 200
    # It is the cache's content: the same repository as the prefixed name.
    assert Repository.objects.filter(name="hub/library/alpine").exists()
    assert not Repository.objects.filter(name="library/alpine").exists()


def test_ns_of_a_host_no_mirror_claims_is_ignored(client, upstream, mirror) -> None:
    mirror()
    push_image(upstream.url, "library/alpine", "latest", layers=1)
    response = client.get("/v2/library/alpine/manifests/latest?ns=quay.io", headers=ACCEPT)
    assert response.status_code == 404 and "OCI-Namespace" not in response
    assert error_code(response) in {"NAME_UNKNOWN", "MANIFEST_UNKNOWN"}


def test_ns_picks_between_several_mirrors(client, settings, start_upstream) -> None:
    hub, quay = start_upstream("hub"), start_upstream("quay")
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=hub.url, host="docker.io"),
                                 proxy_entry(prefix="quay", url=quay.url, host="quay.io")]
    from_hub = push_image(hub.url, "org/app", "v1", layers=1)
    from_quay = push_image(quay.url, "org/app", "v1", layers=1)
    assert client.get("/v2/org/app/manifests/v1?ns=docker.io", headers=ACCEPT)["Docker-Content-Digest"] == \
        from_hub.digest
    assert client.get("/v2/org/app/manifests/v1?ns=quay.io", headers=ACCEPT)["Docker-Content-Digest"] == \
        from_quay.digest
    assert client.get("/v2/quay/org/app/manifests/v1", headers=ACCEPT)["Docker-Content-Digest"] == from_quay.digest


def test_a_mirror_path_in_front_of_v2_is_the_prefix(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "latest", layers=1)
    assert client.get("/hub/v2/").status_code == 200
    response = client.get("/hub/v2/library/alpine/manifests/latest", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    digest, data = next(iter(pushed.blobs.items()))
    assert body_of(client.get(f"/hub/v2/library/alpine/blobs/{digest}")) == data
    assert client.get("/nothub/v2/").status_code == 404


def test_writes_through_ns_are_refused_too(client, upstream, mirror) -> None:
    mirror()
    response = client.put("/v2/library/alpine/manifests/v1?ns=docker.io", b"{}", content_type=OCI_MANIFEST)
    assert response.status_code == 405 and error_code(response) == "UNSUPPORTED"


def test_a_docker_engine_token_for_its_own_name_pulls_through_the_mirror_path(client, settings, auth_on, upstream,
                                                                              mirror) -> None:  # noqa: F811
    """Docker asks the realm for the name it knows (library/alpine), whatever scope the challenge
    names: through /hub/v2/ such a token covers hub/library/alpine; through /v2/hub/ it does not."""
    settings.AUTH_CHALLENGE = "bearer"
    mirror()
    pushed = push_image(upstream.url, "library/alpine", "latest", layers=1)
    issued = client.get("/auth/token", {"scope": "repository:library/alpine:pull", "service": "svc-registry"},
                        HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert issued.status_code == 200, issued.content
    docker = {**ACCEPT, "Authorization": bearer(issued.json()["token"])}
    response = client.get("/hub/v2/library/alpine/manifests/latest", headers=docker)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
    digest, data = next(iter(pushed.blobs.items()))
    assert body_of(client.get(f"/hub/v2/library/alpine/blobs/{digest}", headers=docker)) == data
    assert client.get("/v2/hub/library/alpine/manifests/latest", headers=docker).status_code == 401
