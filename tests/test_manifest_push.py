"""end-7 and end-7b: PUT of manifests and indexes, by tag or digest, with their checks."""
from __future__ import annotations

import io
import json

import pytest

from tests.support.registry_client import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    descriptor,
    digest_of,
    error_code,
    make_index,
    make_manifest,
    push_blob,
    push_image,
    put_manifest,
)

pytestmark = pytest.mark.django_db

NAME = "team/app"
CONFIG = b'{"architecture":"amd64","os":"linux"}'
LAYER = b"a layer"


@pytest.fixture
def blobs(client) -> None:
    push_blob(client, NAME, CONFIG)
    push_blob(client, NAME, LAYER)


def _assert_stored(client, reference: str, body: bytes, media_type: str) -> None:
    got = client.get(f"/v2/{NAME}/manifests/{reference}")
    assert got.status_code == 200
    assert got.content == body
    assert got["Content-Type"] == media_type
    assert got["Docker-Content-Digest"] == digest_of(body)


@pytest.mark.parametrize("media_type", [OCI_MANIFEST, DOCKER_MANIFEST])
def test_it_stores_an_image_manifest_byte_for_byte(client, blobs, media_type) -> None:
    body = make_manifest(CONFIG, [LAYER], media_type) + b"\n\n"  # odd formatting must survive
    response = put_manifest(client, NAME, "v1", body, media_type)
    assert response.status_code == 201
    assert response["Docker-Content-Digest"] == digest_of(body)
    assert response["Location"] == f"/v2/{NAME}/manifests/{digest_of(body)}"
    assert "OCI-Subject" not in response
    _assert_stored(client, "v1", body, media_type)
    _assert_stored(client, digest_of(body), body, media_type)


@pytest.mark.parametrize("index_type, child_type", [(OCI_INDEX, OCI_MANIFEST), (DOCKER_LIST, DOCKER_MANIFEST)])
def test_it_stores_an_index_whose_children_are_present(client, index_type, child_type) -> None:
    amd, _ = push_image(client, NAME, "amd64", media_type=child_type)
    arm, _ = push_image(client, NAME, "arm64", media_type=child_type)
    body = make_index([amd, arm], index_type)
    response = put_manifest(client, NAME, "multi", body, index_type)
    assert response.status_code == 201
    _assert_stored(client, "multi", body, index_type)


def test_it_echoes_the_pushed_content_type_without_parameters(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    put_manifest(client, NAME, "v1", body, f"{OCI_MANIFEST}; charset=utf-8")
    assert client.get(f"/v2/{NAME}/manifests/v1")["Content-Type"] == OCI_MANIFEST


def test_it_takes_the_media_type_from_the_content_type_when_the_body_has_none(client, blobs) -> None:
    doc = json.loads(make_manifest(CONFIG, [LAYER], DOCKER_MANIFEST))
    del doc["mediaType"]
    body = json.dumps(doc).encode()
    assert put_manifest(client, NAME, "v1", body, DOCKER_MANIFEST).status_code == 201
    assert client.get(f"/v2/{NAME}/manifests/v1")["Content-Type"] == DOCKER_MANIFEST


def test_it_stores_a_manifest_put_by_its_digest(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    response = put_manifest(client, NAME, digest_of(body), body)
    assert response.status_code == 201
    assert response["Docker-Content-Digest"] == digest_of(body)
    _assert_stored(client, digest_of(body), body, OCI_MANIFEST)
    assert client.get(f"/v2/{NAME}/tags/list").json()["tags"] == []


def test_it_stores_a_manifest_put_by_its_sha512_digest(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    response = put_manifest(client, NAME, digest_of(body, "sha512"), body)
    assert response.status_code == 201
    assert response["Docker-Content-Digest"] == digest_of(body, "sha512")
    assert client.get(f"/v2/{NAME}/manifests/{digest_of(body, 'sha512')}").content == body


def test_it_refuses_a_put_by_digest_that_does_not_match_the_body(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    response = put_manifest(client, NAME, digest_of(b"other"), body)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    assert client.get(f"/v2/{NAME}/manifests/{digest_of(body)}").status_code == 404


@pytest.mark.parametrize("missing", ["config", "layer"])
def test_it_refuses_a_manifest_whose_blob_is_missing(client, missing) -> None:
    push_blob(client, NAME, LAYER if missing == "config" else CONFIG)
    response = put_manifest(client, NAME, "v1", make_manifest(CONFIG, [LAYER]))
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_BLOB_UNKNOWN"
    assert response.json()["errors"][0]["detail"]["digest"] == digest_of(CONFIG if missing == "config" else LAYER)


def test_it_refuses_a_blob_present_only_in_another_repository(client) -> None:
    push_blob(client, "team/other", CONFIG)
    push_blob(client, "team/other", LAYER)
    response = put_manifest(client, NAME, "v1", make_manifest(CONFIG, [LAYER]))
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_BLOB_UNKNOWN"


def test_it_refuses_an_index_whose_child_is_missing(client) -> None:
    present, _ = push_image(client, NAME, "amd64")
    body = make_index([present, make_manifest(b"{}", [b"never pushed"])])
    response = put_manifest(client, NAME, "multi", body, OCI_INDEX)
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_BLOB_UNKNOWN"


def test_it_accepts_foreign_layers_that_are_not_in_the_registry(client, blobs) -> None:
    doc = json.loads(make_manifest(CONFIG, [LAYER], DOCKER_MANIFEST))
    foreign = descriptor("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", b"windows base")
    doc["layers"].insert(0, {**foreign, "urls": ["https://example.invalid/base"]})
    response = put_manifest(client, NAME, "win", json.dumps(doc).encode(), DOCKER_MANIFEST)
    assert response.status_code == 201


def test_it_accepts_a_dangling_subject_and_answers_oci_subject(client, blobs) -> None:
    subject = make_manifest(b"{}", [b"never pushed"])
    body = make_manifest(CONFIG, [LAYER], subject=subject, artifact_type="application/vnd.example.sig")
    response = put_manifest(client, NAME, digest_of(body), body)
    assert response.status_code == 201
    assert response["OCI-Subject"] == digest_of(subject)


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b'{"schemaVersion": 1, "name": "team/app", "tag": "v1", "fsLayers": []}',
         "application/vnd.docker.distribution.manifest.v1+prettyjws"),
        (b'{"schemaVersion": 1, "name": "team/app", "tag": "v1", "fsLayers": []}', "application/json"),
        (b'{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v1+json"}', OCI_MANIFEST),
    ],
)
def test_it_refuses_schema1_with_manifest_invalid(client, body, content_type) -> None:
    response = put_manifest(client, NAME, "old", body, content_type)
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_INVALID"
    assert "schema1" in response.json()["errors"][0]["message"]


def _layer_doc(**changes) -> bytes:
    doc = json.loads(make_manifest(CONFIG, [LAYER]))
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not None}).encode()


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b"",
        _layer_doc(schemaVersion=3),
        _layer_doc(schemaVersion=True),
        _layer_doc(layers=None),
        _layer_doc(layers={"not": "a list"}),
        _layer_doc(config=None),
        _layer_doc(config={"mediaType": "x", "digest": "sha256:nothex", "size": 1}),
        _layer_doc(config={"mediaType": "x", "digest": digest_of(CONFIG), "size": -1}),
        _layer_doc(layers=[{"digest": digest_of(LAYER), "size": 7}]),
        _layer_doc(annotations={"key": 1}),
        _layer_doc(mediaType="application/vnd.example.unknown+json"),
        _layer_doc(artifactType=5),
        _layer_doc(subject="not a descriptor"),
    ],
)
def test_it_refuses_a_malformed_manifest_with_manifest_invalid(client, blobs, body) -> None:
    response = put_manifest(client, NAME, "bad", body)
    assert response.status_code == 400, body
    assert error_code(response) == "MANIFEST_INVALID"


def test_it_refuses_an_index_without_a_manifests_list(client) -> None:
    body = b'{"schemaVersion":2,"mediaType":"%s"}' % OCI_INDEX.encode()
    response = put_manifest(client, NAME, "bad", body, OCI_INDEX)
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_INVALID"


def test_it_refuses_a_media_type_that_contradicts_the_content_type(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER], OCI_MANIFEST)
    response = put_manifest(client, NAME, "v1", body, DOCKER_MANIFEST)
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_INVALID"


def test_it_refuses_a_manifest_over_the_limit_with_413(client, blobs, settings) -> None:
    body = make_manifest(CONFIG, [LAYER], annotations={"pad": "x" * 2000})
    settings.REGISTRY_MAX_MANIFEST_BYTES = len(body) - 1
    response = put_manifest(client, NAME, "big", body)
    assert response.status_code == 413
    assert response.json()["errors"]
    settings.REGISTRY_MAX_MANIFEST_BYTES = len(body)
    assert put_manifest(client, NAME, "big", body).status_code == 201


def test_it_accepts_a_manifest_of_4_mib_by_default(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER], annotations={"pad": "x" * (4 * 1024 * 1024 - 1000)})
    assert len(body) < 4 * 1024 * 1024
    assert put_manifest(client, NAME, "big", body).status_code == 201


def test_it_applies_every_tag_parameter_and_answers_oci_tag(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    tags = [f"t{i}" for i in range(10)]
    query = "?" + "&".join(f"tag={tag}" for tag in tags)
    response = put_manifest(client, NAME, digest_of(body), body, query=query)
    assert response.status_code == 201
    assert [t.strip() for t in response["OCI-Tag"].split(",")] == tags
    assert client.get(f"/v2/{NAME}/tags/list").json()["tags"] == sorted(tags)
    for tag in tags:
        assert client.get(f"/v2/{NAME}/manifests/{tag}").content == body


def test_it_refuses_an_invalid_tag_parameter_and_stores_nothing(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    response = put_manifest(client, NAME, digest_of(body), body, query="?tag=ok&tag=-bad")
    assert response.status_code == 400
    assert error_code(response) == "MANIFEST_INVALID"
    assert client.get(f"/v2/{NAME}/manifests/{digest_of(body)}").status_code == 404


@pytest.mark.parametrize("reference", ["-leading-dash", ".dot", "x" * 129, "sha256:nothex"])
def test_it_refuses_a_malformed_reference_with_400(client, blobs, reference) -> None:
    response = put_manifest(client, NAME, reference, make_manifest(CONFIG, [LAYER]))
    assert response.status_code == 400
    assert error_code(response) in {"MANIFEST_INVALID", "DIGEST_INVALID"}


def test_it_refuses_an_invalid_repository_name(client) -> None:
    response = put_manifest(client, "Team/App", "v1", make_manifest(CONFIG, [LAYER]))
    assert response.status_code == 400
    assert error_code(response) == "NAME_INVALID"


def test_it_moves_a_tag_to_the_manifest_pushed_last(client) -> None:
    first, _ = push_image(client, NAME, "v1")
    second = make_manifest(CONFIG, [])
    push_blob(client, NAME, CONFIG)
    assert put_manifest(client, NAME, "v1", second).status_code == 201
    assert client.get(f"/v2/{NAME}/manifests/v1").content == second
    assert client.get(f"/v2/{NAME}/manifests/{digest_of(first)}").content == first


def test_it_accepts_the_same_manifest_pushed_twice(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    assert put_manifest(client, NAME, "v1", body).status_code == 201
    assert put_manifest(client, NAME, "v2", body).status_code == 201
    assert client.get(f"/v2/{NAME}/tags/list").json()["tags"] == ["v1", "v2"]


def test_it_refuses_a_body_shorter_than_its_content_length_with_size_invalid(client, blobs) -> None:
    body = make_manifest(CONFIG, [LAYER])
    response = client.generic("PUT", f"/v2/{NAME}/manifests/v1", b"", OCI_MANIFEST,
                              CONTENT_LENGTH=str(len(body) + 5), **{"wsgi.input": io.BytesIO(body)})
    assert response.status_code == 400
    assert error_code(response) == "SIZE_INVALID"
    assert client.get(f"/v2/{NAME}/manifests/v1").status_code == 404


def test_it_keeps_a_nul_in_a_layer_annotation_and_refuses_one_in_its_own(client) -> None:
    # Layer annotations live only in the stored bytes; the manifest's own go into a database
    # column, which cannot hold NUL on PostgreSQL.
    layer, config = b"layer-with-notes", b'{"architecture":"amd64","os":"linux"}'
    push_blob(client, "team/app", layer)
    push_blob(client, "team/app", config)
    doc = json.loads(make_manifest(config, [layer]))
    doc["layers"][0]["annotations"] = {"note": "a\u0000b"}
    body = json.dumps(doc).encode()
    assert put_manifest(client, "team/app", "notes", body).status_code == 201
    assert client.get("/v2/team/app/manifests/notes").content == body
    doc["annotations"] = {"note": "a\u0000b"}
    refused = put_manifest(client, "team/app", "own-notes", json.dumps(doc).encode())
    assert refused.status_code == 400
    assert error_code(refused) == "MANIFEST_INVALID"
