"""The 401 and the challenge that registry clients need, the public paths, and request.principal."""
from __future__ import annotations

import pytest
from typing import Callable

from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tokens import services
from tokens.middleware import AuthenticationMiddleware
from tokens.access import Action, Role, role_allows
from tokens.principal import Mechanism, Principal

pytestmark = pytest.mark.django_db


def test_it_challenges_on_the_open_ping_when_auth_is_on(client, auth_on) -> None:
    response = client.get("/v2/")
    assert response.status_code == 200
    assert response["WWW-Authenticate"] == 'Basic realm="svc-registry"'
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"


def test_it_does_not_challenge_when_auth_is_off(client, auth_paths) -> None:
    response = client.get("/v2/")
    assert response.status_code == 200
    assert "WWW-Authenticate" not in response


def test_it_answers_the_docker_engine_ping_with_401(client, auth_on) -> None:
    response = client.get("/v2/", HTTP_USER_AGENT="docker/27.3.1 go/go1.22.7 os/linux arch/amd64")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Basic realm=")
    ok = client.get("/v2/", HTTP_USER_AGENT="docker/27.3.1", HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert ok.status_code == 200


def test_it_refuses_a_ping_with_a_wrong_password(client, auth_on) -> None:
    response = client.get("/v2/", HTTP_AUTHORIZATION=basic("alice", "nope"))
    assert response.status_code == 401
    assert response.json()["error"].startswith("authentication required")


def test_it_answers_a_protected_path_with_the_oci_envelope(client, auth_on) -> None:
    response = client.get("/v2/_catalog")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == 'Basic realm="svc-registry"'
    body = response.json()
    assert body["error"] == "authentication required"
    assert body["errors"] == [{"code": "UNAUTHORIZED", "message": "authentication required"}]


def test_it_gives_a_head_401_no_body(client, auth_on) -> None:
    response = client.head("/v2/team/app/manifests/v1")
    assert response.status_code == 401
    assert response.content == b""
    assert int(response["Content-Length"]) > 0


def test_it_requires_credentials_on_unrouted_registry_paths(client, auth_on) -> None:
    assert client.get("/v2/team/app/unknown/thing").status_code == 401


def test_it_serves_the_catalog_to_a_valid_user(client, auth_on) -> None:
    response = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert response.status_code == 200
    assert response.json() == {"repositories": []}


@pytest.mark.parametrize("header", [
    "Basic !!!not-base64!!!",
    "Basic " + "YWxpY2U=",  # "alice" without a colon
    "Digest username=alice",
    "Bearer",
    "Bearer svc_" + "A" * 43,
    "Basic " + "x" * 9000,
])
def test_it_refuses_malformed_or_unknown_credentials(client, auth_on, header: str) -> None:
    response = client.get("/v2/_catalog", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["errors"][0]["code"] == "UNAUTHORIZED"


def _through_middleware(path: str, view: Callable[[HttpRequest], HttpResponse] | None = None,
                        **headers: str) -> HttpResponse:
    """The middleware around what Django does between its two halves: resolve the path, call
    process_view, then a view that answers 200 (the real views belong to others)."""

    def handler(request: HttpRequest) -> HttpResponse:
        try:
            request.resolver_match = match = resolve(request.path_info)
        except Resolver404:
            return HttpResponse(status=404)
        refused = middleware.process_view(request, match.func, (), {})
        return refused or (view or (lambda _: HttpResponse("view")))(request)

    middleware = AuthenticationMiddleware(handler)
    return middleware(RequestFactory().get(path, **headers))


@pytest.mark.parametrize("path", ["/", "/health", "/ready", "/metrics", "/ui", "/ui/", "/ui/repositories/team/app",
                                  "/api-docs/", "/api-docs/openapi.json", "/static/app.css",
                                  "/api/tokens", "/api/tokens/list", "/api/tokens/revoke", "/auth/token"])
def test_it_never_asks_for_credentials_on_public_paths(auth_on, path: str) -> None:
    for headers in ({}, {"HTTP_AUTHORIZATION": basic("alice", "wrong")}, {"HTTP_AUTHORIZATION": "Bearer x"}):
        response = _through_middleware(path, **headers)
        # A missing static asset is whitenoise's 404, never a challenge.
        assert response.status_code == (404 if path.startswith("/static/") else 200), (path, headers)
        assert "WWW-Authenticate" not in response


@pytest.mark.parametrize("path", ["/v2/_catalog", "/uix", "/api/tokens/other", "/healthz", "/v3/"])
def test_it_protects_every_other_path(auth_on, path: str) -> None:
    assert _through_middleware(path).status_code == 401


def test_it_names_the_role_that_is_missing(client, auth_on) -> None:
    token = services.create_token("alice", "write").token
    response = client.delete(f"/v2/team/app/blobs/sha256:{'a' * 64}", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 403
    [error] = response.json()["errors"]
    assert error == {"code": "DENIED",
                     "message": f"token {services.token_digest(token)[:16]} has role write; delete needs admin"}
    assert "error" not in response.json()  # clients show the envelope's message; the seed's error is for 401
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"


def _principal_for(**headers: str) -> Principal:
    seen: list[Principal] = []

    def view(request) -> HttpResponse:
        seen.append(request.principal)
        return HttpResponse()

    _through_middleware("/v2/_catalog", view, **headers)
    return seen[0]


def test_it_makes_everyone_an_anonymous_admin_when_auth_is_off(auth_paths) -> None:
    assert _principal_for() == Principal("anonymous", Mechanism.ANONYMOUS, Role.ADMIN, None)


def test_it_names_the_user_and_the_token(auth_on) -> None:
    assert _principal_for(HTTP_AUTHORIZATION=basic("alice", "wonderland")) == Principal(
        "alice", Mechanism.BASIC_USER, Role.ADMIN, None)
    created = services.create_token("bob", "write")
    assert _principal_for(HTTP_AUTHORIZATION=basic("token", created.token)) == Principal(
        "bob", Mechanism.BASIC_TOKEN, Role.WRITE, created.hash_prefix)
    assert _principal_for(HTTP_AUTHORIZATION=bearer(created.token)).mechanism is Mechanism.BEARER_TOKEN


@pytest.mark.parametrize(("role", "allowed"), [
    ("read", {Action.PULL}),
    ("write", {Action.PULL, Action.PUSH}),
    ("admin", {Action.PULL, Action.PUSH, Action.DELETE}),
    ("none", set()),
    ("superuser", set()),
])
def test_it_orders_roles_read_write_admin(role: str, allowed: set[Action]) -> None:
    assert {a for a in Action if role_allows(role, a)} == allowed
    assert {a for a in Action if role_allows(role, a.value)} == allowed
