"""A signed token's principal says how it was presented (Mechanism.SIGNED_TOKEN) and whom it stands
for; what /auth/token and signed tokens check is counted under a bounded mechanism label."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client

from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.test_metrics_registry import Delta, delta  # noqa: F401  (fixture)
from tokens import services
from tokens.access import Role
from tokens.bearer import ScopedPrincipal
from tokens.principal import Mechanism, Principal

pytestmark = pytest.mark.django_db

SCOPE = "repository:team/app:pull,push"


def signed(client: Client, authorization: str, **params: str) -> dict[str, str]:
    response = client.get("/auth/token", {"scope": SCOPE, **params}, HTTP_AUTHORIZATION=authorization)
    assert response.status_code == 200, response.content
    return response.json()


def principal_of(client: Client, token: str) -> Principal:
    response = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 404, response.content  # let in: no such repository
    return response.wsgi_request.principal  # type: ignore[attr-defined]


def auth(mechanism: str, outcome: str) -> tuple[str, dict[str, str]]:
    return "registry_auth_attempts_total", {"mechanism": mechanism, "outcome": outcome}


def test_a_users_signed_token_is_the_user_presented_as_signed(client: Client, auth_on) -> None:
    principal = principal_of(client, signed(client, basic("alice", "wonderland"))["token"])
    assert isinstance(principal, ScopedPrincipal)
    assert (principal.name, principal.mechanism, principal.role) == ("alice", Mechanism.SIGNED_TOKEN, Role.ADMIN)
    assert not principal.is_token and principal.label == "alice"


def test_an_api_tokens_signed_token_is_named_by_the_api_token(client: Client, auth_on) -> None:
    created = services.create_token("bob", "write")
    principal = principal_of(client, signed(client, basic("token", created.token))["token"])
    assert (principal.name, principal.mechanism, principal.role) == ("bob", Mechanism.SIGNED_TOKEN, Role.WRITE)
    assert principal.is_token and principal.label == created.hash_prefix


def test_signed_tokens_are_counted_as_signed(client: Client, auth_on, delta: Delta) -> None:
    token = signed(client, basic("alice", "wonderland"))["token"]
    assert client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token)).status_code == 404
    assert client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token + "x")).status_code == 401
    assert delta(*auth("signed", "success")) == 1
    assert delta(*auth("signed", "failure")) == 1
    assert delta(*auth("bearer", "success")) == delta(*auth("bearer", "failure")) == 0


def test_the_token_endpoint_counts_each_credential_it_checks(client: Client, auth_on, delta: Delta) -> None:
    api_token = services.create_token("alice", "read").token
    refresh = signed(client, basic("alice", "wonderland"), offline_token="true")["refresh_token"]
    assert client.get("/auth/token", HTTP_AUTHORIZATION=basic("alice", "nope")).status_code == 401
    signed(client, bearer(api_token))
    assert client.get("/auth/token", HTTP_AUTHORIZATION=bearer("svc_" + "x" * 43)).status_code == 401
    signed(client, basic("token", api_token))

    def post(**fields: str) -> int:
        return client.post("/auth/token", urlencode(fields),
                           content_type="application/x-www-form-urlencoded").status_code

    assert post(grant_type="password", username="alice", password="wonderland") == 200
    assert post(grant_type="password", username="alice", password="nope") == 401
    assert post(grant_type="refresh_token", refresh_token=refresh) == 200
    assert post(grant_type="refresh_token", refresh_token=refresh + "x") == 401
    assert client.get("/auth/token").status_code == 401  # no credentials: not an attempt
    assert delta(*auth("basic", "success")) == 1 and delta(*auth("basic", "failure")) == 1
    assert delta(*auth("bearer", "success")) == 1 and delta(*auth("bearer", "failure")) == 1
    assert delta(*auth("token", "success")) == 1
    assert delta(*auth("password", "success")) == 1 and delta(*auth("password", "failure")) == 1
    assert delta(*auth("signed", "success")) == 1 and delta(*auth("signed", "failure")) == 1


def test_a_signed_token_cannot_buy_the_next_and_that_counts_as_a_failure(client: Client, auth_on,
                                                                        delta: Delta) -> None:
    token = signed(client, basic("alice", "wonderland"))["token"]
    response = client.get("/auth/token", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 401
    assert "cannot be exchanged" in response.json()["error"]
    assert delta(*auth("signed", "failure")) == 1
