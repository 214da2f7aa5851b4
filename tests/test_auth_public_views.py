"""Views say where they are defined whether they are public; credentials sent to a public view are
never checked nor counted, while the /v2/ version check still checks them."""
from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import resolve

from ops import openapi
from tests.support.auth import auth_on, auth_paths, basic  # noqa: F401  (fixtures)
from tokens.access import Access, access_of, has_own_credential_check
from tokens.models import LoginFailure

pytestmark = pytest.mark.django_db

SAMPLE = {"name": "team/app", "reference": "v1", "digest": "sha256:" + "a" * 64, "upload_id": "0" * 32,
          "rest": "no/such/page"}
PUBLIC_PAGES = ["/", "/ui", "/health", "/ready", "/metrics", "/api-docs/", "/api-docs/openapi.json", "/ui/",
                "/ui/sign-in", "/static/no-such-asset.css"]


def test_the_public_views_are_those_the_openapi_document_leaves_open() -> None:
    for path, item in openapi.document()["paths"].items():
        view = resolve(re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], path)).func
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                documented_open = operation.get("security") == []
                if has_own_credential_check(view):
                    # Public to the middleware, but the view itself may require what is documented.
                    assert access_of(view) is Access.PUBLIC, (method, path)
                else:
                    assert documented_open == (access_of(view) is Access.PUBLIC), (method, path)


def test_the_token_endpoint_checks_its_own_credentials_and_documents_them() -> None:
    assert has_own_credential_check(resolve("/auth/token").func)
    item = openapi.document()["paths"]["/auth/token"]
    assert item["get"]["security"] == [{"basic": []}, {"bearer": []}]
    assert item["post"]["security"] == []  # the OAuth2 form carries its credentials in the body


def test_the_version_check_is_open_but_checks_what_is_sent() -> None:
    assert access_of(resolve("/v2/").func) is Access.OPTIONAL


@pytest.mark.parametrize("path", PUBLIC_PAGES)
def test_it_never_checks_credentials_sent_to_a_public_endpoint(client: Client, auth_on, path: str) -> None:
    for _ in range(12):
        response = client.get(path, HTTP_AUTHORIZATION=basic("alice", "wrong"), REMOTE_ADDR="10.0.0.7")
        assert response.status_code in (200, 302, 404), response.status_code
        assert "WWW-Authenticate" not in response
    assert not LoginFailure.objects.exists()
    right = client.get("/v2/_catalog", HTTP_AUTHORIZATION=basic("alice", "wonderland"), REMOTE_ADDR="10.0.0.7")
    assert right.status_code == 200


def test_it_does_check_credentials_sent_to_the_version_check(client: Client, auth_on) -> None:
    response = client.get("/v2/", HTTP_AUTHORIZATION=basic("alice", "wrong"), REMOTE_ADDR="10.0.0.7")
    assert response.status_code == 401
    assert LoginFailure.objects.count() == 1
