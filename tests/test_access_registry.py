"""The access rules on the registry API: refused writes are 403 naming rule and role, refused reads
answer exactly as a repository that does not exist, and listings show only what the caller may read."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.support.access import PASSWORDS, teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from registry.services import repositories
from tests.support.registry_client import body_of, digest_of, push_blob, push_image

pytestmark = pytest.mark.django_db

REPOSITORIES = ["team-a/app", "team-a/secret/keys", "team-b/app", "public/base", "other/app"]


def as_user(name: str | None) -> Client:
    return Client(HTTP_AUTHORIZATION=basic(name, PASSWORDS[name])) if name else Client()


@pytest.fixture
def seeded(teams) -> dict[str, str]:
    erin = as_user("erin")  # the admin
    return {name: push_image(erin, name, "v1")[1] for name in REPOSITORIES}


def _catalog(client: Client) -> list[str]:
    response = client.get("/v2/_catalog")
    assert response.status_code == 200, response.content
    return response.json()["repositories"]


@pytest.mark.parametrize("who, expected", [
    ("alice", ["public/base", "team-a/app"]),
    ("bob", ["public/base", "team-a/app", "team-a/secret/keys"]),
    ("carol", ["public/base", "team-a/app", "team-b/app"]),
    ("dave", ["public/base"]),
    ("erin", sorted(REPOSITORIES)),
    (None, ["public/base"]),
])
def test_the_catalog_lists_only_what_the_caller_may_read(seeded, who: str | None, expected: list[str]) -> None:
    assert _catalog(as_user(who)) == expected


def test_the_catalog_pages_over_what_the_caller_may_read(seeded) -> None:
    bob = as_user("bob")
    first = bob.get("/v2/_catalog?n=2")
    assert first.json()["repositories"] == ["public/base", "team-a/app"]
    assert bob.get(first["Link"].split(";")[0].strip("<>")).json()["repositories"] == ["team-a/secret/keys"]


@pytest.mark.parametrize("who, method, path, message", [
    ("carol", "PUT", "/v2/team-a/app/manifests/v2", "carol has role read on team-a/*; push needs write"),
    ("bob", "DELETE", "/v2/team-a/app/manifests/v1", "bob has role write on team-a/*; delete needs admin"),
    ("alice", "POST", "/v2/team-a/secret/keys/blobs/uploads/",
     "alice has role none on team-a/secret/*; push needs write"),
    ("alice", "DELETE", "/v2/team-b/app/manifests/v1", "alice has role none on team-b/*; delete needs admin"),
    ("dave", "POST", "/v2/other/app/blobs/uploads/",
     "dave has role none on other/app ([auth] default_role); push needs write"),
    ("dave", "PUT", "/v2/public/base/manifests/v2", "dave has role read on public/*; push needs write"),
])
def test_a_refused_write_is_403_denied_naming_the_rule_and_the_role(seeded, who: str, method: str, path: str,
                                                                   message: str) -> None:
    response = as_user(who).generic(method, path, b"{}", "application/vnd.oci.image.manifest.v1+json")
    assert response.status_code == 403
    assert response.json()["errors"] == [{"code": "DENIED", "message": message}]


def test_allowed_writes_go_through(seeded) -> None:
    bob = as_user("bob")
    assert bob.delete(f"/v2/team-a/secret/keys/manifests/{seeded['team-a/secret/keys']}").status_code == 202
    push_image(as_user("carol"), "team-b/new", "v1")
    assert as_user("alice").delete("/v2/public/base/manifests/v1").status_code == 202


READS = {
    "manifest-tag": ("GET", "/v2/{name}/manifests/v1"),
    "manifest-head": ("HEAD", "/v2/{name}/manifests/v1"),
    "manifest-digest": ("GET", "/v2/{name}/manifests/{digest}"),
    "manifest-bad-tag": ("GET", "/v2/{name}/manifests/-bad-"),
    "blob": ("GET", "/v2/{name}/blobs/{config}"),
    "blob-head": ("HEAD", "/v2/{name}/blobs/{config}"),
    "blob-bad-digest": ("GET", "/v2/{name}/blobs/sha256:zz"),
    "tags": ("GET", "/v2/{name}/tags/list"),
    "tags-none": ("GET", "/v2/{name}/tags/list?n=0"),
    "tags-bad-n": ("GET", "/v2/{name}/tags/list?n=x"),
    "referrers": ("GET", "/v2/{name}/referrers/{digest}"),
}


def _answer(client: Client, route: str, name: str, digest: str) -> tuple[int, dict[str, str], Any]:
    method, path = READS[route]
    config = digest_of(b'{"architecture":"amd64","os":"linux","ref":"v1"}')
    response = client.generic(method, path.format(name=name, digest=digest, config=config))
    headers = {key: value for key, value in response.items() if key not in ("Date", "X-Request-ID")}
    return response.status_code, headers, body_of(response)


@pytest.mark.parametrize("route", READS)
def test_a_refused_read_answers_exactly_as_a_repository_that_does_not_exist(seeded, route: str) -> None:
    digest = seeded["team-b/app"]
    refused = _answer(as_user("alice"), route, "team-b/app", digest)
    repositories.delete_repository("team-b/app")
    absent_to_admin = _answer(as_user("erin"), route, "team-b/app", digest)
    assert refused == absent_to_admin
    assert refused[0] in (200, 400, 404)


def test_a_mount_from_a_repository_the_caller_may_not_read_is_a_plain_upload(seeded) -> None:
    layer = digest_of(b"layer-of-v1")
    alice = as_user("alice")
    refused = alice.post(f"/v2/team-a/new/blobs/uploads/?mount={layer}&from=team-b/app")
    assert refused.status_code == 202
    assert alice.post(f"/v2/team-a/new/blobs/uploads/?mount={layer}&from=team-a/app").status_code == 201
    # Without from=, only repositories the caller may read are tried.
    secret_only = push_blob(as_user("bob"), "team-a/secret/keys", b"bob's own layer")
    assert alice.post(f"/v2/team-a/new/blobs/uploads/?mount={secret_only}").status_code == 202


def test_anonymous_callers_pull_public_repositories_and_are_challenged_elsewhere(seeded) -> None:
    anonymous = Client()
    assert anonymous.get("/v2/public/base/manifests/v1").status_code == 200
    assert anonymous.get("/v2/public/base/tags/list").json()["tags"] == ["v1"]
    for path in ("/v2/team-a/app/manifests/v1", "/v2/no/such/manifests/v1"):
        refused = anonymous.get(path)
        assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Basic ")
    pushed = anonymous.post("/v2/public/base/blobs/uploads/")
    assert pushed.status_code == 401


def test_empty_basic_credentials_are_anonymous_not_a_failed_login(seeded) -> None:
    empty = Client(HTTP_AUTHORIZATION="Basic Og==")  # what skopeo and containerd send
    assert empty.get("/v2/public/base/manifests/v1").status_code == 200
    refused = empty.get("/v2/team-a/app/manifests/v1")
    assert refused.status_code == 401
    assert refused.json()["error"] == "authentication required"  # no "invalid username or password"


def _token(client: Client, *scopes: str) -> dict[str, Any]:
    query = "&".join(f"scope={scope}" for scope in scopes)
    response = client.get(f"/auth/token?service=svc-registry&{query}")
    assert response.status_code == 200, response.content
    import jwt

    return {entry["name"]: sorted(entry["actions"]) for entry in
            jwt.decode(response.json()["token"], options={"verify_signature": False})["access"]}


def test_the_token_flow_grants_exactly_what_the_rules_allow(seeded) -> None:
    granted = _token(as_user("alice"), "repository:team-a/app:pull,push,delete", "repository:team-b/app:pull,push",
                     "repository:public/base:pull,push", "repository:team-a/secret/keys:pull")
    assert granted == {"team-a/app": ["pull", "push"], "public/base": ["pull", "push"]}
    assert _token(as_user("carol"), "repository:team-a/app:*") == {"team-a/app": ["pull"]}
    assert _token(Client(), "repository:public/base:pull,push", "repository:team-a/app:pull") == \
        {"public/base": ["pull"]}


def test_an_anonymous_token_pulls_public_repositories(seeded) -> None:
    response = Client().get("/auth/token?service=svc-registry&scope=repository:public/base:pull")
    token = response.json()["token"]
    pulled = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/v2/public/base/manifests/v1")
    assert pulled.status_code == 200
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/v2/team-a/app/manifests/v1").status_code == 401


def test_a_signed_token_is_decided_again_at_each_use(seeded, teams) -> None:
    response = as_user("alice").get("/auth/token?service=svc-registry&scope=repository:team-a/app:pull")
    bearer = Client(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    assert bearer.get("/v2/team-a/app/manifests/v1").status_code == 200
    teams.set_groups("team-a: bob\nteam-b: carol\n")
    assert bearer.get("/v2/team-a/app/manifests/v1").status_code == 404


def test_without_auth_rules_change_nothing(seeded, settings) -> None:
    settings.AUTH_ENABLED = False
    assert _catalog(Client()) == sorted(REPOSITORIES)
    assert Client().delete("/v2/team-a/app/manifests/v1").status_code == 202


def test_tag_lists_and_referrers_of_a_readable_repository_are_served(seeded) -> None:
    carol = as_user("carol")
    assert carol.get("/v2/team-a/app/tags/list").json() == {"name": "team-a/app", "tags": ["v1"]}
    listed = carol.get(f"/v2/team-a/app/referrers/{seeded['team-a/app']}")
    assert listed.status_code == 200 and json.loads(listed.content)["manifests"] == []


def test_through_the_token_flow_a_refused_read_is_absent_too(seeded) -> None:
    def bearer_for(scope: str) -> Client:
        response = as_user("alice").get(f"/auth/token?service=svc-registry&scope={scope}")
        return Client(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")

    refused = bearer_for("repository:team-b/app:pull").get("/v2/team-b/app/manifests/v1")
    absent = bearer_for("repository:team-a/ghost:pull").get("/v2/team-a/ghost/manifests/v1")
    assert refused.status_code == absent.status_code == 404
    assert refused.json()["errors"][0]["code"] == absent.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    pushed = bearer_for("repository:team-b/app:pull,push").post("/v2/team-b/app/blobs/uploads/")
    assert pushed.status_code == 403  # docker shows this message: not a 401 asking for a token again
    assert pushed.json()["errors"][0]["message"] == "alice has role none on team-b/*; push needs write"
