"""end-2: HEAD and GET of a blob, whole or by Range."""
from __future__ import annotations

import pytest

from tests.support.registry_client import body_of, digest_of, error_code, push_blob

pytestmark = pytest.mark.django_db

DATA = bytes(range(256)) * 40  # 10240 bytes
SIZE = len(DATA)


@pytest.fixture
def blob_url(client) -> str:
    digest = push_blob(client, "team/app", DATA)
    return f"/v2/team/app/blobs/{digest}"


def _assert_blob_headers(response) -> None:
    assert response["Docker-Content-Digest"] == digest_of(DATA)
    assert response["ETag"] == f'"{digest_of(DATA)}"'
    assert response["Accept-Ranges"] == "bytes"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Type"] == "application/octet-stream"


def test_it_serves_the_whole_blob_with_its_headers(client, blob_url) -> None:
    response = client.get(blob_url)
    assert response.status_code == 200
    assert body_of(response) == DATA
    assert response["Content-Length"] == str(SIZE)
    assert "Content-Disposition" not in response
    _assert_blob_headers(response)


def test_it_answers_head_with_the_headers_and_no_body(client, blob_url) -> None:
    response = client.head(blob_url)
    assert response.status_code == 200
    assert response["Content-Length"] == str(SIZE)
    assert body_of(response) == b""
    _assert_blob_headers(response)


@pytest.mark.parametrize(
    "header, start, end",
    [
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, SIZE - 1),
        ("bytes=-10", SIZE - 10, SIZE - 1),
        ("bytes=10000-99999", 10000, SIZE - 1),
        ("bytes=-999999", 0, SIZE - 1),
        (f"bytes={SIZE - 1}-{SIZE - 1}", SIZE - 1, SIZE - 1),
    ],
)
def test_it_serves_a_range_with_206(client, blob_url, header, start, end) -> None:
    response = client.get(blob_url, headers={"Range": header})
    assert response.status_code == 206
    assert body_of(response) == DATA[start : end + 1]
    assert response["Content-Length"] == str(end - start + 1)
    assert response["Content-Range"] == f"bytes {start}-{end}/{SIZE}"
    _assert_blob_headers(response)


@pytest.mark.parametrize("header", [f"bytes={SIZE}-", f"bytes={SIZE + 5}-{SIZE + 10}", "bytes=-0"])
def test_it_refuses_an_unsatisfiable_range_with_416(client, blob_url, header) -> None:
    response = client.get(blob_url, headers={"Range": header})
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{SIZE}"
    assert response.json()["errors"]


@pytest.mark.parametrize("header", ["bytes=5-2", "items=0-5", "bytes=0-1,4-5", "bytes=abc", "bytes=-"])
def test_it_ignores_a_malformed_or_multi_range_and_sends_everything(client, blob_url, header) -> None:
    response = client.get(blob_url, headers={"Range": header})
    assert response.status_code == 200
    assert body_of(response) == DATA


def test_it_refuses_a_range_starting_in_an_empty_blob_with_416(client) -> None:
    digest = push_blob(client, "team/app", b"")
    response = client.get(f"/v2/team/app/blobs/{digest}", headers={"Range": "bytes=0-"})
    assert response.status_code == 416
    assert response["Content-Range"] == "bytes */0"


def test_it_answers_a_suffix_range_of_an_empty_blob_with_the_empty_body(client) -> None:
    digest = push_blob(client, "team/app", b"")
    response = client.get(f"/v2/team/app/blobs/{digest}", headers={"Range": "bytes=-5"})
    assert response.status_code == 200
    assert body_of(response) == b""
    assert "Content-Range" not in response


def test_it_serves_an_empty_blob(client) -> None:
    digest = push_blob(client, "team/app", b"")
    response = client.get(f"/v2/team/app/blobs/{digest}")
    assert response.status_code == 200
    assert body_of(response) == b""
    assert response["Content-Length"] == "0"


def test_it_answers_404_blob_unknown_for_a_missing_blob(client, blob_url) -> None:
    missing = digest_of(b"never pushed")
    for method in (client.get, client.head):
        response = method(f"/v2/team/app/blobs/{missing}")
        assert response.status_code == 404
    assert error_code(client.get(f"/v2/team/app/blobs/{missing}")) == "BLOB_UNKNOWN"


def test_it_hides_a_blob_from_repositories_it_was_not_pushed_into(client, blob_url) -> None:
    push_blob(client, "other/app", b"something else")
    response = client.get(f"/v2/other/app/blobs/{digest_of(DATA)}")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UNKNOWN"


def test_it_answers_404_for_an_unknown_repository(client) -> None:
    response = client.get(f"/v2/nobody/blobs/{digest_of(DATA)}")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UNKNOWN"


@pytest.mark.parametrize("digest", ["sha256:short", "md5:" + "0" * 32, "sha256:" + "G" * 64, "nodigest"])
def test_it_refuses_a_malformed_digest_with_digest_invalid(client, digest) -> None:
    response = client.get(f"/v2/team/app/blobs/{digest}")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"


def test_it_answers_404_to_get_and_head_when_the_data_is_gone_from_storage(client, blob_url, storage_root) -> None:
    for data_file in (storage_root / "blobs").rglob("data"):
        data_file.unlink()
    response = client.get(blob_url)
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UNKNOWN"
    assert client.head(blob_url).status_code == 404


def test_it_takes_the_data_again_after_it_went_missing(client, blob_url, storage_root) -> None:
    for data_file in (storage_root / "blobs").rglob("data"):
        data_file.unlink()
    push_blob(client, "team/app", DATA)
    assert body_of(client.get(blob_url)) == DATA
