"""Deleting tags and manifests from the UI: a confirmation page, then a POST with a CSRF token."""
from __future__ import annotations

import pytest
from django.test import Client

from registry.models import Manifest, Tag
from tests.support.ui_fixtures import PASSWORD, auth_on, plain_static, showcase, users  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser() -> Client:
    """A client that, like a browser, must send the CSRF token it was given."""
    return Client(enforce_csrf_checks=True)


def post_form(client: Client, path: str, data: dict | None = None):
    client.get(path)  # the page hands out the CSRF cookie
    return client.post(path, {**(data or {}), "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def tags(name: str) -> set[str]:
    return set(Tag.objects.filter(repository__name=name).values_list("name", flat=True))


def test_it_asks_before_deleting_a_tag(browser: Client, showcase) -> None:
    response = browser.get("/ui/r/team/app/-/manifests/v1.0/delete")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Delete tag v1.0?" in body and "the manifest stays" in body
    assert tags("team/app") == {"v1.0", "v1.1", "latest"}


def test_it_deletes_only_the_tag(browser: Client, showcase) -> None:
    response = post_form(browser, "/ui/r/team/app/-/manifests/v1.0/delete")
    assert response.status_code == 302
    assert response["Location"] == "/ui/r/team/app/?deleted=tag+v1.0"
    assert tags("team/app") == {"v1.1", "latest"}
    assert Manifest.objects.filter(digest=showcase["app"].digest).exists()
    assert "Deleted tag v1.0." in browser.get(response["Location"]).content.decode()


def test_it_deletes_a_manifest_with_its_tags(browser: Client, showcase) -> None:
    digest = showcase["latest"].digest
    confirm = browser.get(f"/ui/r/team/app/-/manifests/{digest}/delete").content.decode()
    assert "Delete this manifest?" in confirm and "latest, v1.1" in confirm
    assert "2 referrers (signatures, SBOMs) stay" in confirm
    response = post_form(browser, f"/ui/r/team/app/-/manifests/{digest}/delete")
    assert response.status_code == 302
    assert not Manifest.objects.filter(digest=digest).exists()
    assert tags("team/app") == {"v1.0"}


def test_it_refuses_a_delete_without_the_csrf_token(browser: Client, showcase) -> None:
    response = browser.post("/ui/r/team/app/-/manifests/v1.0/delete")
    assert response.status_code == 403
    assert "v1.0" in tags("team/app")


def test_it_hides_and_refuses_deletes_when_they_are_disabled(browser: Client, showcase, settings) -> None:
    settings.REGISTRY_DELETE_ENABLED = False
    page = browser.get("/ui/r/team/app/").content.decode()
    assert "/delete" not in page
    confirm = browser.get("/ui/r/team/app/-/manifests/v1.0/delete")
    assert confirm.status_code == 403 and "Deletes are disabled" in confirm.content.decode()
    browser.get("/ui/sign-in")  # any form page hands out the CSRF cookie
    response = browser.post("/ui/r/team/app/-/manifests/v1.0/delete",
                            {"csrfmiddlewaretoken": browser.cookies["csrftoken"].value})
    assert response.status_code == 403
    assert "v1.0" in tags("team/app")


def test_it_says_so_when_the_tag_is_already_gone(browser: Client, showcase) -> None:
    browser.get("/ui/r/team/app/-/manifests/v1.0/delete")
    token = browser.cookies["csrftoken"].value
    Tag.objects.filter(name="v1.0").delete()
    response = browser.post("/ui/r/team/app/-/manifests/v1.0/delete", {"csrfmiddlewaretoken": token})
    assert response.status_code == 404 and "Error 404" in response.content.decode()


def test_it_lets_only_signed_in_users_delete_with_auth_on(browser: Client, auth_on, showcase) -> None:
    anonymous = Client(enforce_csrf_checks=True)
    anonymous.get("/ui/sign-in")
    response = anonymous.post("/ui/r/team/app/-/manifests/v1.0/delete",
                              {"csrfmiddlewaretoken": anonymous.cookies["csrftoken"].value})
    assert response.status_code == 302 and response["Location"].startswith("/ui/sign-in")
    assert "v1.0" in tags("team/app")

    post_form(browser, "/ui/sign-in", {"username": "alice", "password": PASSWORD})
    page = browser.get("/ui/r/team/app/").content.decode()
    assert "/ui/r/team/app/-/manifests/v1.0/delete" in page
    assert post_form(browser, "/ui/r/team/app/-/manifests/v1.0/delete").status_code == 302
    assert "v1.0" not in tags("team/app")


def test_it_deletes_a_repository_once_its_name_is_typed_again(browser: Client, showcase) -> None:
    from registry.models import Repository

    page = browser.get("/ui/r/team/app/").content.decode()
    assert 'href="/ui/r/team/app/-/delete"' in page
    confirm = browser.get("/ui/r/team/app/-/delete")
    assert confirm.status_code == 200 and "Type <strong>team/app</strong> to confirm" in confirm.content.decode()

    wrong = post_form(browser, "/ui/r/team/app/-/delete", {"confirm_name": "team/multi"})
    assert wrong.status_code == 400 and "not the repository&#x27;s name" in wrong.content.decode()
    assert Repository.objects.filter(name="team/app").exists()

    response = post_form(browser, "/ui/r/team/app/-/delete", {"confirm_name": "team/app"})
    assert response.status_code == 302 and response["Location"] == "/ui/repositories/?deleted=team%2Fapp"
    assert not Repository.objects.filter(name="team/app").exists()
    assert Repository.objects.filter(name="team/multi").exists()
    listing = browser.get(response["Location"]).content.decode()
    assert "Deleted repository team/app." in listing


def test_it_refuses_to_delete_a_repository_when_deletes_are_disabled(browser: Client, showcase, settings) -> None:
    settings.REGISTRY_DELETE_ENABLED = False
    assert "/-/delete" not in browser.get("/ui/r/team/app/").content.decode()
    assert browser.get("/ui/r/team/app/-/delete").status_code == 403
