"""/auth/token: GET with Basic or an API token, the OAuth2 POST form, scopes cut down to the role."""
from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest

from tests.support.auth import auth_on, auth_paths, basic, bearer, write_htpasswd  # noqa: F401  (fixtures)
from tokens import bearer as bearer_tokens
from tokens import services

pytestmark = pytest.mark.django_db

PUSH = "repository:team/app:pull,push"


def claims(token: str) -> dict[str, Any]:
    """The payload, read without checking (what a client may do); verification is tested elsewhere."""
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


def access(token: str) -> list[dict[str, Any]]:
    return claims(token)["access"]


def get_token(client, authorization: str | None = None, **params: Any):  # type: ignore[no-untyped-def]
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    return client.get("/auth/token", params, **headers)


def post(client, body: str):  # type: ignore[no-untyped-def]
    return client.post("/auth/token", body, content_type="application/x-www-form-urlencoded")


def form(**fields: str) -> str:
    return urlencode(fields)


def test_it_gives_a_user_the_scope_asked_for(client, auth_on) -> None:
    response = get_token(client, basic("alice", "wonderland"), service="svc-registry", scope=PUSH)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token"] == body["access_token"]
    assert body["expires_in"] == 300
    assert body["issued_at"].endswith("Z")
    assert "refresh_token" not in body
    payload = claims(body["token"])
    assert (payload["iss"], payload["aud"], payload["sub"]) == ("svc-registry", "svc-registry", "alice")
    assert payload["exp"] - payload["iat"] == 300
    assert payload["access"] == [{"type": "repository", "name": "team/app", "actions": ["pull", "push"]}]


def test_it_never_grants_beyond_the_tokens_role(client, auth_on) -> None:
    read = services.create_token("alice", "read").token
    write = services.create_token("alice", "write").token
    everything = "repository:team/app:pull,push,delete"
    assert access(get_token(client, basic("token", read), scope=everything).json()["token"]) == [
        {"type": "repository", "name": "team/app", "actions": ["pull"]}]
    assert access(get_token(client, bearer(write), scope=everything).json()["token"]) == [
        {"type": "repository", "name": "team/app", "actions": ["pull", "push"]}]
    assert access(get_token(client, bearer(write), scope="repository:team/app:*").json()["token"]) == [
        {"type": "repository", "name": "team/app", "actions": ["pull", "push"]}]
    assert access(get_token(client, basic("token", read), scope="repository:team/app:push").json()["token"]) == []


def test_it_takes_several_scopes_and_merges_them(client, auth_on) -> None:
    response = client.get("/auth/token?scope=repository:a:pull&scope=repository:b:pull+repository:a:push"
                          "&scope=registry:catalog:*&scope=unknown:thing:pull",
                          HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert access(response.json()["token"]) == [
        {"type": "repository", "name": "a", "actions": ["pull", "push"]},
        {"type": "repository", "name": "b", "actions": ["pull"]},
        {"type": "registry", "name": "catalog", "actions": ["*"]},
    ]


def test_it_reads_a_port_in_a_scope_name(client, auth_on) -> None:
    token = get_token(client, basic("alice", "wonderland"), scope="repository:host:5000/app:pull").json()["token"]
    assert access(token) == [{"type": "repository", "name": "host:5000/app", "actions": ["pull"]}]


def test_it_gives_a_refresh_token_when_asked_offline(client, auth_on) -> None:
    # What docker login asks: no scope, offline_token=true, client_id=docker.
    body = get_token(client, basic("alice", "wonderland"), account="alice", client_id="docker",
                     offline_token="true", service="svc-registry").json()
    assert access(body["token"]) == []
    refresh = claims(body["refresh_token"])
    assert refresh["aud"] == "svc-registry:refresh"
    assert refresh["exp"] - refresh["iat"] == 30 * 86400


def test_a_refresh_token_lives_no_longer_than_its_api_token(client, auth_on) -> None:
    created = services.create_token("alice", "write", ttl_days=2)
    refresh = get_token(client, basic("token", created.token), offline_token="true").json()["refresh_token"]
    assert claims(refresh)["exp"] == int(created.expires_at.timestamp())


@pytest.mark.parametrize("authorization, reason", [
    (None, "authentication required"),
    (basic("alice", "nope"), "authentication required: invalid username or password"),
    (basic("token", "svc_" + "A" * 43), "authentication required: unknown, expired or revoked token"),
    (bearer("svc_" + "B" * 43), "authentication required: unknown, expired or revoked token"),
    ("Basic !!!", "authentication required: malformed Basic credentials"),
    ("Digest x", "authentication required: send Basic credentials"),
])
def test_it_refuses_wrong_or_missing_credentials(client, auth_on, authorization, reason: str) -> None:
    response = get_token(client, authorization, scope=PUSH)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Basic realm="svc-registry"'
    body = response.json()
    assert body["error"].startswith(reason)
    assert body["errors"] == [{"code": "UNAUTHORIZED", "message": body["error"]}]


def test_it_will_not_trade_a_signed_token_for_another(client, auth_on) -> None:
    signed = get_token(client, basic("alice", "wonderland"), scope=PUSH).json()["token"]
    response = get_token(client, bearer(signed), scope=PUSH)
    assert response.status_code == 401
    assert "refresh token" in response.json()["error"]


@pytest.mark.parametrize("params, message", [
    ({"scope": "repository:team/app"}, "is not type:name:actions"),
    ({"scope": "repository::pull"}, "is not type:name:actions"),
    ({"scope": " ".join(["repository:a:pull"] * 65)}, "at most 64 scopes"),
    ({"service": "registry.docker.io"}, "unknown service 'registry.docker.io'"),
])
def test_it_refuses_a_malformed_request(client, auth_on, params: dict[str, str], message: str) -> None:
    response = get_token(client, basic("alice", "wonderland"), **params)
    assert response.status_code == 400
    assert message in response.json()["errors"][0]["message"]


def test_it_counts_failed_passwords_towards_the_address_throttle(client, auth_on) -> None:
    for _ in range(10):
        assert get_token(client, basic("alice", "nope")).status_code == 401
    response = get_token(client, basic("alice", "wonderland"))
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60


def test_it_takes_the_oauth2_password_grant(client, auth_on) -> None:
    response = post(client, form(grant_type="password", username="alice", password="wonderland",
                                 service="svc-registry", client_id="docker", access_type="offline",
                                 scope=f"{PUSH} registry:catalog:*"))
    assert response.status_code == 200
    body = response.json()
    assert body["scope"] == "repository:team/app:pull,push registry:catalog:*"
    assert body["access_token"] and body["refresh_token"]


def test_it_takes_the_oauth2_password_grant_with_an_api_token(client, auth_on) -> None:
    read = services.create_token("alice", "read").token
    body = post(client, form(grant_type="password", username="token", password=read, scope=PUSH)).json()
    assert body["scope"] == "repository:team/app:pull"
    assert "refresh_token" not in body  # only with access_type=offline


def test_it_refreshes_without_the_password(client, auth_on) -> None:
    refresh = get_token(client, basic("alice", "wonderland"), offline_token="true").json()["refresh_token"]
    response = post(client, form(grant_type="refresh_token", refresh_token=refresh, service="svc-registry",
                                 client_id="docker", scope=PUSH))
    assert response.status_code == 200
    body = response.json()
    assert access(body["access_token"]) == [{"type": "repository", "name": "team/app", "actions": ["pull", "push"]}]
    assert "refresh_token" not in body  # docker keeps the one it has


def test_an_access_token_is_no_refresh_token(client, auth_on) -> None:
    signed = get_token(client, basic("alice", "wonderland"), scope=PUSH).json()["token"]
    response = post(client, form(grant_type="refresh_token", refresh_token=signed))
    assert response.status_code == 401
    assert "refresh token refused" in response.json()["error"]


def test_a_refresh_token_dies_with_its_api_token(client, auth_on) -> None:
    created = services.create_token("alice", "write")
    refresh = get_token(client, basic("token", created.token), offline_token="true").json()["refresh_token"]
    services.revoke_token("alice", created.hash_prefix)
    response = post(client, form(grant_type="refresh_token", refresh_token=refresh))
    assert response.status_code == 401
    assert "revoked or expired" in response.json()["error"]


def test_a_refresh_token_dies_with_a_password_change(client, auth_on) -> None:
    refresh = get_token(client, basic("alice", "wonderland"), offline_token="true").json()["refresh_token"]
    write_htpasswd(auth_on.htpasswd_file, {"alice": "looking-glass", "bob": "builder"})
    response = post(client, form(grant_type="refresh_token", refresh_token=refresh))
    assert response.status_code == 401
    assert "password changed" in response.json()["error"]


@pytest.mark.parametrize("body, content_type, message", [
    ("grant_type=client_credentials", "application/x-www-form-urlencoded", "grant_type must be"),
    ('{"grant_type": "password"}', "application/json", "must be application/x-www-form-urlencoded"),
    ("grant_type=password&" + "x" * 70000, "application/x-www-form-urlencoded", "at most 65536 bytes"),
])
def test_it_refuses_a_bad_form(client, auth_on, body: str, content_type: str, message: str) -> None:
    response = client.post("/auth/token", body, content_type=content_type)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_it_refuses_a_wrong_password_in_the_form(client, auth_on) -> None:
    response = post(client, form(grant_type="password", username="alice", password="nope"))
    assert response.status_code == 401
    assert response.json()["error"] == "authentication required: invalid username or password"


def test_it_answers_only_get_and_post(client, auth_on) -> None:
    response = client.put("/auth/token")
    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"


def test_it_issues_open_tokens_when_auth_is_off(client, auth_paths) -> None:
    token = get_token(client, None, scope="repository:team/app:pull,push,delete").json()["token"]
    assert access(token) == [{"type": "repository", "name": "team/app", "actions": ["pull", "push", "delete"]}]
    assert claims(token)["kind"] == "anonymous"


def test_the_tokens_are_signed_with_a_key_derived_from_the_secret_key(client, auth_on, settings) -> None:
    token = get_token(client, basic("alice", "wonderland"), scope=PUSH).json()["token"]
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    jwt.decode(token, bearer_tokens.signing_key(), algorithms=["HS256"], audience="svc-registry")
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, settings.SECRET_KEY, algorithms=["HS256"], audience="svc-registry")


def test_a_token_too_large_to_send_back_is_refused_with_a_400(client, auth_on) -> None:
    names = [f"team/{'x' * 200}{i:02d}" for i in range(64)]

    response = get_token(client, basic("alice", "wonderland"), scope=[f"repository:{n}:pull" for n in names])

    assert response.status_code == 400
    message = response.json()["errors"][0]["message"]
    assert "over the 8185 characters" in message and "ask for fewer scopes" in message


def test_a_scope_naming_more_than_a_repository_name_holds_is_a_400(client, auth_on) -> None:
    response = get_token(client, basic("alice", "wonderland"), scope=f"repository:{'a' * 256}:pull")
    assert response.status_code == 400
    assert "at most 255 characters" in response.json()["errors"][0]["message"]


def test_every_token_issued_fits_in_an_authorization_header(client, auth_on) -> None:
    names = [f"team/{'x' * 16}{i:02d}" for i in range(40)]
    response = get_token(client, basic("alice", "wonderland"), scope=[f"repository:{n}:pull,push" for n in names])
    assert response.status_code == 200
    token = response.json()["token"]
    assert len("Bearer " + token) <= 8192
    assert client.get(f"/v2/{names[-1]}/tags/list", HTTP_AUTHORIZATION=bearer(token)).status_code == 404


class _Stalled:
    """A request body whose client stopped sending it: the read fails as a cut-off socket's does."""

    def read(self, *_args: object) -> bytes:
        raise TimeoutError("request body slower than the minimum of 4096 B/s")

    readline = read


def test_a_form_the_client_stopped_sending_is_a_400_not_a_500(client, auth_on) -> None:
    response = client.post("/auth/token", "grant_type=password", content_type="application/x-www-form-urlencoded",
                           **{"wsgi.input": _Stalled()})
    assert response.status_code == 400
    assert response.json()["error"] == "the POST body was not received whole"
