"""UI sessions live on the server: signing out kills a copied cookie; behind a trusted HTTPS proxy the
cookies are Secure and HSTS is sent."""
from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from regsite import config
from tests.support.ui_fixtures import PASSWORD, auth_on, sign_in, users  # noqa: F401

pytestmark = pytest.mark.django_db
HTTPS_PROXY = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_PROTO": "https"}


def test_a_copied_session_cookie_stops_working_at_sign_out(client: Client, auth_on) -> None:
    sign_in(client)
    stolen = Client()
    stolen.cookies["sessionid"] = client.cookies["sessionid"].value
    assert stolen.get("/ui/").status_code == 200
    client.post("/ui/sign-out")
    assert stolen.get("/ui/").status_code == 302
    assert not Session.objects.exists()


def test_a_new_sign_in_removes_sessions_that_ran_out(client: Client, auth_on) -> None:
    sign_in(client)
    Session.objects.update(expire_date="2000-01-01T00:00:00Z")
    sign_in(Client())
    assert Session.objects.count() == 1


def test_cookies_are_secure_and_hsts_sent_behind_a_trusted_https_proxy(client: Client, settings, auth_on) -> None:
    settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(["10.0.0.0/8"])
    page = client.get("/ui/sign-in", **HTTPS_PROXY)
    assert page.cookies["csrftoken"]["secure"] is True
    assert page["Strict-Transport-Security"].startswith("max-age=")
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD}, **HTTPS_PROXY)
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] is True


def test_cookies_are_not_secure_when_the_header_comes_from_anyone_else(client: Client, settings, auth_on) -> None:
    settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(["10.9.0.0/16"])
    page = client.get("/ui/sign-in", **HTTPS_PROXY)
    assert not page.cookies["csrftoken"]["secure"]
    assert "Strict-Transport-Security" not in page
    response = client.post("/ui/sign-in", {"username": "alice", "password": PASSWORD}, **HTTPS_PROXY)
    assert not response.cookies["sessionid"]["secure"]
