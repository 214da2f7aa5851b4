"""[auth] challenge = "bearer": 401s name the token endpoint and the scope; signed tokens are held to it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import jwt
import pytest

from tests.support.auth import auth_on, auth_paths, basic, bearer, write_htpasswd  # noqa: F401  (fixtures)
from tokens import bearer as bearer_tokens
from tokens import services

pytestmark = pytest.mark.django_db

EXTERNAL_URL = "https://registry.example.internal"
REALM = f'Bearer realm="{EXTERNAL_URL}/auth/token",service="svc-registry"'
DIGEST = "sha256:" + "a" * 64


@pytest.fixture
def bearer_on(settings, auth_on):  # type: ignore[no-untyped-def]
    settings.AUTH_CHALLENGE = "bearer"
    settings.SERVER_EXTERNAL_URL = EXTERNAL_URL  # the realm's host (tests/test_external_url.py)
    return auth_on


def signed(client, scope: str, authorization: str | None = None) -> str:  # type: ignore[no-untyped-def]
    response = client.get("/auth/token", {"scope": scope},
                          HTTP_AUTHORIZATION=authorization or basic("alice", "wonderland"))
    assert response.status_code == 200, response.content
    return response.json()["token"]


def test_the_ping_names_the_realm_and_service(client, bearer_on) -> None:
    response = client.get("/v2/")
    assert response.status_code == 200
    assert response["WWW-Authenticate"] == REALM
    docker = client.get("/v2/", HTTP_USER_AGENT="docker/27.3.1")
    assert docker.status_code == 401
    assert docker["WWW-Authenticate"] == REALM


@pytest.mark.parametrize("method, path, scope", [
    ("get", "/v2/team/app/manifests/v1", "repository:team/app:pull,push"),
    ("head", f"/v2/team/app/blobs/{DIGEST}", "repository:team/app:pull,push"),
    ("post", "/v2/team/app/blobs/uploads/", "repository:team/app:pull,push"),
    ("delete", "/v2/team/app/manifests/v1", "repository:team/app:delete"),
    ("get", "/v2/_catalog", "registry:catalog:*"),
    ("post", f"/v2/b/blobs/uploads/?mount={DIGEST}&from=team/a",
     "repository:b:pull,push repository:team/a:pull"),
])
def test_a_401_names_the_scope_the_request_needs(client, bearer_on, method: str, path: str, scope: str) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == f'{REALM},scope="{scope}"'
    if method != "head":
        assert response.json()["error"] == "authentication required"


def test_a_name_that_would_break_the_header_gets_no_scope(client, bearer_on) -> None:
    response = client.get('/v2/te"am/manifests/v1')
    assert response["WWW-Authenticate"] == REALM


def test_a_host_header_that_is_no_host_still_gets_a_challenge(client, bearer_on) -> None:
    response = client.get("/v2/_catalog", HTTP_HOST='bad"host')
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == f'{REALM},scope="registry:catalog:*"'


def test_the_realm_can_be_set(client, bearer_on, settings) -> None:
    settings.AUTH_TOKEN_REALM = "https://registry.example.internal/auth/token"
    assert client.get("/v2/").get("WWW-Authenticate").startswith(
        'Bearer realm="https://registry.example.internal/auth/token"')


def test_a_signed_token_does_what_it_grants(client, bearer_on) -> None:
    token = signed(client, "repository:team/app:pull,push registry:catalog:*")
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(token)).status_code == 200
    assert client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token)).status_code == 404  # allowed
    assert client.post("/v2/team/app/blobs/uploads/", HTTP_AUTHORIZATION=bearer(token)).status_code == 202
    assert client.get("/v2/", HTTP_AUTHORIZATION=bearer(token)).status_code == 200


def test_a_signed_token_outside_its_scope_is_sent_back_for_another(client, bearer_on) -> None:
    token = signed(client, "repository:team/app:pull")
    for method, path, scope in [("post", "/v2/team/app/blobs/uploads/", "repository:team/app:pull,push"),
                                ("get", "/v2/other/tags/list", "repository:other:pull,push"),
                                ("delete", "/v2/team/app/manifests/v1", "repository:team/app:delete"),
                                ("get", "/v2/_catalog", "registry:catalog:*")]:
        response = getattr(client, method)(path, HTTP_AUTHORIZATION=bearer(token))
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"] == f'{REALM},scope="{scope}",error="insufficient_scope"'
        assert response.json()["errors"][0]["message"] == (
            "authentication required: the token's scope does not cover this request")


def test_a_mount_needs_pull_on_the_source_repository(client, bearer_on) -> None:
    path = f"/v2/b/blobs/uploads/?mount={DIGEST}&from=a"
    only_b = signed(client, "repository:b:pull,push")
    response = client.post(path, HTTP_AUTHORIZATION=bearer(only_b))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        f'{REALM},scope="repository:b:pull,push repository:a:pull",error="insufficient_scope"')
    both = signed(client, "repository:b:pull,push repository:a:pull")
    assert client.post(path, HTTP_AUTHORIZATION=bearer(both)).status_code == 202  # nothing to mount


def test_a_role_too_low_is_denied_with_its_reason_not_sent_round(client, bearer_on) -> None:
    read = services.create_token("alice", "read")
    token = signed(client, "repository:team/app:pull,push", basic("token", read.token))
    response = client.post("/v2/team/app/blobs/uploads/", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 403
    assert response.json()["errors"] == [{"code": "DENIED",
                                          "message": f"token {read.hash_prefix} has role read; push needs write"}]


def test_a_signed_token_dies_with_its_api_token(client, bearer_on) -> None:
    created = services.create_token("alice", "write")
    token = signed(client, "repository:team/app:pull", bearer(created.token))
    assert client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token)).status_code == 404
    services.revoke_token("alice", created.hash_prefix)
    response = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 401
    assert "revoked or expired" in response.json()["error"]


def test_a_signed_token_dies_with_a_password_change(client, bearer_on) -> None:
    token = signed(client, "repository:team/app:pull")
    write_htpasswd(bearer_on.htpasswd_file, {"alice": "looking-glass"})
    response = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(token))
    assert response.status_code == 401
    assert "password changed" in response.json()["error"]


def _forge(**changes: object) -> str:
    now = datetime.now(timezone.utc)
    claims = {"iss": "svc-registry", "sub": "alice", "aud": "svc-registry", "iat": int(now.timestamp()),
              "nbf": int(now.timestamp()), "exp": int((now + timedelta(minutes=5)).timestamp()),
              "kind": "user", "access": [{"type": "repository", "name": "team/app", "actions": ["pull"]}]}
    key = changes.pop("key", None) or bearer_tokens.signing_key()
    claims.update(changes)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm="HS256")


@pytest.mark.parametrize("token, reason", [
    ("forged", "not one this registry issued"),
    ("expired", "has expired"),
    ("refresh", "not one this registry issued"),
    ("no-password", "password changed"),
    ("unsigned", "not one this registry issued"),
])
def test_it_refuses_tokens_it_did_not_issue_or_that_lapsed(client, bearer_on, token: str, reason: str) -> None:
    user = bearer_tokens.user_identity("alice").binding
    value = {
        "forged": _forge(key=b"another key entirely, 32 bytes!!", **user),
        "expired": _forge(exp=int(datetime.now(timezone.utc).timestamp()) - 120, **user),
        "refresh": _forge(aud="svc-registry:refresh", **user),
        "no-password": _forge(),
        "unsigned": jwt.encode({"sub": "alice"}, None, algorithm="none") + "x",
    }[token]
    response = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=bearer(value))
    assert response.status_code == 401
    assert reason in response.json()["error"], response.json()


def test_api_tokens_still_work_as_bearer(client, bearer_on) -> None:
    write = services.create_token("alice", "write").token
    assert client.post("/v2/team/app/blobs/uploads/", HTTP_AUTHORIZATION=bearer(write)).status_code == 202
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland")).status_code == 200


def test_basic_stays_the_default(client, auth_on) -> None:
    assert client.get("/v2/_catalog")["WWW-Authenticate"] == 'Basic realm="svc-registry"'


def test_a_refused_bearer_token_is_named_invalid_in_the_challenge(client, bearer_on) -> None:
    created = services.create_token("alice", "write")
    token = signed(client, "repository:team/app:pull", bearer(created.token))
    services.revoke_token("alice", created.hash_prefix)
    for authorization in (bearer(token), bearer(created.token)):  # a signed token, an API token
        response = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=authorization)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == f'{REALM},scope="repository:team/app:pull,push",error="invalid_token"'
    wrong = client.get("/v2/team/app/tags/list", HTTP_AUTHORIZATION=basic("alice", "wrong"))
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"] == f'{REALM},scope="repository:team/app:pull,push"'
