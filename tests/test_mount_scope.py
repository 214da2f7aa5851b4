"""A mount without ``from`` finds a blob only in repositories the credential may pull: a signed token
scoped to one repository cannot read another's blob by naming its digest (the mount falls back to an
upload session, 202, as the spec allows)."""
from __future__ import annotations

import pytest

from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.support.registry_client import body_of, digest_of, push_blob

pytestmark = pytest.mark.django_db

SECRET = b"someone else's layer" * 50
ALICE = basic("alice", "wonderland")


@pytest.fixture
def bearer_on(settings, auth_on):  # type: ignore[no-untyped-def]
    settings.AUTH_CHALLENGE = "bearer"
    return auth_on


def signed(client, scope: str) -> str:  # type: ignore[no-untyped-def]
    response = client.get("/auth/token", {"scope": scope}, HTTP_AUTHORIZATION=ALICE)
    assert response.status_code == 200, response.content
    return response.json()["token"]


@pytest.fixture
def secret(client, bearer_on) -> str:  # type: ignore[no-untyped-def]
    digest = push_blob_as(client, "other/private", SECRET)
    return digest


def push_blob_as(client, name: str, data: bytes) -> str:  # type: ignore[no-untyped-def]
    client.defaults["HTTP_AUTHORIZATION"] = ALICE
    try:
        return push_blob(client, name, data)
    finally:
        del client.defaults["HTTP_AUTHORIZATION"]


def test_a_token_scoped_to_one_repository_cannot_mount_anothers_blob(client, secret: str) -> None:
    token = signed(client, "repository:scratch/mine:pull,push")

    response = client.post(f"/v2/scratch/mine/blobs/uploads/?mount={secret}", HTTP_AUTHORIZATION=bearer(token))

    assert response.status_code == 202, response.content  # an ordinary upload session instead
    assert response["Location"].startswith("/v2/scratch/mine/blobs/uploads/")
    pulled = client.get(f"/v2/scratch/mine/blobs/{secret}", HTTP_AUTHORIZATION=bearer(token))
    assert pulled.status_code == 404


def test_it_mounts_from_a_repository_the_token_may_pull(client, secret: str) -> None:
    token = signed(client, "repository:scratch/mine:pull,push repository:other/private:pull")

    response = client.post(f"/v2/scratch/mine/blobs/uploads/?mount={secret}", HTTP_AUTHORIZATION=bearer(token))

    assert response.status_code == 201, response.content
    assert body_of(client.get(f"/v2/scratch/mine/blobs/{secret}", HTTP_AUTHORIZATION=bearer(token))) == SECRET


def test_it_finds_the_one_readable_source_among_many(client, secret: str) -> None:
    for i in range(60):  # more sources than one lookup reads at once
        push_blob_as(client, f"other/r{i:02d}", SECRET)
    push_blob_as(client, "zz/mine-too", SECRET)
    token = signed(client, "repository:scratch/mine:pull,push repository:zz/mine-too:pull")

    response = client.post(f"/v2/scratch/mine/blobs/uploads/?mount={secret}", HTTP_AUTHORIZATION=bearer(token))

    assert response.status_code == 201, response.content


def test_users_and_api_tokens_keep_mounting_from_anywhere(client, secret: str) -> None:
    response = client.post(f"/v2/scratch/mine/blobs/uploads/?mount={secret}", HTTP_AUTHORIZATION=ALICE)
    assert response.status_code == 201, response.content
    assert digest_of(SECRET) == secret
