"""/auth/token's password checks (GET with Basic, the OAuth2 password grant) are throttled per client
address like Basic on /v2/: one count shared with every other password login, never a user locked."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client

from regsite import config
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens.models import LoginFailure, LoginThrottle

pytestmark = pytest.mark.django_db


def get_token(client: Client, password: str, address: str, **headers: str) -> int:
    response = client.get("/auth/token", {"scope": "repository:team/app:pull"},
                          HTTP_AUTHORIZATION=basic("alice", password), REMOTE_ADDR=address, **headers)
    return response.status_code


def grant(client: Client, password: str, address: str) -> object:
    body = urlencode({"grant_type": "password", "username": "alice", "password": password})
    return client.post("/auth/token", body, content_type="application/x-www-form-urlencoded", REMOTE_ADDR=address)


def test_failures_from_one_address_make_it_wait_not_the_user(client: Client, auth_on) -> None:
    for _ in range(10):
        assert get_token(client, "wrong", "10.0.0.1") == 401
    assert get_token(client, "wonderland", "10.0.0.1") == 429
    assert get_token(client, "wonderland", "10.0.0.2") == 200  # another address gets in at once
    assert set(LoginFailure.objects.values_list("username", flat=True)) == {"alice"}


def test_the_password_grant_shares_the_count_with_basic_everywhere(client: Client, auth_on) -> None:
    for _ in range(5):
        assert grant(client, "wrong", "10.0.0.1").status_code == 401
    for _ in range(5):
        refused = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wrong"), REMOTE_ADDR="10.0.0.1")
        assert refused.status_code == 401
    response = grant(client, "wonderland", "10.0.0.1")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["errors"][0]["code"] == "TOOMANYREQUESTS"
    assert "retry after" in response.json()["errors"][0]["message"]
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"),
                      REMOTE_ADDR="10.0.0.1").status_code == 429
    assert grant(client, "wonderland", "10.0.0.2").status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(client: Client, auth_on, settings) -> None:
    settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(["10.0.0.100"])
    attacker = {"HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    for _ in range(10):
        assert get_token(client, "wrong", "10.0.0.100", **attacker) == 401
    assert get_token(client, "wonderland", "10.0.0.100", **attacker) == 429
    # Another client behind the same proxy is not the attacker.
    assert get_token(client, "wonderland", "10.0.0.100", HTTP_X_FORWARDED_FOR="198.51.100.4") == 200
    failures = dict(LoginThrottle.objects.values_list("address", "failures"))
    assert failures["203.0.113.7"] == 10 and failures.get("198.51.100.4", 0) == 0 and "10.0.0.100" not in failures
