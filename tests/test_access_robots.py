"""Robot accounts: made by admins (API and manage.py), signing in with Basic and the token flow within
their own scope, disabled, expired, rotated and deleted, each refusing the very next request."""
from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tests.support.access import PASSWORDS, teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tests.support.registry_client import push_image
from tokens import queries, robots

pytestmark = pytest.mark.django_db


def _api(path: str, who: str = "erin", **body: Any) -> Any:
    return Client().post(path, json.dumps({"username": who, "password": PASSWORDS[who], **body}),
                         content_type="application/json")


def _as(name: str, secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=basic(name, secret))


def _createrobot(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("createrobot", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_an_admin_creates_a_robot_that_pushes_within_its_scope_only(teams) -> None:
    created = _api("/api/robots", name="team-a-ci", repositories=["team-a/*"], role="write", ttl_days=90)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "robot$team-a-ci" and body["secret"].startswith("svcr_") and body["state"] == "active"
    robot = _as("robot$team-a-ci", body["secret"])
    push_image(robot, "team-a/app", "v1")
    refused = robot.post("/v2/team-b/app/blobs/uploads/")
    assert refused.status_code == 403
    assert refused.json()["errors"][0]["message"] == (
        "robot$team-a-ci has role none on team-b/app (outside its repositories team-a/*); push needs write")
    assert robot.delete("/v2/team-a/app/manifests/v1").status_code == 403  # write, not admin


def test_the_secret_is_stored_only_as_its_hash(teams) -> None:
    secret, _ = _createrobot("ci", "--repository", "team-a/*")
    row = queries.robot("robot$ci")
    assert row is not None and secret not in (row.digest, row.repositories) and len(row.digest) == 64


def test_only_admins_manage_robots(teams) -> None:
    refused = _api("/api/robots", who="alice", name="mine", repositories=["team-a/*"])
    assert refused.status_code == 403
    assert refused.json() == {"error": "alice is not an admin ([auth] admins): only admins manage robot accounts"}
    assert _api("/api/robots/list", who="bob").status_code == 403


@pytest.mark.parametrize("body, status, field", [
    ({"name": "Bad Name", "repositories": ["team-a/*"]}, 400, "name"),
    ({"name": "ci", "repositories": []}, 400, "repositories"),
    ({"name": "ci", "repositories": ["team-a/*"], "role": "owner"}, 400, "role"),
])
def test_bad_robot_requests_are_400_naming_the_field(teams, body: dict[str, Any], status: int, field: str) -> None:
    response = _api("/api/robots", **body)
    assert response.status_code == status and response.json()["field"] == field


def test_a_robot_name_is_taken_once(teams) -> None:
    _createrobot("ci", "--repository", "team-a/*")
    again = _api("/api/robots", name="robot$ci", repositories=["team-b/*"])
    assert again.status_code == 409 and again.json()["field"] == "name"


def test_a_disabled_robot_is_refused_at_its_next_request_and_enabled_again(teams) -> None:
    secret, _ = _createrobot("ci", "--repository", "team-a/*", "--role", "write")
    robot = _as("robot$ci", secret)
    push_image(robot, "team-a/app", "v1")
    assert _api("/api/robots/disable", name="ci").json()["state"] == "disabled"
    refused = robot.get("/v2/team-a/app/manifests/v1")
    assert refused.status_code == 401
    assert refused.json()["error"] == ("authentication required: unknown, disabled or expired robot account, or a "
                                       "wrong secret")
    assert _api("/api/robots/enable", name="ci").json()["state"] == "active"
    assert robot.get("/v2/team-a/app/manifests/v1").status_code == 200


def test_rotation_keeps_the_name_and_kills_the_old_secret(teams) -> None:
    old, _ = _createrobot("ci", "--repository", "team-a/*")
    rotated = _api("/api/robots/rotate", name="robot$ci").json()
    assert rotated["name"] == "robot$ci" and rotated["secret"] != old and rotated["rotated_at"]
    assert _as("robot$ci", old).get("/v2/_catalog").status_code == 401
    assert _as("robot$ci", rotated["secret"]).get("/v2/_catalog").status_code == 200


def test_an_expired_robot_is_refused(teams) -> None:
    secret, _ = _createrobot("ci", "--repository", "team-a/*", "--ttl-days", "1")
    assert _as("robot$ci", secret).get("/v2/_catalog").status_code == 200
    from tokens.models import Robot

    Robot.objects.filter(name="robot$ci").update(expires_at=robots._now() - timedelta(seconds=1))
    assert _as("robot$ci", secret).get("/v2/_catalog").status_code == 401
    assert robots.get("ci").state == "expired"


def test_a_robot_signs_in_through_the_token_flow_and_its_tokens_die_with_it(teams, settings) -> None:
    settings.AUTH_CHALLENGE = "bearer"
    secret, _ = _createrobot("ci", "--repository", "team-a/*")
    response = _as("robot$ci", secret).get(
        "/auth/token?service=svc-registry&scope=repository:team-a/app:pull,push&scope=repository:team-b/app:pull")
    assert response.status_code == 200
    import jwt

    claims = jwt.decode(response.json()["token"], options={"verify_signature": False})
    assert claims["sub"] == "robot$ci" and claims["access"] == [
        {"type": "repository", "name": "team-a/app", "actions": ["pull", "push"]}]
    signed = Client(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    push_image(signed, "team-a/app", "v1")
    robots.rotate("ci")
    refused = signed.get("/v2/team-a/app/manifests/v1")
    assert refused.status_code == 401 and 'error="invalid_token"' in refused["WWW-Authenticate"]
    assert "its secret rotated" in refused.json()["error"]


def test_the_robots_command_lists_disables_rotates_and_deletes(teams) -> None:
    _createrobot("ci", "--repository", "team-a/*", "--description", "pipeline")
    out = io.StringIO()
    call_command("robots", "list", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["NAME", "ROLE", "REPOSITORIES", "STATE", "EXPIRES", "CREATED_BY", "DESCRIPTION"]
    assert lines[1].split()[:4] == ["robot$ci", "write", "team-a/*", "active"]
    out = io.StringIO()
    call_command("robots", "disable", "ci", stdout=out)
    assert out.getvalue().strip() == "robot$ci is disabled"
    out, err = io.StringIO(), io.StringIO()
    call_command("robots", "rotate", "robot$ci", stdout=out, stderr=err)
    assert out.getvalue().strip().startswith("svcr_") and "old one no longer works" in err.getvalue()
    call_command("robots", "delete", "ci", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no robot account 'robot\\$ci'"):
        call_command("robots", "disable", "ci")
    listed = io.StringIO()
    call_command("robots", "list", "--json", stdout=listed)
    assert json.loads(listed.getvalue()) == {"robots": []}


def test_robot_names_are_not_htpasswd_users_nor_token_owners(teams) -> None:
    from tokens import services

    with pytest.raises(services.InvalidTokenRequest, match="robot accounts"):
        services.create_token("robot$ci")
