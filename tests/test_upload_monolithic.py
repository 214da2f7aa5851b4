"""end-4a/4b/4c and end-6: POST ?digest= in one request, and POST then PUT."""
from __future__ import annotations

import pytest

from registry.models import Upload
from tests.support.registry_client import (
    body_of,
    digest_of,
    error_code,
    post_upload,
    put_upload,
    start_upload,
)

pytestmark = pytest.mark.django_db

DATA = b"monolithic blob " * 1000


def test_it_stores_a_blob_posted_with_its_digest_with_201(client) -> None:
    digest = digest_of(DATA)
    response = post_upload(client, "team/app", f"?digest={digest}", DATA)
    assert response.status_code == 201
    assert response["Location"] == f"/v2/team/app/blobs/{digest}"
    assert response["Docker-Content-Digest"] == digest
    assert body_of(client.get(response["Location"])) == DATA
    assert not Upload.objects.exists()


def test_it_starts_a_session_with_202_location_and_uuid(client) -> None:
    response = start_upload(client, "team/app")
    upload_id = response["Docker-Upload-UUID"]
    assert response["Location"] == f"/v2/team/app/blobs/uploads/{upload_id}"
    assert response["Range"] == "0-0"
    assert response["Content-Length"] == "0"


def test_it_accepts_the_upload_url_without_a_trailing_slash(client) -> None:
    response = client.post("/v2/team/app/blobs/uploads")
    assert response.status_code == 202
    assert response["Location"].startswith("/v2/team/app/blobs/uploads/")


def test_it_gives_each_session_its_own_id(client) -> None:
    first = start_upload(client, "team/app")["Docker-Upload-UUID"]
    second = start_upload(client, "team/app")["Docker-Upload-UUID"]
    assert first != second


def test_it_completes_a_post_then_put_upload_with_201(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = put_upload(client, location, digest_of(DATA), DATA)
    assert response.status_code == 201
    assert response["Location"] == f"/v2/team/app/blobs/{digest_of(DATA)}"
    assert response["Docker-Content-Digest"] == digest_of(DATA)
    assert body_of(client.get(response["Location"])) == DATA


def test_it_refuses_a_put_without_a_digest_with_400(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = client.generic("PUT", location, DATA, "application/octet-stream")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"


def test_it_refuses_a_malformed_digest_on_post_with_400(client) -> None:
    response = post_upload(client, "team/app", "?digest=sha256:123", DATA)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    assert not Upload.objects.exists()


def test_it_answers_404_blob_upload_unknown_for_a_put_to_an_unknown_session(client) -> None:
    response = put_upload(client, "/v2/team/app/blobs/uploads/" + "0" * 32, digest_of(DATA), DATA)
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"


@pytest.mark.parametrize("upload_id", ["not-an-id", "..", "%2e%2e", "0" * 31 + "g"])
def test_it_answers_404_for_a_malformed_session_id(client, upload_id) -> None:
    response = put_upload(client, f"/v2/team/app/blobs/uploads/{upload_id}", digest_of(DATA), DATA)
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"


def test_it_refuses_an_invalid_repository_name_with_name_invalid(client) -> None:
    response = post_upload(client, "Team/App", "")
    assert response.status_code == 400
    assert error_code(response) == "NAME_INVALID"


def test_it_starts_a_sha512_session_and_verifies_with_sha512(client) -> None:
    response = post_upload(client, "team/app", "?digest-algorithm=sha512")
    assert response.status_code == 202
    done = put_upload(client, response["Location"], digest_of(DATA, "sha512"), DATA)
    assert done.status_code == 201
    assert done["Docker-Content-Digest"] == digest_of(DATA, "sha512")
    got = client.get(f"/v2/team/app/blobs/{digest_of(DATA, 'sha512')}")
    assert got["Docker-Content-Digest"] == digest_of(DATA, "sha512")
    assert body_of(got) == DATA


def test_it_refuses_an_unsupported_digest_algorithm_with_400(client) -> None:
    response = post_upload(client, "team/app", "?digest-algorithm=md5")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    assert not Upload.objects.exists()


def test_it_stores_a_monolithic_sha512_blob(client) -> None:
    digest = digest_of(DATA, "sha512")
    response = post_upload(client, "team/app", f"?digest={digest}", DATA)
    assert response.status_code == 201
    assert body_of(client.get(f"/v2/team/app/blobs/{digest}")) == DATA


def test_it_stores_a_blob_only_once_when_pushed_twice(client, storage_root) -> None:
    digest = digest_of(DATA)
    for name in ("team/app", "team/other"):
        assert post_upload(client, name, f"?digest={digest}", DATA).status_code == 201
    assert len(list((storage_root / "blobs").rglob("data"))) == 1
    assert not list((storage_root / "uploads").iterdir())
