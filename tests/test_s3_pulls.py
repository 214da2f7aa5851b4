"""Pulls on S3 storage (moto): manifests and every HEAD answer from the database without one request
to the store; blob GETs stream ranges from it with `redirect = false` (206, 416 as on the
filesystem: tests/test_blob_pull.py) and with `redirect = true` send every range to the store, which
answers it."""
from __future__ import annotations

from typing import Any, Iterator

import pytest
import requests
from botocore.client import BaseClient

from registry.storage.s3 import S3Driver
from tests.support.images import OCI_MANIFEST
from tests.support.registry_client import body_of, digest_of, error_code, push_image
from tests.support.s3 import s3  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

NAME = "team/app"
DATA = bytes(range(256)) * 40  # 10240 bytes
SIZE = len(DATA)
BLOB = f"/v2/{NAME}/blobs/{digest_of(DATA)}"


@pytest.fixture
def manifest(client, s3: S3Driver) -> str:
    """The digest of a manifest over one layer of DATA, pushed to the bucket."""
    return push_image(client, NAME, "v1", layers=[DATA])[1]


@pytest.fixture
def sent(monkeypatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every request any boto3 client of this process makes from now on: (operation, parameters).
    A presigned URL is signed locally and is no request."""
    calls: list[tuple[str, dict[str, Any]]] = []
    make_api_call = BaseClient._make_api_call

    def counted(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        calls.append((operation, params))
        return make_api_call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counted)
    yield calls


def test_manifests_and_heads_are_answered_without_a_request_to_the_store(client, manifest, sent, settings) -> None:
    for reference in ("v1", manifest):
        for method in (client.get, client.head):
            response = method(f"/v2/{NAME}/manifests/{reference}", HTTP_ACCEPT=OCI_MANIFEST)
            assert response.status_code == 200 and response["Docker-Content-Digest"] == manifest
    head = client.head(BLOB)
    assert head.status_code == 200 and head["Content-Length"] == str(SIZE)
    redirected = client.get(BLOB)  # the URL is presigned here: the client asks the store
    assert redirected.status_code == 307
    assert sent == []
    settings.REGISTRY_REDIRECT = False
    assert body_of(client.get(BLOB)) == DATA
    assert "GetObject" in [operation for operation, _ in sent]  # what is counted is every request


@pytest.mark.parametrize("header, start, end", [
    ("bytes=0-99", 0, 99),
    ("bytes=100-", 100, SIZE - 1),
    ("bytes=-10", SIZE - 10, SIZE - 1),
    ("bytes=10000-99999", 10000, SIZE - 1),
    ("bytes=-999999", 0, SIZE - 1),
    (f"bytes={SIZE - 1}-{SIZE - 1}", SIZE - 1, SIZE - 1),
])
def test_it_streams_a_range_from_the_store_with_206(client, manifest, sent, settings, header, start, end) -> None:
    settings.REGISTRY_REDIRECT = False
    response = client.get(BLOB, headers={"Range": header})
    assert response.status_code == 206
    assert body_of(response) == DATA[start:end + 1]
    assert response["Content-Length"] == str(end - start + 1)
    assert response["Content-Range"] == f"bytes {start}-{end}/{SIZE}"
    assert response["Docker-Content-Digest"] == digest_of(DATA)
    # One GET of the object from the range's first byte: what comes before it is never fetched.
    gets = [params for operation, params in sent if operation == "GetObject"]
    assert len(gets) == 1 and gets[0].get("Range", "bytes=0-") == f"bytes={start}-"


@pytest.mark.parametrize("header", [f"bytes={SIZE}-", f"bytes={SIZE + 5}-{SIZE + 10}", "bytes=-0"])
def test_it_refuses_an_unsatisfiable_range_with_416(client, manifest, settings, header) -> None:
    settings.REGISTRY_REDIRECT = False
    response = client.get(BLOB, headers={"Range": header})
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{SIZE}"
    assert error_code(response) == "RANGE_INVALID"


@pytest.mark.parametrize("header", ["bytes=5-2", "items=0-5", "bytes=0-1,4-5", "bytes=abc"])
def test_it_sends_everything_for_a_range_it_does_not_serve(client, manifest, settings, header) -> None:
    settings.REGISTRY_REDIRECT = False
    response = client.get(BLOB, headers={"Range": header})
    assert response.status_code == 200 and body_of(response) == DATA


@pytest.mark.parametrize("header, status, body", [
    ("bytes=1000-1999", 206, DATA[1000:2000]),
    ("bytes=-10", 206, DATA[-10:]),
    (f"bytes={SIZE}-", 416, None),
])
def test_with_redirects_every_range_goes_to_the_store_which_answers_it(client, manifest, header, status,
                                                                       body) -> None:
    # The registry does not judge the range: the client sends it again to the presigned URL.
    response = client.get(BLOB, headers={"Range": header})
    assert response.status_code == 307 and response["Docker-Content-Digest"] == digest_of(DATA)
    followed = requests.get(response["Location"], headers={"Range": header}, timeout=30)  # moto answers
    assert followed.status_code == status
    if body is not None:
        assert followed.content == body
