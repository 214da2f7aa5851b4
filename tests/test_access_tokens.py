"""Tokens limited to repositories (API, UI, manage.py, both token stores), and a token that follows
its owner's access: taking the owner out of a group cuts it at the next request."""
from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.support.access import PASSWORDS, teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tests.support.registry_client import push_image
from tokens import services

pytestmark = pytest.mark.django_db


def _api(path: str, **body: Any) -> Any:
    return Client().post(path, json.dumps(body), content_type="application/json")


def _create(owner: str, **fields: Any) -> Any:
    return _api("/api/tokens", username=owner, password=PASSWORDS[owner], ttl_days=1, **fields)


def _as(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=basic("token", token))


@pytest.fixture(params=["files", "database"])
def backend(request, settings) -> str:
    settings.AUTH_TOKEN_BACKEND = request.param
    return str(request.param)


def test_a_token_limited_to_one_repository_pushes_there_and_nowhere_else(teams, backend: str) -> None:
    created = _create("alice", role="write", repositories=["team-a/app"])
    assert created.status_code == 201, created.content
    assert created.json()["repositories"] == ["team-a/app"]
    token = created.json()["token"]
    push_image(_as(token), "team-a/app", "v1")
    prefix = created.json()["hash_prefix"]
    for name, message in [
        ("team-a/other", f"token {prefix} has role none on team-a/other (outside its repositories team-a/app); "
                         "push needs write"),
        ("team-b/app", f"token {prefix} has role none on team-b/app (outside its repositories team-a/app); "
                       "push needs write"),
    ]:
        refused = _as(token).post(f"/v2/{name}/blobs/uploads/")
        assert refused.status_code == 403
        assert refused.json()["errors"][0] == {"code": "DENIED", "message": message}
    listed = _api("/api/tokens/list", username="alice", password=PASSWORDS["alice"]).json()["tokens"]
    assert [entry["repositories"] for entry in listed] == [["team-a/app"]]


def test_an_unlimited_token_says_so(teams) -> None:
    assert _create("alice", role="read").json()["repositories"] is None


@pytest.mark.parametrize("repositories, message", [
    ("team-a/*", 'repositories must be a list of repository globs such as "team-a/*"'),
    (["team-a/[x"], "repositories: invalid glob 'team-a/[x': unclosed [ at position 8"),
    (["Team/App"], "repositories: invalid glob 'Team/App': 'AT' cannot occur in a repository name (lower case "
                   "letters, digits, . _ - and /)"),
    ([f"r{n}" for n in range(33)], "repositories: at most 32 globs"),
])
def test_bad_repositories_are_a_400_naming_the_field(teams, repositories: Any, message: str) -> None:
    response = _create("alice", repositories=repositories)
    assert (response.status_code, response.json()) == (400, {"error": message, "field": "repositories"})


def test_removing_the_owner_from_a_group_cuts_the_token_at_the_next_request(teams, backend: str) -> None:
    token = _create("alice", role="write", repositories=["team-a/*"]).json()["token"]
    push_image(_as(token), "team-a/app", "v1")
    teams.set_groups("team-a: bob\nteam-b: carol\n")
    refused = _as(token).post("/v2/team-a/app/blobs/uploads/")
    assert refused.status_code == 403
    assert "has role none on team-a/*; push needs write" in refused.json()["errors"][0]["message"]
    assert _as(token).get("/v2/team-a/app/manifests/v1").status_code == 404  # as if it did not exist
    teams.set_groups("team-a: alice bob\nteam-b: carol\n")
    assert _as(token).get("/v2/team-a/app/manifests/v1").status_code == 200


def test_createtoken_takes_repeated_repository_globs(teams) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("createtoken", "--username", "carol", "--role", "write", "--repository", "team-b/app",
                 "--repository", "team-b/tools/*", stdout=out, stderr=err)
    record = services.authenticate_token(out.getvalue().strip())
    assert record is not None and record.repositories == ("team-b/app", "team-b/tools/*")
    assert "Created a write token on team-b/app, team-b/tools/* for carol" in err.getvalue()
    listed = io.StringIO()
    call_command("listtokens", stdout=listed)
    assert "[repositories team-b/app,team-b/tools/*]" in listed.getvalue()


def test_the_ui_form_limits_a_token_to_repositories(teams) -> None:
    client = Client()
    client.post("/ui/sign-in", {"username": "bob", "password": PASSWORDS["bob"]})
    response = client.post("/ui/tokens/", {"role": "write", "ttl_days": "7", "description": "ci",
                                           "repositories": "team-a/app\nteam-a/tools/*"})
    assert response.status_code == 200
    token = re.search(r"svc_[A-Za-z0-9_-]{43}", response.content.decode()).group(0)
    assert services.authenticate_token(token).repositories == ("team-a/app", "team-a/tools/*")
    bad = client.post("/ui/tokens/", {"role": "write", "ttl_days": "7", "repositories": "team-a/[x"})
    assert bad.status_code == 400 and "invalid glob" in bad.content.decode()
