"""end-9: DELETE of a manifest by digest (with its tags) or of a tag alone."""
from __future__ import annotations

import pytest

from tests.support.registry_client import digest_of, error_code, push_image, put_manifest

pytestmark = pytest.mark.django_db

NAME = "team/app"


@pytest.fixture
def image(client) -> tuple[bytes, str]:
    body, digest = push_image(client, NAME, "v1")
    assert put_manifest(client, NAME, "latest", body).status_code == 201
    return body, digest


def test_it_deletes_by_digest_with_202_and_removes_every_tag(client, image) -> None:
    _, digest = image
    response = client.delete(f"/v2/{NAME}/manifests/{digest}")
    assert response.status_code == 202
    for reference in (digest, "v1", "latest"):
        assert client.get(f"/v2/{NAME}/manifests/{reference}").status_code == 404
    assert client.get(f"/v2/{NAME}/tags/list").json()["tags"] == []


def test_it_deletes_a_tag_only(client, image) -> None:
    body, digest = image
    response = client.delete(f"/v2/{NAME}/manifests/v1")
    assert response.status_code == 202
    assert client.get(f"/v2/{NAME}/manifests/v1").status_code == 404
    assert client.get(f"/v2/{NAME}/manifests/latest").content == body
    assert client.get(f"/v2/{NAME}/manifests/{digest}").content == body
    assert client.get(f"/v2/{NAME}/tags/list").json()["tags"] == ["latest"]


def test_it_keeps_the_blobs_when_a_manifest_is_deleted(client, image) -> None:
    _, digest = image
    client.delete(f"/v2/{NAME}/manifests/{digest}")
    layer = digest_of(b"layer-of-v1")
    assert client.head(f"/v2/{NAME}/blobs/{layer}").status_code == 200


@pytest.mark.parametrize("reference", ["nope", digest_of(b"nope")])
def test_it_answers_404_manifest_unknown_for_an_unknown_reference(client, image, reference) -> None:
    response = client.delete(f"/v2/{NAME}/manifests/{reference}")
    assert response.status_code == 404
    assert error_code(response) == "MANIFEST_UNKNOWN"


def test_it_answers_404_name_unknown_for_an_unknown_repository(client) -> None:
    response = client.delete(f"/v2/no/such/manifests/{digest_of(b'x')}")
    assert response.status_code == 404
    assert error_code(response) == "NAME_UNKNOWN"


@pytest.mark.parametrize("reference, code", [("sha256:bad", "DIGEST_INVALID"), ("-bad", "MANIFEST_INVALID")])
def test_it_refuses_a_malformed_reference_with_400(client, image, reference, code) -> None:
    response = client.delete(f"/v2/{NAME}/manifests/{reference}")
    assert response.status_code == 400
    assert error_code(response) == code


def test_it_answers_405_unsupported_when_deletes_are_disabled(client, image, settings) -> None:
    body, digest = image
    settings.REGISTRY_DELETE_ENABLED = False
    for reference in (digest, "v1"):
        response = client.delete(f"/v2/{NAME}/manifests/{reference}")
        assert response.status_code == 405
        assert error_code(response) == "UNSUPPORTED"
    assert client.get(f"/v2/{NAME}/manifests/v1").content == body


def test_it_lets_a_deleted_manifest_be_pushed_again(client, image) -> None:
    body, digest = image
    client.delete(f"/v2/{NAME}/manifests/{digest}")
    assert put_manifest(client, NAME, "v1", body).status_code == 201
    assert client.get(f"/v2/{NAME}/manifests/v1").content == body
