"""Text the databases cannot hold (NUL, which PostgreSQL refuses, and lone surrogates, which no
encoder writes) is refused where requests are parsed: 400, or 401 for credentials, never a 500;
on SQLite and PostgreSQL alike (scripts/with-postgres.sh). ``listtokens`` still prints text an
earlier release stored."""
from __future__ import annotations

import base64
import io
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import CommandError, call_command

from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens import services
from tokens.repository import StoredToken

pytestmark = pytest.mark.django_db

NUL_USER = "Basic " + base64.b64encode("ali\x00ce:wonderland".encode()).decode()
SURROGATE = '"\\ud800"'  # valid JSON, not Unicode text


def _json(client, path: str, text: str):  # type: ignore[no-untyped-def]
    return client.post(path, text, content_type="application/json")


def _refused(response, status: int = 400) -> dict:  # type: ignore[type-arg]
    assert response.status_code == status, (response.status_code, response.content[:300])
    return json.loads(response.content)


@pytest.mark.parametrize("path", ["/v2/", "/v2/team/app/tags/list", "/auth/token"])
def test_a_nul_in_a_basic_username_is_a_401(client, auth_on, path: str) -> None:
    body = _refused(client.get(path, HTTP_AUTHORIZATION=NUL_USER), 401)
    assert "Basic credentials" in json.dumps(body)


@pytest.mark.parametrize("path", ["/api/tokens", "/api/tokens/list", "/api/tokens/revoke"])
@pytest.mark.parametrize("username", ['"ali\\u0000ce"', SURROGATE])
def test_a_nul_or_a_surrogate_in_a_token_api_username_is_a_400(client, auth_on, path: str, username: str) -> None:
    body = _refused(_json(client, path, f'{{"username": {username}, "password": "wonderland"}}'))
    assert body["field"] == "username"


@pytest.mark.parametrize("description", ['"ci\\u0000"', SURROGATE, '"a\\udfffb"'])
@pytest.mark.parametrize("backend", ["files", "database"])
def test_a_nul_or_a_surrogate_in_a_token_description_is_a_400(client, auth_on, settings, description: str,
                                                              backend: str) -> None:
    settings.AUTH_TOKEN_BACKEND = backend
    body = _refused(_json(client, "/api/tokens",
                          f'{{"username": "alice", "password": "wonderland", "description": {description}}}'))
    assert body["field"] == "description"
    assert services.list_tokens() == []


def test_the_password_grant_refuses_a_nul_in_its_form(client, auth_on) -> None:
    response = client.post("/auth/token", "grant_type=password&username=ali%00ce&password=wonderland",
                           content_type="application/x-www-form-urlencoded")
    _refused(response)


@pytest.mark.parametrize("target", [
    "/v2/team/app/referrers/sha256:" + "0" * 64 + "?artifactType=%00",
    "/v2/team/app/tags/list?last=a%00b",
    "/v2/_catalog?last=%00",
    "/v2/team/app/blobs/uploads/?mount=sha256:" + "0" * 64 + "&from=a%00b",
    "/ui/repositories/?q=%00",
    "/auth/token?scope=repository:a%00b:pull",
])
@pytest.mark.parametrize("auth", [False, True])
def test_a_nul_in_a_query_string_is_a_400(client, auth_paths, settings, target: str, auth: bool) -> None:
    settings.AUTH_ENABLED = auth
    response = client.generic("POST" if "uploads" in target else "GET", target,
                              HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    body = _refused(response)
    assert "NUL" in body["errors"][0]["message"]


def test_a_nul_in_a_header_is_a_400(client) -> None:
    _refused(client.get("/v2/team/app/tags/list", HTTP_USER_AGENT="skopeo\x00"))


def test_the_token_api_still_takes_ordinary_unicode(client, auth_on) -> None:
    response = _json(client, "/api/tokens", '{"username": "alice", "password": "wonderland", '
                                            '"description": "d\\u00e9ploiement \\ud83d\\ude80"}')
    assert response.status_code == 201, response.content
    assert response.json()["description"] == "déploiement 🚀"


def test_listtokens_prints_a_surrogate_an_earlier_release_stored(auth_paths) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    services.repository().save(StoredToken("ab" * 32, "alice", services.validate_role("read"), "old \ud800 text",
                                           now, now + timedelta(days=1)))
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")  # strict, as a terminal's stdout is

    call_command("listtokens", stdout=out)
    call_command("listtokens", "--json", stdout=out)
    out.flush()

    printed = raw.getvalue().decode("utf-8")
    assert "old \\ud800 text" in printed


@pytest.mark.parametrize("option, value", [("--username", "ali\udcc3ce"), ("--description", "ci \udcc3")])
def test_createtoken_refuses_a_surrogate_from_its_arguments(auth_paths, option: str, value: str) -> None:
    # A command's arguments come from bytes that are not UTF-8 as lone surrogates (surrogateescape).
    arguments = {"--username": "alice", "--description": "", option: value}
    with pytest.raises(CommandError):
        call_command("createtoken", *[item for pair in arguments.items() for item in pair], stdout=io.StringIO())
    assert services.list_tokens() == []
