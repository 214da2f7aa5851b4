"""Sign-in for the web UI: with auth on, nothing of the registry shows until an htpasswd user signs in."""
from __future__ import annotations

import time

import pytest
from django.test import Client

from ops.ui.access import SESSION_SECONDS, SESSION_SINCE, SESSION_USER
from tests.support.ui_fixtures import (  # noqa: F401
    PASSWORD,
    auth_on,
    plain_static,
    showcase,
    sign_in,
    users,
)

pytestmark = pytest.mark.django_db

BROWSE_PAGES = ["/ui/", "/ui/repositories/", "/ui/repositories/?q=team", "/ui/r/team/app/",
                "/ui/r/team/app/-/manifests/latest", "/ui/r/team/app/-/manifests/latest/delete",
                "/ui/r/no/such/repo/", "/ui/tokens/"]


# On the database every case is one and the same: an anonymous visitor is sent to sign in before any
# view reads anything (ops/ui/access.py: ui_view), and the sign-in page reads nothing stored. The
# PostgreSQL run of `make test` takes the first case and leaves the others to SQLite
# (``database_duplicate``, tests/support/database_mark.py); the showcase each seeds is the cost.
@pytest.mark.parametrize("path", [pytest.param(path, marks=[pytest.mark.database_duplicate] if n else [])
                                  for n, path in enumerate(BROWSE_PAGES)])
def test_it_sends_anonymous_visitors_to_sign_in_without_showing_names(
    client: Client, auth_on, showcase, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/ui/sign-in?next=")
    page = client.get(response["Location"])
    assert page.status_code == 200
    # The page echoes only the address typed (in ``next``); it reveals nothing else that exists.
    for secret in ("team/app", "team/multi", "infra/tools", showcase["latest"].digest, "v1.0"):
        if secret not in path:
            assert secret not in page.content.decode()


def test_it_answers_the_same_for_existing_and_unknown_repositories(client: Client, auth_on, showcase) -> None:
    known, unknown = client.get("/ui/r/team/app/"), client.get("/ui/r/team/nope/")
    assert known.status_code == unknown.status_code == 302
    assert known["Location"].replace("app", "nope") == unknown["Location"]


def test_it_signs_in_with_an_htpasswd_user_and_returns_to_the_page(client: Client, auth_on, showcase) -> None:
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD,
                                           "next": "/ui/r/team/app/"})
    assert response.status_code == 302 and response["Location"] == "/ui/r/team/app/"
    cookie = response.cookies["sessionid"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert 0 < int(cookie["max-age"]) <= SESSION_SECONDS
    page = client.get("/ui/r/team/app/")
    assert page.status_code == 200 and "alice" in page.content.decode()


def test_it_refuses_a_wrong_password_without_saying_which_part_was_wrong(client: Client, auth_on) -> None:
    for username, password in (("alice", "wrong"), ("mallory", PASSWORD)):
        response = client.post("/ui/sign-in", {"username": username, "password": password})
        assert response.status_code == 400
        assert "Wrong username or password." in response.content.decode()
        assert client.get("/ui/").status_code == 302


def test_it_asks_for_both_fields(client: Client, auth_on) -> None:
    response = client.post("/ui/sign-in", {"username": "alice"})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()


def test_it_slows_down_repeated_failures(client: Client, auth_on) -> None:
    for _ in range(10):
        client.post("/ui/sign-in", {"username": "alice", "password": "wrong"})
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed sign-ins" in response.content.decode()


@pytest.mark.parametrize("target", ["https://evil.example/ui/", "//evil.example/ui/", "/v2/_catalog"])
def test_it_only_returns_to_ui_pages_after_sign_in(client: Client, auth_on, target: str) -> None:
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD, "next": target})
    assert response["Location"] == "/ui/"


def test_it_signs_out_with_a_post(client: Client, auth_on, showcase) -> None:
    sign_in(client)
    assert client.get("/ui/").status_code == 200
    assert client.get("/ui/sign-out").status_code == 405
    response = client.post("/ui/sign-out")
    assert response.status_code == 302 and "signed_out" in response["Location"]
    assert client.get("/ui/").status_code == 302
    assert "You are signed out." in client.get(response["Location"]).content.decode()


def test_it_forgets_a_sign_in_older_than_the_session_lifetime(client: Client, auth_on) -> None:
    sign_in(client)
    session = client.session
    session[SESSION_SINCE] = int(time.time()) - SESSION_SECONDS - 1
    session.save()
    client.cookies["sessionid"] = session.session_key
    assert client.session[SESSION_USER] == "alice"
    assert client.get("/ui/").status_code == 302


def test_it_refuses_a_sign_in_post_without_a_csrf_token(auth_on) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 403
    assert "This form could not be verified" in response.content.decode()
    form = client.get("/ui/sign-in")
    token = client.cookies["csrftoken"].value
    assert 'name="csrfmiddlewaretoken"' in form.content.decode()
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD,
                                           "csrfmiddlewaretoken": token})
    assert response.status_code == 302


def test_it_is_open_with_auth_off(client: Client, users, showcase) -> None:
    assert client.get("/ui/repositories/").status_code == 200
    assert "team/app" in client.get("/ui/repositories/").content.decode()
    assert client.get("/ui/tokens/").status_code == 302  # tokens still belong to a user
    page = client.get("/ui/sign-in").content.decode()
    assert "Authentication is off" in page


def test_it_gives_registry_clients_no_cookie(client: Client, showcase) -> None:
    response = client.get("/v2/_catalog")
    assert "sessionid" not in response.cookies and "csrftoken" not in response.cookies


def test_it_ends_the_sign_in_of_a_user_removed_from_htpasswd(client: Client, auth_on) -> None:
    sign_in(client)
    assert client.get("/ui/").status_code == 200
    auth_on.write_text("\n".join(line for line in auth_on.read_text().splitlines()
                                 if not line.startswith("alice:")) + "\n")
    assert client.get("/ui/").status_code == 302


def test_it_ends_the_sign_in_when_the_password_changes(client: Client, auth_on) -> None:
    from tokens import htpasswd

    sign_in(client)
    htpasswd.set_password(auth_on, "alice", "a brand new password", cost=4)
    assert client.get("/ui/").status_code == 302
    sign_in(client, password="a brand new password")
    assert client.get("/ui/").status_code == 200
