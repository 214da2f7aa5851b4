"""end-10: DELETE of a blob unlinks it from one repository."""
from __future__ import annotations

import pytest

from tests.support.registry_client import body_of, digest_of, error_code, push_blob

pytestmark = pytest.mark.django_db


def test_it_deletes_a_blob_with_202_and_then_answers_404(client) -> None:
    digest = push_blob(client, "team/app", b"doomed")
    response = client.delete(f"/v2/team/app/blobs/{digest}")
    assert response.status_code == 202
    assert response["Content-Length"] == "0"
    assert client.head(f"/v2/team/app/blobs/{digest}").status_code == 404
    assert error_code(client.get(f"/v2/team/app/blobs/{digest}")) == "BLOB_UNKNOWN"


def test_it_leaves_the_blob_in_other_repositories(client) -> None:
    digest = push_blob(client, "team/app", b"shared")
    push_blob(client, "team/other", b"shared")
    assert client.delete(f"/v2/team/app/blobs/{digest}").status_code == 202
    response = client.get(f"/v2/team/other/blobs/{digest}")
    assert response.status_code == 200
    assert body_of(response) == b"shared"


def test_it_answers_404_blob_unknown_for_a_blob_not_in_the_repository(client) -> None:
    push_blob(client, "team/app", b"present")
    response = client.delete(f"/v2/team/app/blobs/{digest_of(b'absent')}")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UNKNOWN"


def test_it_answers_404_for_an_unknown_repository(client) -> None:
    response = client.delete(f"/v2/no/such/repo/blobs/{digest_of(b'x')}")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UNKNOWN"


def test_it_refuses_a_malformed_digest_with_400(client) -> None:
    push_blob(client, "team/app", b"present")
    response = client.delete("/v2/team/app/blobs/sha256:nothex")
    assert response.status_code == 400
    assert error_code(response) == "DIGEST_INVALID"


def test_it_answers_405_unsupported_when_deletes_are_disabled(client, settings) -> None:
    digest = push_blob(client, "team/app", b"kept")
    settings.REGISTRY_DELETE_ENABLED = False
    response = client.delete(f"/v2/team/app/blobs/{digest}")
    assert response.status_code == 405
    assert error_code(response) == "UNSUPPORTED"
    assert client.get(f"/v2/team/app/blobs/{digest}").status_code == 200
