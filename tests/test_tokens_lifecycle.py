"""Tokens die with their user, expired ones are purged, and one user holds a bounded number."""
from __future__ import annotations

import dataclasses
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from registry import scheduler
from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.support.ui_fixtures import sign_in, users  # noqa: F401  (fixtures)
from tokens import services

pytestmark = pytest.mark.django_db
ALICE = {"username": "alice", "password": "wonderland"}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def remove_user(htpasswd_file: Any, username: str) -> None:
    lines = htpasswd_file.read_text().splitlines()
    htpasswd_file.write_text("".join(line + "\n" for line in lines if not line.startswith(f"{username}:")))


def expire(created: services.CreatedToken) -> None:
    repo = services.repository()
    stored = repo.get(services.token_digest(created.token))
    repo.save(dataclasses.replace(stored, expires_at=stored.created_at - timedelta(seconds=1)))


@pytest.fixture(params=["files", "database"])
def backend(request, settings, auth_on) -> Any:  # noqa: F811
    settings.AUTH_TOKEN_BACKEND = request.param
    return auth_on


def test_a_token_is_refused_as_soon_as_its_owner_leaves_the_htpasswd_file(client, backend) -> None:
    created = services.create_token("bob", "admin")
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(created.token)).status_code == 200
    remove_user(backend.htpasswd_file, "bob")
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=bearer(created.token)).status_code == 401
    assert client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("token", created.token)).status_code == 401


def test_listtokens_marks_orphaned_tokens_and_purgetokens_removes_them(backend) -> None:
    kept = services.create_token("alice")
    gone = services.create_token("bob")
    remove_user(backend.htpasswd_file, "bob")
    table = run("listtokens")
    assert {line.split()[1]: line.split()[7] for line in table.splitlines()[1:]} == {
        "alice": "active", "bob": "orphaned"}
    listed = json.loads(run("listtokens", "--json"))["tokens"]
    assert {t["hash_prefix"]: t["orphaned"] for t in listed} == {kept.hash_prefix: False, gone.hash_prefix: True}
    assert run("purgetokens", "--orphaned", "--dry-run") == "would delete 1 orphaned tokens (of bob)\n"
    assert len(services.list_tokens()) == 2
    assert run("purgetokens", "--orphaned") == "deleted 1 orphaned tokens (of bob)\n"
    assert [r.hash_prefix for r in services.list_tokens()] == [kept.hash_prefix]


def test_purgetokens_removes_expired_tokens(backend) -> None:
    live = services.create_token("alice")
    expire(services.create_token("alice"))
    assert run("purgetokens", "--expired") == "deleted 1 expired tokens\n"
    assert [r.hash_prefix for r in services.list_tokens()] == [live.hash_prefix]


def test_a_new_user_of_the_same_name_does_not_inherit_the_tokens(backend, settings) -> None:
    old = services.create_token("bob", "admin")
    remove_user(backend.htpasswd_file, "bob")
    stdin = io.StringIO("a new bob's password\n")
    out = io.StringIO()
    call_command("adduser", "bob", "--password-stdin", "--cost", "4", stdin=stdin, stdout=out)
    assert "Deleted 1 tokens left by an earlier user named bob" in out.getvalue()
    assert services.authenticate_token(old.token) is None
    assert services.list_tokens("bob") == []


def test_the_scheduled_maintenance_purges_expired_tokens(backend, settings) -> None:
    settings.REGISTRY_GC_INTERVAL_HOURS = 1
    settings.REGISTRY_GC_GRACE_HOURS = 0
    live = services.create_token("alice")
    expire(services.create_token("alice"))
    assert scheduler.run_if_due(now=1_000_000.0) is None  # the first poll only notes the time
    assert scheduler.run_if_due(now=1_000_000.0 + 3601) is not None
    assert [r.hash_prefix for r in services.list_tokens()] == [live.hash_prefix]


def test_one_user_holds_at_most_max_tokens_per_user_live_tokens(client, backend, settings) -> None:
    settings.AUTH_MAX_TOKENS_PER_USER = 3
    for _ in range(2):
        services.create_token("alice")
    expire(services.create_token("alice"))  # expired ones do not count
    assert client.post("/api/tokens", json.dumps(ALICE), content_type="application/json").status_code == 201
    refused = client.post("/api/tokens", json.dumps(ALICE), content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["error"] == ("alice already has 3 live tokens, the most [auth] max_tokens_per_user "
                                       "allows: revoke one first")
    assert services.create_token("bob").role == "read"  # another user is not limited by alice's
    with pytest.raises(CommandError, match="max_tokens_per_user"):
        run("createtoken", "--username", "alice")


def test_the_ui_explains_the_token_limit(client, users, settings) -> None:  # noqa: F811
    settings.AUTH_MAX_TOKENS_PER_USER = 1
    sign_in(client)
    assert client.post("/ui/tokens/", {"role": "read", "ttl_days": 30}).status_code == 200
    refused = client.post("/ui/tokens/", {"role": "read", "ttl_days": 30})
    assert refused.status_code == 400
    assert "max_tokens_per_user" in refused.content.decode()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_the_token_endpoints_take_json_only(client, auth_on, content_type: str) -> None:
    # What a web page can make a browser send anywhere without a CORS preflight.
    for path in ("/api/tokens", "/api/tokens/list", "/api/tokens/revoke"):
        response = client.generic("POST", path, json.dumps(ALICE), content_type)
        assert response.status_code == 415
        assert "Content-Type: application/json" in response.json()["error"]
    assert services.list_tokens() == []
    ok = client.generic("POST", "/api/tokens", json.dumps(ALICE), "application/json; charset=utf-8")
    assert ok.status_code == 201
