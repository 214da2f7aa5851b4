"""LDAP users against a real slapd: Basic credentials on the registry API, the token flow, the token
API and the UI sign-in; groups from the directory feeding [[access]]; the bind cache; local accounts
first; wrong passwords throttled; an unreachable directory is a 503 for LDAP users alone."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.support.access import teams  # noqa: F401  (fixture)
from tests.support.auth import auth_on, auth_paths, basic, bearer, write_htpasswd  # noqa: F401  (fixtures)
from tests.support.registry_client import push_image
from tests.support.slapd import (  # noqa: F401  (fixture)
    ADMIN_DN, ADMIN_PASSWORD, PASSWORDS, PEOPLE, dn_of, ldap_settings, slapd)
from tokens import directory

pytestmark = pytest.mark.django_db
PUSH = "/v2/{}/blobs/uploads/"


@pytest.fixture
def ldap_on(settings, teams, slapd) -> Any:
    """The three teams' rules and htpasswd users, with the directory's people beside them."""
    settings.LDAP = ldap_settings(slapd)
    directory.clear_cache()
    yield slapd
    directory.clear_cache()


def as_ldap(name: str, password: str | None = None) -> Client:
    return Client(HTTP_AUTHORIZATION=basic(name, PASSWORDS[name] if password is None else password))


def test_a_directory_user_pushes_where_their_group_may_and_nowhere_else(ldap_on) -> None:
    ann = as_ldap("ldap-ann")  # team-a in the directory
    assert ann.post(PUSH.format("team-a/app")).status_code == 202
    refused = ann.post(PUSH.format("team-b/app"))
    assert refused.status_code == 403
    assert refused.json()["errors"][0]["message"] == "ldap-ann has role none on team-b/*; push needs write"
    assert as_ldap("ldap-ben").post(PUSH.format("team-b/app")).status_code == 202


def test_a_group_change_in_the_directory_takes_effect_once_the_cached_bind_lapses(ldap_on, monkeypatch) -> None:
    ann = as_ldap("ldap-ann")
    assert ann.post(PUSH.format("team-a/app")).status_code == 202
    ldap_on.move("ldap-ann", "team-a", "team-b")
    try:
        assert ann.post(PUSH.format("team-a/app")).status_code == 202  # within cache_seconds: as it was
        later = directory.time.monotonic() + 61
        monkeypatch.setattr(directory.time, "monotonic", lambda: later)
        assert ann.post(PUSH.format("team-a/app")).status_code == 403
        assert ann.post(PUSH.format("team-b/app")).status_code == 202
    finally:
        ldap_on.move("ldap-ann", "team-b", "team-a")


def test_many_requests_cost_one_bind_per_user(ldap_on) -> None:
    before = {name: ldap_on.binds(dn_of(name)) for name in PASSWORDS}
    clients = {name: as_ldap(name) for name in PASSWORDS}
    for _ in range(100):
        for client in clients.values():
            assert client.get("/v2/").status_code == 200
    assert {name: ldap_on.binds(dn_of(name)) - before[name] for name in PASSWORDS} == {name: 1 for name in PASSWORDS}


def test_a_wrong_password_is_refused_and_counted_by_the_login_throttle(ldap_on, settings) -> None:
    settings.AUTH_LOGIN_FAILURES = 2
    wrong = as_ldap("ldap-ann", "not-it")
    assert wrong.get("/v2/").status_code == 401
    assert wrong.get("/v2/").status_code == 401
    throttled = as_ldap("ldap-ann").get("/v2/")  # even the right password waits now
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0


def test_an_empty_password_never_reaches_the_directory(ldap_on) -> None:
    before = ldap_on.binds(dn_of("ldap-ann"))
    assert as_ldap("ldap-ann", "").get("/v2/").status_code == 401  # an anonymous bind would succeed
    assert ldap_on.binds(dn_of("ldap-ann")) == before


def test_a_name_in_the_htpasswd_file_is_checked_there_alone(ldap_on, teams) -> None:
    write_htpasswd(teams.auth.htpasswd_file, {"ldap-ann": "local-password", "erin": "errands"})
    assert as_ldap("ldap-ann").get("/v2/").status_code == 401  # the directory's password is not asked
    assert as_ldap("ldap-ann", "local-password").get("/v2/").status_code == 200


def test_the_token_flow_grants_by_directory_groups_and_keeps_no_refresh_token(ldap_on) -> None:
    response = as_ldap("ldap-ann").get("/auth/token", {
        "service": "svc-registry", "scope": ["repository:team-a/app:pull,push", "repository:team-b/app:pull,push"],
        "offline_token": "true"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert "refresh_token" not in body  # docker keeps the password instead: the directory is asked again
    signed = Client(HTTP_AUTHORIZATION=bearer(body["token"]))
    assert signed.post(PUSH.format("team-a/app")).status_code == 202
    assert signed.post(PUSH.format("team-b/app")).status_code in (401, 403)


def test_a_directory_user_makes_an_api_token_that_disableuser_cuts(ldap_on) -> None:
    created = Client().post("/api/tokens", json.dumps({"username": "ldap-ann", "password": "ann-secret",
                                                       "role": "write"}), content_type="application/json")
    assert created.status_code == 201, created.content
    token = created.json()["token"]
    with_token = Client(HTTP_AUTHORIZATION=basic("token", token))
    assert with_token.post(PUSH.format("team-a/app")).status_code == 202
    assert with_token.post(PUSH.format("team-b/app")).status_code == 403
    call_command("disableuser", "ldap-ann", stdout=open("/dev/null", "w"))
    try:
        assert with_token.post(PUSH.format("team-a/app")).status_code == 401
        assert as_ldap("ldap-ann", "ann-secret").get("/v2/").status_code == 401  # cached bind or not
    finally:
        call_command("disableuser", "ldap-ann", "--enable", stdout=open("/dev/null", "w"))


def test_the_ui_sign_in_form_takes_a_directory_user_with_their_groups(ldap_on) -> None:
    erin = Client(HTTP_AUTHORIZATION=basic("erin", "errands"))  # the admin
    for name in ("team-a/app", "team-b/app"):
        push_image(erin, name, "v1")
    client = Client()
    response = client.post("/ui/sign-in", {"username": "ldap-ann", "password": "ann-secret"})
    assert response.status_code == 302, response.content
    page = client.get("/ui/").content.decode()
    assert "ldap-ann" in page and "team-a/app" in page and "team-b/app" not in page
    assert client.get("/ui/r/team-b/app/").status_code == 404


def test_an_unreachable_directory_is_a_503_for_its_users_while_local_users_push(ldap_on, settings) -> None:
    ldap_on.stop()
    try:
        refused = as_ldap("ldap-ben").post(PUSH.format("team-b/app"))
        assert refused.status_code == 503
        assert refused.json()["errors"][0]["code"] == "UNAVAILABLE"
        assert int(refused["Retry-After"]) > 0
        alice = Client(HTTP_AUTHORIZATION=basic("alice", "wonderland"))  # an htpasswd user
        assert alice.post(PUSH.format("team-a/app")).status_code == 202
        token = as_ldap("ldap-ben").get("/auth/token", {"service": "svc-registry"})
        assert token.status_code == 503 and token["Retry-After"]
        sign_in = Client().post("/ui/sign-in", {"username": "ldap-ben", "password": "ben-secret"})
        assert sign_in.status_code == 503
    finally:
        ldap_on.start()
        directory.clear_cache()
    assert as_ldap("ldap-ben").post(PUSH.format("team-b/app")).status_code == 202


def test_users_found_by_search_and_groups_by_member_of(ldap_on, settings) -> None:
    # Active Directory's shape: a search account finds the user, memberOf names the groups.
    settings.LDAP = ldap_settings(ldap_on, user_dn_template="", user_search_base=PEOPLE, user_filter="(uid={username})",
                                  bind_dn=ADMIN_DN, bind_password=ADMIN_PASSWORD, group_search_base="")
    assert as_ldap("ldap-ann").post(PUSH.format("team-a/app")).status_code == 202
    assert as_ldap("ldap-ann").post(PUSH.format("team-b/app")).status_code == 403
    assert as_ldap("nobody", "x*)(uid=*").get("/v2/").status_code == 401  # the filter is escaped


def test_ready_reports_the_directory_without_failing_for_it(ldap_on) -> None:
    assert Client().get("/ready").json()["checks"]["ldap"] == "ok"
    ldap_on.stop()
    try:
        response = Client().get("/ready")
        assert response.status_code == 200 and response.json()["checks"]["ldap"] == "not reachable"
    finally:
        ldap_on.start()
        directory.clear_cache()


def test_the_audit_log_names_the_identity_source(ldap_on) -> None:
    from audit.models import AuditEvent

    as_ldap("ldap-ann").post(PUSH.format("team-b/app"))  # refused: recorded
    Client(HTTP_AUTHORIZATION=basic("alice", "wonderland")).post(PUSH.format("team-b/app"))
    Client().post("/ui/sign-in", {"username": "ldap-ben", "password": "ben-secret"})
    sources = {(event.actor, event.action): event.source for event in AuditEvent.objects.all()}
    assert sources[("ldap-ann", "push")] == "ldap" and sources[("alice", "push")] == "htpasswd"
    assert sources[("ldap-ben", "sign-in")] == "ldap"
