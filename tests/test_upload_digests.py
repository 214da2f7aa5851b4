"""Every upload is verified: a wrong digest or a short body stores nothing."""
from __future__ import annotations

import io

import pytest

from registry.models import Blob, Upload
from tests.support.registry_client import (
    body_of,
    digest_of,
    error_code,
    patch,
    post_upload,
    put_upload,
    start_upload,
)

pytestmark = pytest.mark.django_db

DATA = b"verified content " * 500
WRONG = digest_of(b"something else")


def _nothing_stored(client, storage_root) -> None:
    assert not Blob.objects.exists()
    assert not list(storage_root.glob("blobs/**/data"))
    assert client.get(f"/v2/team/app/blobs/{digest_of(DATA)}").status_code == 404


def test_it_refuses_a_monolithic_post_with_the_wrong_digest(client, storage_root) -> None:
    response = post_upload(client, "team/app", f"?digest={WRONG}", DATA)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    _nothing_stored(client, storage_root)
    assert not Upload.objects.exists()
    assert not list((storage_root / "uploads").iterdir())


def test_it_refuses_a_closing_put_with_the_wrong_digest_and_drops_the_session(client, storage_root) -> None:
    location = start_upload(client, "team/app")["Location"]
    patch(client, location, DATA)
    response = put_upload(client, location, WRONG)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    _nothing_stored(client, storage_root)
    assert client.get(location).status_code == 404


def test_it_refuses_a_wrong_digest_given_with_the_final_chunk(client, storage_root) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = put_upload(client, location, WRONG, DATA)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    _nothing_stored(client, storage_root)


def test_it_refuses_a_wrong_sha512_digest(client, storage_root) -> None:
    wrong = digest_of(b"other", "sha512")
    response = post_upload(client, "team/app", f"?digest={wrong}", DATA)
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"
    _nothing_stored(client, storage_root)


def test_it_verifies_a_sha512_digest_on_a_sha256_session(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    patch(client, location, DATA)
    response = put_upload(client, location, digest_of(DATA, "sha512"))
    assert response.status_code == 201
    assert response["Docker-Content-Digest"] == digest_of(DATA, "sha512")


def test_it_verifies_a_sha256_digest_on_a_sha512_session(client) -> None:
    location = post_upload(client, "team/app", "?digest-algorithm=sha512")["Location"]
    patch(client, location, DATA)
    assert put_upload(client, location, digest_of(DATA)).status_code == 201


def _short_body(declared: int, sent: bytes) -> dict:
    """Request extras for a client that announces ``declared`` bytes and sends fewer."""
    return {"CONTENT_LENGTH": str(declared), "wsgi.input": io.BytesIO(sent)}


def test_it_refuses_a_body_shorter_than_its_content_length_with_size_invalid(client, storage_root) -> None:
    response = post_upload(client, "team/app", f"?digest={digest_of(DATA)}", b"",
                           **_short_body(len(DATA) + 10, DATA))
    assert response.status_code == 400
    assert error_code(response) == "SIZE_INVALID"
    _nothing_stored(client, storage_root)
    assert not Upload.objects.exists()


def test_it_cuts_a_short_patch_back_so_the_session_can_retry(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    patch(client, location, DATA[:100], "0-99")
    short = client.generic("PATCH", location, b"", "application/octet-stream",
                           headers={"Content-Range": "100-199"}, **_short_body(100, DATA[100:150]))
    assert short.status_code == 400
    assert error_code(short) == "SIZE_INVALID"
    assert client.get(location)["Range"] == "0-99"
    assert patch(client, location, DATA[100:], f"100-{len(DATA) - 1}").status_code == 202
    done = put_upload(client, location, digest_of(DATA))
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == DATA


def test_it_refuses_a_short_final_chunk_with_size_invalid(client, storage_root) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = put_upload(client, location, digest_of(DATA), b"", **_short_body(len(DATA), DATA[:10]))
    assert response.status_code == 400
    assert error_code(response) == "SIZE_INVALID"
    _nothing_stored(client, storage_root)


def test_it_refuses_a_negative_content_length(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    response = client.generic("PATCH", location, b"", "application/octet-stream", CONTENT_LENGTH="-1")
    assert response.status_code == 400
