"""end-11: cross-repository mount, with and without ``from``."""
from __future__ import annotations

import pytest

from tests.support.registry_client import body_of, digest_of, error_code, post_upload, push_blob

pytestmark = pytest.mark.django_db

DATA = b"mountable layer" * 100


@pytest.fixture
def digest(client) -> str:
    return push_blob(client, "team/source", DATA)


def _assert_mounted(client, response, name: str, digest: str) -> None:
    assert response.status_code == 201, response.content
    assert response["Location"] == f"/v2/{name}/blobs/{digest}"
    assert response["Docker-Content-Digest"] == digest
    pulled = client.get(response["Location"])
    assert pulled.status_code == 200
    assert body_of(pulled) == DATA


def _assert_upload_started(response, name: str) -> None:
    assert response.status_code == 202, response.content
    assert response["Location"].startswith(f"/v2/{name}/blobs/uploads/")
    assert response["Docker-Upload-UUID"]


def test_it_mounts_a_blob_from_the_named_repository_with_201(client, digest) -> None:
    response = post_upload(client, "team/target", f"?mount={digest}&from=team/source")
    _assert_mounted(client, response, "team/target", digest)


def test_it_stores_the_data_once_after_a_mount(client, digest, storage_root) -> None:
    post_upload(client, "team/target", f"?mount={digest}&from=team/source")
    assert len(list(storage_root.glob("blobs/**/data"))) == 1


def test_it_starts_an_upload_when_the_source_lacks_the_blob(client, digest) -> None:
    push_blob(client, "team/empty", b"unrelated")
    response = post_upload(client, "team/target", f"?mount={digest}&from=team/empty")
    _assert_upload_started(response, "team/target")
    assert client.get(f"/v2/team/target/blobs/{digest}").status_code == 404


def test_it_starts_an_upload_when_the_source_repository_is_unknown(client, digest) -> None:
    response = post_upload(client, "team/target", f"?mount={digest}&from=no/such")
    _assert_upload_started(response, "team/target")


def test_it_mounts_without_from_when_the_blob_is_known(client, digest) -> None:
    response = post_upload(client, "team/target", f"?mount={digest}")
    _assert_mounted(client, response, "team/target", digest)


def test_it_starts_an_upload_without_from_for_an_unknown_blob(client) -> None:
    response = post_upload(client, "team/target", f"?mount={digest_of(b'dummy')}")
    _assert_upload_started(response, "team/target")


@pytest.mark.parametrize("mount", ["sha256:bad", "nodigest", "sha256:../../etc"])
def test_it_starts_an_upload_for_a_malformed_mount_digest(client, mount) -> None:
    response = post_upload(client, "team/target", f"?mount={mount}&from=team/source")
    _assert_upload_started(response, "team/target")


def test_it_starts_an_upload_when_the_data_is_missing_from_storage(client, digest, storage_root) -> None:
    for data_file in storage_root.glob("blobs/**/data"):
        data_file.unlink()
    response = post_upload(client, "team/target", f"?mount={digest}&from=team/source")
    _assert_upload_started(response, "team/target")


def test_it_mounts_a_blob_the_repository_already_has(client, digest) -> None:
    response = post_upload(client, "team/source", f"?mount={digest}&from=team/source")
    _assert_mounted(client, response, "team/source", digest)


def test_it_refuses_an_invalid_target_name(client, digest) -> None:
    response = post_upload(client, "Bad_Name", f"?mount={digest}&from=team/source")
    assert response.status_code == 400
    assert error_code(response) == "NAME_INVALID"


def test_it_falls_back_to_a_monolithic_upload_when_mount_fails_and_a_digest_is_given(client) -> None:
    data = b"pushed instead"
    query = f"?mount={digest_of(data)}&from=team/source&digest={digest_of(data)}"
    response = post_upload(client, "team/target", query, data)
    assert response.status_code == 201
    assert body_of(client.get(response["Location"])) == data
