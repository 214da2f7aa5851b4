"""end-12a/12b: the referrers API, with artifactType filtering."""
from __future__ import annotations

import pytest

from tests.support.registry_client import (
    OCI_INDEX,
    OCI_MANIFEST,
    descriptor,
    digest_of,
    error_code,
    make_index,
    push_blob,
    push_image,
    put_manifest,
)

pytestmark = pytest.mark.django_db

NAME = "team/app"
SIG = "application/vnd.example.signature"
SBOM_CONFIG = "application/vnd.example.sbom.config+json"


@pytest.fixture
def subject(client) -> tuple[bytes, str]:
    return push_image(client, NAME, "v1")


def _referrer(client, subject_body: bytes, tag: str, **fields) -> dict:
    body, digest = push_image(client, NAME, tag, subject=subject_body, **fields)
    return {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body)}


def _referrers(client, digest: str, query: str = ""):
    response = client.get(f"/v2/{NAME}/referrers/{digest}{query}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == OCI_INDEX
    index = response.json()
    assert index["schemaVersion"] == 2 and index["mediaType"] == OCI_INDEX
    return response, index["manifests"]


def test_it_lists_referrers_with_artifact_type_and_annotations(client, subject) -> None:
    body, digest = subject
    sig = _referrer(client, body, "sig", artifact_type=SIG, annotations={"org.example.signed-by": "ci"})
    sbom = _referrer(client, body, "sbom", config_media_type=SBOM_CONFIG)
    response, manifests = _referrers(client, digest)
    assert manifests == [
        {**sig, "artifactType": SIG, "annotations": {"org.example.signed-by": "ci"}},
        {**sbom, "artifactType": SBOM_CONFIG},
    ]
    assert "OCI-Filters-Applied" not in response


def test_it_lists_an_index_referrer_without_artifact_type(client, subject) -> None:
    body, digest = subject
    child, _ = push_image(client, NAME, "child")
    index = make_index([child], subject=descriptor(OCI_MANIFEST, body), annotations={"k": "v"})
    assert put_manifest(client, NAME, "idx", index, OCI_INDEX).status_code == 201
    _, manifests = _referrers(client, digest)
    assert manifests == [
        {"mediaType": OCI_INDEX, "digest": digest_of(index), "size": len(index), "annotations": {"k": "v"}}
    ]


def test_it_filters_by_artifact_type_and_says_so(client, subject) -> None:
    body, digest = subject
    sig = _referrer(client, body, "sig", artifact_type=SIG)
    _referrer(client, body, "sbom", config_media_type=SBOM_CONFIG)
    response, manifests = _referrers(client, digest, f"?artifactType={SIG}")
    assert manifests == [{**sig, "artifactType": SIG}]
    assert response["OCI-Filters-Applied"] == "artifactType"


def test_it_answers_an_empty_filtered_list_with_the_filter_header(client, subject) -> None:
    body, digest = subject
    _referrer(client, body, "sig", artifact_type=SIG)
    response, manifests = _referrers(client, digest, "?artifactType=application/vnd.none")
    assert manifests == []
    assert response["OCI-Filters-Applied"] == "artifactType"


def test_it_lists_referrers_of_a_subject_that_was_never_pushed(client) -> None:
    missing = b'{"never":"pushed"}'
    push_blob(client, NAME, b"x")
    sig = _referrer(client, missing, "sig", artifact_type=SIG)
    _, manifests = _referrers(client, digest_of(missing))
    assert manifests == [{**sig, "artifactType": SIG}]


def test_it_answers_200_and_an_empty_index_for_an_unknown_digest(client, subject) -> None:
    _, manifests = _referrers(client, digest_of(b"nothing refers to this"))
    assert manifests == []


def test_it_answers_200_and_an_empty_index_for_an_unknown_repository(client) -> None:
    response = client.get(f"/v2/no/such/referrers/{digest_of(b'x')}")
    assert response.status_code == 200
    assert response.json()["manifests"] == []


def test_it_lists_only_referrers_of_the_same_repository(client, subject) -> None:
    body, digest = subject
    push_image(client, "team/other", "sig", subject=body, artifact_type=SIG)
    _, manifests = _referrers(client, digest)
    assert manifests == []


def test_it_drops_a_deleted_referrer(client, subject) -> None:
    body, digest = subject
    sig = _referrer(client, body, "sig", artifact_type=SIG)
    assert client.delete(f"/v2/{NAME}/manifests/{sig['digest']}").status_code == 202
    _, manifests = _referrers(client, digest)
    assert manifests == []


@pytest.mark.parametrize("digest", ["sha256:abc", "latest", "md5:" + "0" * 32])
def test_it_refuses_an_invalid_digest_with_400(client, subject, digest) -> None:
    response = client.get(f"/v2/{NAME}/referrers/{digest}")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"


def test_it_refuses_an_invalid_name_with_name_invalid(client) -> None:
    response = client.get(f"/v2/UPPER/referrers/{digest_of(b'x')}")
    assert response.status_code == 400
    assert error_code(response) == "NAME_INVALID"
