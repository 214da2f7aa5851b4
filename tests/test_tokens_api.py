"""POST /api/tokens, /api/tokens/list and /api/tokens/revoke: JSON in, JSON out, field-named errors."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tokens import services

pytestmark = pytest.mark.django_db

ALICE = {"username": "alice", "password": "wonderland"}
BOB = {"username": "bob", "password": "builder"}


def post(client: Any, path: str, body: Any, **extra: Any) -> Any:
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(path, raw, content_type="application/json", **extra)


def test_it_creates_a_token_shown_once(client, auth_on) -> None:
    response = post(client, "/api/tokens", {**ALICE, "role": "write", "ttl_days": 7, "description": "ci"})
    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"svc_[A-Za-z0-9_-]{43}", body["token"])
    assert body["expires_in_days"] == 7
    assert body["role"] == "write"
    assert body["description"] == "ci"
    assert re.fullmatch(r"[0-9a-f]{16}", body["hash_prefix"])
    created = datetime.fromisoformat(body["created_at"])
    assert datetime.fromisoformat(body["expires_at"]) - created == timedelta(days=7)
    assert services.authenticate_token(body["token"]).owner == "alice"


def test_it_defaults_to_a_read_token_for_thirty_days(client, auth_on) -> None:
    body = post(client, "/api/tokens", ALICE).json()
    assert (body["role"], body["expires_in_days"], body["description"]) == ("read", 30, "")


def test_it_works_with_auth_off_too(client, auth_paths) -> None:
    assert post(client, "/api/tokens", ALICE).status_code == 201
    assert post(client, "/api/tokens", {**ALICE, "password": "x"}).status_code == 401


@pytest.mark.parametrize(("body", "field"), [
    (b"not json", "body"),
    (b"\xff\xfe", "body"),
    (b"[1, 2]", "body"),
    (b'"alice"', "body"),
    (b"", "body"),
    ({"password": "wonderland"}, "username"),
    ({"username": "alice"}, "password"),
    ({"username": 7, "password": "wonderland"}, "username"),
    ({"username": "alice", "password": None}, "password"),
    ({**ALICE, "role": "owner"}, "role"),
    ({**ALICE, "role": "READ"}, "role"),
    ({**ALICE, "role": None}, "role"),
    ({**ALICE, "ttl_days": "30"}, "ttl_days"),
    ({**ALICE, "ttl_days": True}, "ttl_days"),
    ({**ALICE, "ttl_days": 1.5}, "ttl_days"),
    ({**ALICE, "ttl_days": None}, "ttl_days"),
    ({**ALICE, "ttl_days": 0}, "ttl_days"),
    ({**ALICE, "ttl_days": -1}, "ttl_days"),
    ({**ALICE, "ttl_days": 3651}, "ttl_days"),
    ({**ALICE, "description": "x" * 257}, "description"),
    ({**ALICE, "description": ["ci"]}, "description"),
])
def test_it_refuses_bad_input_naming_the_field(client, auth_on, body: Any, field: str) -> None:
    response = post(client, "/api/tokens", body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert field in response.json()["error"]
    assert services.list_tokens() == []


@pytest.mark.parametrize("ttl_days", [1, 3650])
def test_it_accepts_the_ttl_bounds(client, auth_on, ttl_days: int) -> None:
    response = post(client, "/api/tokens", {**ALICE, "ttl_days": ttl_days, "description": "x" * 256})
    assert response.json()["expires_in_days"] == ttl_days


@pytest.mark.parametrize("credentials", [
    {"username": "alice", "password": "wrong"},
    {"username": "mallory", "password": "wonderland"},
    {"username": "token", "password": "wonderland"},
])
@pytest.mark.parametrize("path", ["/api/tokens", "/api/tokens/list", "/api/tokens/revoke"])
def test_it_refuses_wrong_credentials(client, auth_on, path: str, credentials: dict[str, str]) -> None:
    response = post(client, path, {**credentials, "hash_prefix": "0" * 16})
    assert response.status_code == 401
    assert response.json() == {"error": "invalid username or password"}


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
@pytest.mark.parametrize("path", ["/api/tokens", "/api/tokens/list", "/api/tokens/revoke"])
def test_it_allows_only_post(client, auth_on, path: str, method: str) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert "POST" in response.json()["error"]


def test_it_caps_the_body_at_64_kib(client, auth_on) -> None:
    padding = "x" * (64 * 1024)
    response = post(client, "/api/tokens", {**ALICE, "description": padding})
    assert response.status_code == 413
    assert response.json()["field"] == "body"


def test_it_lists_only_the_callers_tokens_without_secrets(client, auth_on) -> None:
    mine = post(client, "/api/tokens", {**ALICE, "role": "admin", "description": "deploy"}).json()
    post(client, "/api/tokens", BOB)
    response = post(client, "/api/tokens/list", ALICE)
    assert response.status_code == 200
    tokens = response.json()["tokens"]
    assert len(tokens) == 1
    entry = tokens[0]
    assert entry["hash_prefix"] == mine["hash_prefix"]
    assert (entry["role"], entry["description"], entry["expired"]) == ("admin", "deploy", False)
    assert entry["expires_at"] == mine["expires_at"] and entry["created_at"] == mine["created_at"]
    assert mine["token"] not in response.content.decode()
    assert services.token_digest(mine["token"]) not in response.content.decode()


def test_it_revokes_a_token_at_once(client, auth_on) -> None:
    created = post(client, "/api/tokens", {**ALICE, "role": "write"}).json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {created['token']}"}
    assert client.get("/v2/_catalog", **auth).status_code == 200
    response = post(client, "/api/tokens/revoke", {**ALICE, "hash_prefix": created["hash_prefix"]})
    assert response.status_code == 200
    assert response.json() == {"revoked": created["hash_prefix"]}
    assert client.get("/v2/_catalog", **auth).status_code == 401
    assert post(client, "/api/tokens/list", ALICE).json() == {"tokens": []}


@pytest.mark.parametrize("prefix", ["abc", "0123456789abcdef0", "0123456789abcdeg", 1234567890123456, None])
def test_it_refuses_a_prefix_that_is_not_16_hex_characters(client, auth_on, prefix: Any) -> None:
    response = post(client, "/api/tokens/revoke", {**ALICE, "hash_prefix": prefix})
    assert response.status_code == 400
    assert response.json()["field"] == "hash_prefix"


def test_it_requires_the_prefix(client, auth_on) -> None:
    response = post(client, "/api/tokens/revoke", ALICE)
    assert response.status_code == 400
    assert response.json()["field"] == "hash_prefix"


def test_it_answers_404_for_unknown_and_other_users_tokens(client, auth_on) -> None:
    bobs = post(client, "/api/tokens", BOB).json()
    unknown = post(client, "/api/tokens/revoke", {**ALICE, "hash_prefix": "0123456789abcdef"})
    assert unknown.status_code == 404
    others = post(client, "/api/tokens/revoke", {**ALICE, "hash_prefix": bobs["hash_prefix"]})
    assert others.status_code == 404
    assert others.json()["field"] == "hash_prefix"
    assert services.authenticate_token(bobs["token"]) is not None


def test_it_accepts_an_upper_case_prefix(client, auth_on) -> None:
    created = post(client, "/api/tokens", ALICE).json()
    response = post(client, "/api/tokens/revoke", {**ALICE, "hash_prefix": created["hash_prefix"].upper()})
    assert response.json() == {"revoked": created["hash_prefix"]}
