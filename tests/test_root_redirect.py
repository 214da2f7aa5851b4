"""/ and /ui take a browser to the web UI, with or without authentication, and never challenge."""
from __future__ import annotations

import pytest

from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/ui"])
def test_it_redirects_to_the_ui_without_a_login_dialog(client, auth_on, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == "/ui/"
    assert "WWW-Authenticate" not in response


@pytest.mark.parametrize("path", ["/", "/ui"])
def test_it_redirects_with_auth_off_too(client, path: str) -> None:
    assert client.head(path)["Location"] == "/ui/"


def test_it_keeps_the_query_string(client) -> None:
    assert client.get("/ui", {"q": "team"})["Location"] == "/ui/?q=team"


def test_it_refuses_other_methods(client) -> None:
    response = client.post("/")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_the_ui_home_it_leads_to_answers(client, auth_on) -> None:
    assert client.get("/", follow=True).redirect_chain[0] == ("/ui/", 302)
