"""Every endpoint against every kind of caller: status and body, auth off and on.

Columns are callers (no credentials, bad ones, an htpasswd user, tokens of each role sent as Basic
``token:<token>`` or as Bearer); rows are the registry's routes with the action each needs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support.auth import auth_paths, basic, bearer  # noqa: F401  (fixture)
from tokens import services

pytestmark = pytest.mark.django_db

LAYER = b"layer-bytes" * 100
CONFIG = b'{"architecture":"amd64","os":"linux"}'
CHUNK = b"chunk-bytes"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


MANIFEST = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
               "digest": _digest(CONFIG), "size": len(CONFIG)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": _digest(LAYER), "size": len(LAYER)}],
}).encode()
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    path: str              # formatted with layer, manifest, upload
    action: str            # pull, push, delete, public
    allowed: int           # status when the caller may do it
    body: bytes = b""
    content_type: str = "application/octet-stream"


ROUTES = {
    "ping": Route("GET", "/v2/", "public", 200),
    "catalog": Route("GET", "/v2/_catalog", "pull", 200),
    "tags": Route("GET", "/v2/team/app/tags/list", "pull", 200),
    "manifest-get": Route("GET", "/v2/team/app/manifests/v1", "pull", 200),
    "manifest-head": Route("HEAD", "/v2/team/app/manifests/v1", "pull", 200),
    "manifest-put": Route("PUT", "/v2/team/app/manifests/v2", "push", 201, MANIFEST, MANIFEST_TYPE),
    "manifest-delete": Route("DELETE", "/v2/team/app/manifests/{manifest}", "delete", 202),
    "tag-delete": Route("DELETE", "/v2/team/app/manifests/v1", "delete", 202),
    "blob-get": Route("GET", "/v2/team/app/blobs/{layer}", "pull", 200),
    "blob-head": Route("HEAD", "/v2/team/app/blobs/{layer}", "pull", 200),
    "blob-delete": Route("DELETE", "/v2/team/app/blobs/{layer}", "delete", 202),
    "upload-start": Route("POST", "/v2/team/app/blobs/uploads/", "push", 202),
    "upload-mount": Route("POST", "/v2/other/app/blobs/uploads/?mount={config}&from=team/app", "push", 201),
    "upload-status": Route("GET", "{upload}", "push", 204),
    "upload-patch": Route("PATCH", "{upload}", "push", 202, CHUNK),
    "upload-finish": Route("PUT", "{upload}?digest={chunk}", "push", 201, CHUNK),
    "upload-cancel": Route("DELETE", "{upload}", "push", 204),
    "referrers": Route("GET", "/v2/team/app/referrers/{manifest}", "pull", 200),
    "token-list": Route("POST", "/api/tokens/list", "public", 200,
                        b'{"username": "alice", "password": "wonderland"}', "application/json"),
}

# Caller -> (auth enabled, credential kind, role it grants or None when it must be refused).
CALLERS = {
    "auth-off": (False, "none", "admin"),
    "no-credentials": (True, "none", None),
    "wrong-password": (True, "wrong-password", None),
    "unknown-user": (True, "unknown-user", None),
    "expired-token": (True, "expired-token", None),
    "revoked-token": (True, "revoked-token", None),
    "malformed-token": (True, "malformed-token", None),
    "htpasswd-user": (True, "user", "admin"),
    "token-read": (True, "basic-token:read", "read"),
    "token-write": (True, "basic-token:write", "write"),
    "token-admin": (True, "basic-token:admin", "admin"),
    "bearer-read": (True, "bearer:read", "read"),
    "bearer-write": (True, "bearer:write", "write"),
    "bearer-admin": (True, "bearer:admin", "admin"),
}
RANK = {"read": 1, "write": 2, "admin": 3}
NEEDS = {"pull": "read", "push": "write", "delete": "admin"}


def _seed_repository(client: Any) -> dict[str, str]:
    for blob in (LAYER, CONFIG):
        response = client.post(f"/v2/team/app/blobs/uploads/?digest={_digest(blob)}", blob,
                               content_type="application/octet-stream")
        assert response.status_code == 201
    assert client.put("/v2/team/app/manifests/v1", MANIFEST, content_type=MANIFEST_TYPE).status_code == 201
    upload = client.post("/v2/team/app/blobs/uploads/")["Location"]
    return {"layer": _digest(LAYER), "config": _digest(CONFIG), "manifest": _digest(MANIFEST),
            "chunk": _digest(CHUNK), "upload": upload}


def _expired_token() -> str:
    created = services.create_token("alice", "admin")
    repo = services.repository()
    stored = repo.get(services.token_digest(created.token))
    assert stored is not None
    repo.save(dataclasses.replace(stored, expires_at=stored.created_at - timedelta(seconds=1)))
    return created.token


def _authorization(kind: str) -> str | None:
    if kind == "none":
        return None
    if kind == "wrong-password":
        return basic("alice", "not-the-password")
    if kind == "unknown-user":
        return basic("mallory", "wonderland")
    if kind == "expired-token":
        return basic("token", _expired_token())
    if kind == "revoked-token":
        created = services.create_token("alice", "admin")
        services.revoke_token("alice", created.hash_prefix)
        return bearer(created.token)
    if kind == "malformed-token":
        return bearer("svc_not-a-token")
    if kind == "user":
        return basic("alice", "wonderland")
    scheme, role = kind.split(":")
    token = services.create_token("bob", role).token
    return basic("token", token) if scheme == "basic-token" else bearer(token)


def _expected(route: Route, enabled: bool, grants: str | None, sent: str | None) -> int:
    if route.action == "public":
        # The ping stays open, but credentials that are sent are checked.
        refused = route.path == "/v2/" and enabled and sent is not None and grants is None
        return 401 if refused else route.allowed
    if grants is None:
        return 401
    return route.allowed if RANK[grants] >= RANK[NEEDS[route.action]] else 403


def _cells(outcomes: dict[tuple[str, ...], Any]) -> list[Any]:
    """The cases, the first of each (route, outcome) reaching the database as a case of its own and the
    others marked ``database_duplicate``: on the database a case is one route answering one way (the
    caller differs only in how its credentials are checked, in files), so the PostgreSQL run of `make
    test` takes the first and leaves the repeats to SQLite."""
    seen: set[Any] = set()
    cells = []
    for args, outcome in outcomes.items():
        marks = [pytest.mark.database_duplicate] if outcome in seen else []
        seen.add(outcome)
        cells.append(pytest.param(*args, marks=marks, id="-".join(args)))
    return cells


def _sent(caller: str) -> str | None:
    return None if CALLERS[caller][1] == "none" else "credentials"


@pytest.mark.parametrize("route_name, caller", _cells({
    (route_name, caller): (route_name, _expected(ROUTES[route_name], CALLERS[caller][0], CALLERS[caller][2],
                                                 _sent(caller)))
    for route_name in ROUTES for caller in CALLERS}))
def test_it_enforces_credentials_and_roles(client, settings, auth_paths, route_name: str,
                                           caller: str) -> None:
    route = ROUTES[route_name]
    values = _seed_repository(client)
    enabled, kind, grants = CALLERS[caller]
    settings.AUTH_ENABLED = enabled
    headers = {}
    authorization = _authorization(kind)
    if authorization:
        headers["HTTP_AUTHORIZATION"] = authorization

    response = client.generic(route.method, route.path.format(**values), route.body,
                              content_type=route.content_type, **headers)

    expected = _expected(route, enabled, grants, authorization)
    assert response.status_code == expected, response.content
    if expected == 401:
        assert response["WWW-Authenticate"].startswith('Basic realm="')
        if route.method != "HEAD":
            body = response.json()
            assert body["error"].startswith("authentication required")
            assert body["errors"][0] == {"code": "UNAUTHORIZED", "message": body["error"]}
    elif expected == 403:
        body = response.json()
        assert body["errors"][0]["code"] == "DENIED"
        assert f"; {route.action} needs " in body["errors"][0]["message"]
    elif route_name == "ping":
        challenged = enabled and authorization is None
        assert ("WWW-Authenticate" in response) == challenged
    if route.action != "public" and expected not in (401, 403):
        assert response.status_code == route.allowed


# -- the access rules' dimension ----------------------------------------------------------------
#
# The same routes against callers the [[access]] rules judge: by name, through a group, robots, a
# token capped by its owner's role, a token limited to other repositories, and a user no rule names,
# with the rules configured and not. Rules off, every user is an admin as above; robots and tokens
# keep their own limits either way.

RULES = [
    {"repositories": ["team/*"], "users": ["alice"], "role": "admin"},
    {"repositories": ["team/*"], "groups": ["readers"], "role": "read"},
    {"repositories": ["team/*"], "groups": ["writers"], "role": "write"},
    {"repositories": ["other/*"], "users": ["alice"], "groups": ["writers", "readers"], "role": "write"},
]
GROUPS = "readers: bob\nwriters: carol\n"
# Caller -> its role on (team/app, other/app) with the rules on, and with them off.
RULE_CALLERS = {
    "user-by-name": ("alice", ("admin", "write"), ("admin", "admin")),
    "user-by-group-read": ("bob", ("read", "write"), ("admin", "admin")),
    "user-by-group-write": ("carol", ("write", "write"), ("admin", "admin")),
    "user-in-no-rule": ("dave", (None, None), ("admin", "admin")),
    "robot-write": ("robot$ci", ("write", "write"), ("write", "write")),
    "robot-read": ("robot$viewer", ("read", None), ("read", None)),
    "token-capped-by-owner": ("token:carol:admin", ("write", "write"), ("admin", "admin")),
    "token-of-other-repositories": ("token:alice:admin:other/*", (None, "write"), (None, "admin")),
    "bearer-token-read": ("bearer:bob:read", ("read", "read"), ("read", "read")),
}
HIDDEN = {"referrers": 200}  # a repository that does not exist has no referrers: an empty index


def _rule_authorization(caller: str) -> str:
    from tokens import robots

    if caller.startswith("robot$"):
        repositories, role = (["team/*", "other/*"], "write") if caller == "robot$ci" else (["team/*"], "read")
        return basic(caller, robots.create(caller, repositories, role).secret)
    if ":" in caller:
        scheme, owner, role, *limited = caller.split(":")
        token = services.create_token(owner, role, repositories=limited or None).token
        return bearer(token) if scheme == "bearer" else basic("token", token)
    return basic(caller, {"alice": "wonderland", "bob": "builder"}.get(caller, "password"))


def _rule_expected(route_name: str, route: Route, team: str | None, other: str | None) -> int:
    if route.action == "public":
        return route.allowed
    if route_name == "catalog":
        return 200
    if route_name == "upload-mount":
        if other is None or RANK[other] < RANK["write"]:
            return 403
        return 201 if team is not None else 202  # no mount from a repository it may not read
    if team is not None and RANK[team] >= RANK[NEEDS[route.action]]:
        return route.allowed
    if route.action == "pull":
        return HIDDEN.get(route_name, 404)  # answered as for a repository that does not exist
    return 403


def _rule_roles(caller: str, rules: str) -> tuple[str | None, str | None]:
    _name, on, off = RULE_CALLERS[caller]
    return on if rules == "rules-on" else off


@pytest.mark.parametrize("route_name, caller, rules", _cells({
    (route_name, caller, rules): (route_name, rules, _rule_expected(route_name, ROUTES[route_name],
                                                                    *_rule_roles(caller, rules)))
    for route_name in ROUTES for caller in RULE_CALLERS for rules in ("rules-on", "rules-off")}))
def test_it_enforces_the_access_rules(client, settings, auth_paths, route_name: str, caller: str,
                                      rules: str) -> None:
    from tests.support.auth import write_htpasswd
    from tokens import htpasswd

    route = ROUTES[route_name]
    values = _seed_repository(client)
    write_htpasswd(auth_paths.htpasswd_file, {"alice": "wonderland", "bob": "builder", "carol": "password",
                                              "dave": "password"})
    htpasswd.clear_cache()
    if rules == "rules-on":
        groups = auth_paths.htpasswd_file.parent / "groups"
        groups.write_text(GROUPS)
        settings.AUTH_GROUPS_FILE = str(groups)
        settings.ACCESS_RULES = RULES
        settings.AUTH_DEFAULT_ROLE = "none"
    settings.AUTH_ENABLED = True
    name = RULE_CALLERS[caller][0]
    team, other = _rule_roles(caller, rules)

    response = client.generic(route.method, route.path.format(**values), route.body,
                              content_type=route.content_type, HTTP_AUTHORIZATION=_rule_authorization(name))

    expected = _rule_expected(route_name, route, team, other)
    assert response.status_code == expected, response.content
    if expected == 403:
        message = response.json()["errors"][0]["message"]
        assert response.json()["errors"][0]["code"] == "DENIED" and f"; {route.action} needs " in message
        if rules == "rules-on" and not name.startswith(("robot$", "token:", "bearer:")):
            assert " on team/*;" in message or " on other/*;" in message or "default_role" in message, message
