"""The tokens page: create (shown once), list, revoke, through the same service as /api/tokens."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.support.ui_fixtures import auth_on, plain_static, sign_in, users  # noqa: F401
from tokens import services

pytestmark = pytest.mark.django_db
TOKEN = re.compile(r"svc_[A-Za-z0-9_-]{43}")


def create(client: Client, **fields: str):
    data = {"role": "read", "ttl_days": "30", "description": "", **fields}
    return client.post("/ui/tokens/", data)


def test_it_creates_a_token_and_shows_it_once_with_the_login_line(client: Client, auth_on) -> None:
    sign_in(client)
    response = create(client, role="write", ttl_days="7", description="CI for team/app")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.content.decode()
    token = TOKEN.search(body).group(0)
    assert f"echo {token} | docker login -u token --password-stdin testserver" in body
    record = services.authenticate_token(token)
    assert record is not None and record.owner == "alice" and record.role == "write"
    assert record.hash_prefix in body and "CI for team/app" in body

    again = client.get("/ui/tokens/").content.decode()
    assert token not in again and record.hash_prefix in again and "CI for team/app" in again


def test_it_lists_only_the_signed_in_users_tokens(client: Client, auth_on) -> None:
    services.create_token("bob", description="bob's secret pipeline")
    sign_in(client)
    create(client, description="alice laptop")
    body = client.get("/ui/tokens/").content.decode()
    assert "alice laptop" in body and "bob's secret pipeline" not in body


@pytest.mark.parametrize("fields, message", [
    ({"ttl_days": "0"}, "ttl_days must be between 1 and"),
    ({"ttl_days": "100000"}, "ttl_days must be between 1 and"),
    ({"ttl_days": "soon"}, "Enter a whole number."),
    ({"role": "root"}, "role must be one of read, write, admin"),
    ({"description": "x" * 300}, "description must be at most"),
])
def test_it_explains_invalid_token_requests(client: Client, auth_on, fields, message) -> None:
    sign_in(client)
    response = create(client, **fields)
    assert response.status_code == 400
    body = response.content.decode()
    assert message in body and not TOKEN.search(body)
    assert services.list_tokens("alice") == []


def test_it_revokes_a_token(client: Client, auth_on) -> None:
    sign_in(client)
    token = TOKEN.search(create(client, description="short-lived").content.decode()).group(0)
    prefix = services.authenticate_token(token).hash_prefix
    response = client.post("/ui/tokens/revoke", {"hash_prefix": prefix})
    assert response.status_code == 302 and response["Location"] == f"/ui/tokens/?revoked={prefix}"
    assert services.authenticate_token(token) is None
    body = client.get(response["Location"]).content.decode()
    assert f"Token <code>{prefix}</code> revoked." in body and "short-lived" not in body


def test_it_cannot_revoke_another_users_token(client: Client, auth_on) -> None:
    bobs = services.create_token("bob")
    sign_in(client)
    response = client.post("/ui/tokens/revoke", {"hash_prefix": bobs.hash_prefix})
    assert response.status_code == 404
    assert services.authenticate_token(bobs.token) is not None


def test_it_rejects_a_malformed_hash_prefix(client: Client, auth_on) -> None:
    sign_in(client)
    assert client.post("/ui/tokens/revoke", {"hash_prefix": "not-a-prefix"}).status_code == 400
    assert client.post("/ui/tokens/revoke", {}).status_code == 400


def test_it_needs_a_signed_in_user_even_with_auth_off(client: Client, users) -> None:
    assert client.get("/ui/tokens/").status_code == 302
    assert client.post("/ui/tokens/", {"role": "admin", "ttl_days": "1"}).status_code == 302
    assert services.list_tokens() == []
    sign_in(client)
    assert client.get("/ui/tokens/").status_code == 200
