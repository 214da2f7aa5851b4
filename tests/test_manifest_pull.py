"""end-3: GET and HEAD of a manifest by tag or digest."""
from __future__ import annotations

import pytest

from tests.support.registry_client import DOCKER_MANIFEST, OCI_MANIFEST, digest_of, error_code, push_image

pytestmark = pytest.mark.django_db

NAME = "team/app"


@pytest.fixture
def image(client) -> tuple[bytes, str]:
    return push_image(client, NAME, "v1")


@pytest.mark.parametrize("by", ["tag", "digest"])
def test_it_serves_the_manifest_with_its_headers(client, image, by) -> None:
    body, digest = image
    response = client.get(f"/v2/{NAME}/manifests/{'v1' if by == 'tag' else digest}")
    assert response.status_code == 200
    assert response.content == body
    assert response["Content-Type"] == OCI_MANIFEST
    assert response["Content-Length"] == str(len(body))
    assert response["Docker-Content-Digest"] == digest
    assert response["ETag"] == f'"{digest}"'


@pytest.mark.parametrize("by", ["tag", "digest"])
def test_it_answers_head_with_the_headers_and_no_body(client, image, by) -> None:
    body, digest = image
    response = client.head(f"/v2/{NAME}/manifests/{'v1' if by == 'tag' else digest}")
    assert response.status_code == 200
    assert response.content == b""
    assert response["Content-Length"] == str(len(body))
    assert response["Docker-Content-Digest"] == digest
    assert response["Content-Type"] == OCI_MANIFEST


def test_it_serves_a_docker_manifest_with_its_media_type(client) -> None:
    body, _ = push_image(client, NAME, "docker", media_type=DOCKER_MANIFEST)
    response = client.get(f"/v2/{NAME}/manifests/docker")
    assert response["Content-Type"] == DOCKER_MANIFEST
    assert response.content == body


def test_it_answers_304_when_the_etag_matches(client, image) -> None:
    _, digest = image
    response = client.get(f"/v2/{NAME}/manifests/v1", headers={"If-None-Match": f'"{digest}"'})
    assert response.status_code == 304
    assert response.content == b""


@pytest.mark.parametrize("reference", ["v2", digest_of(b"unknown")])
def test_it_answers_404_manifest_unknown(client, image, reference) -> None:
    response = client.get(f"/v2/{NAME}/manifests/{reference}")
    assert response.status_code == 404
    assert error_code(response) == "MANIFEST_UNKNOWN"
    head = client.head(f"/v2/{NAME}/manifests/{reference}")
    assert head.status_code == 404
    assert head.content == b""


def test_it_answers_404_for_an_unknown_repository(client) -> None:
    response = client.get("/v2/no/such/manifests/latest")
    assert response.status_code == 404
    assert error_code(response) in {"MANIFEST_UNKNOWN", "NAME_UNKNOWN"}


def test_it_does_not_serve_a_manifest_through_another_repository(client, image) -> None:
    _, digest = image
    push_image(client, "team/other", "v0")
    for reference in ("v1", digest):
        assert client.get(f"/v2/team/other/manifests/{reference}").status_code == 404


def test_it_refuses_a_malformed_digest_with_digest_invalid(client, image) -> None:
    response = client.get(f"/v2/{NAME}/manifests/sha256:xyz")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"


@pytest.mark.parametrize("reference", ["-bad", ".INVALID_MANIFEST_NAME", "a" * 129])
def test_a_reference_that_is_not_a_tag_names_nothing(client, image, reference) -> None:
    # What the OCI conformance suite checks and CNCF distribution answers: 404, not 400.
    for response in (client.get(f"/v2/{NAME}/manifests/{reference}"),
                     client.head(f"/v2/{NAME}/manifests/{reference}")):
        assert response.status_code == 404
    assert error_code(client.get(f"/v2/{NAME}/manifests/{reference}")) == "MANIFEST_UNKNOWN"
