"""Every route: unsupported methods give 405 with Allow; HEAD gives the headers and no body."""
from __future__ import annotations

import pytest

from tests.support.registry_client import body_of, digest_of, error_code, push_image, start_upload

pytestmark = pytest.mark.django_db

DIGEST = digest_of(b"x")
ROUTES = {
    "/v2/": "GET, HEAD",
    "/v2/_catalog": "GET, HEAD",
    "/v2/team/app/tags/list": "GET, HEAD",
    "/v2/team/app/manifests/v1": "DELETE, GET, HEAD, PUT",
    f"/v2/team/app/blobs/{DIGEST}": "DELETE, GET, HEAD",
    "/v2/team/app/blobs/uploads/": "POST",
    f"/v2/team/app/blobs/uploads/{'0' * 32}": "DELETE, GET, HEAD, PATCH, PUT",
    f"/v2/team/app/referrers/{DIGEST}": "GET, HEAD",
}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@pytest.mark.parametrize("url, allow", ROUTES.items())
def test_it_answers_405_unsupported_with_allow_for_other_methods(client, url, allow) -> None:
    refused = [m for m in METHODS if m not in allow.split(", ")]
    assert refused
    for method in refused:
        response = client.generic(method, url)
        assert response.status_code == 405, (method, url)
        assert response["Allow"] == allow
        assert error_code(response) == "UNSUPPORTED"
        assert response["Docker-Distribution-API-Version"] == "registry/2.0"


@pytest.fixture
def pushed(client) -> dict[str, str]:
    _, digest = push_image(client, "team/app", "v1", layers=[b"layer"])
    location = start_upload(client, "team/app")["Location"]
    return {
        "base": "/v2/",
        "catalog": "/v2/_catalog",
        "tags": "/v2/team/app/tags/list",
        "manifest": "/v2/team/app/manifests/v1",
        "blob": f"/v2/team/app/blobs/{digest_of(b'layer')}",
        "upload": location,
        "referrers": f"/v2/team/app/referrers/{digest}",
    }


@pytest.mark.parametrize("route", ["base", "catalog", "tags", "manifest", "blob", "upload", "referrers"])
def test_it_answers_head_like_get_without_a_body(client, pushed, route) -> None:
    url = pushed[route]
    got, head = client.get(url), client.head(url)
    assert head.status_code == got.status_code
    assert body_of(head) == b""
    for header in ("Content-Type", "Content-Length", "Docker-Content-Digest", "Location", "Range", "Link"):
        assert head.get(header) == got.get(header), header
    if got.status_code == 200:
        assert head["Content-Length"] == str(len(body_of(got)))


@pytest.mark.parametrize("url", ["/v2/team/app/blobs/unknown", f"/v2/team/app/manifests/{digest_of(b'none')}"])
def test_it_answers_head_of_an_error_without_a_body(client, url) -> None:
    response = client.head(url)
    assert response.status_code in (400, 404)
    assert response.content == b""


@pytest.mark.parametrize("url", ["/v2/team/app", "/v2/team/app/blobs/", "/v2/team/app/other/x",
                                 "/v2/team/app/blobs/uploads/a/b", "/v2/team/app/blobs/sha256:a%2fb"])
def test_it_answers_an_unknown_v2_path_with_a_404_envelope(client, url) -> None:
    response = client.get(url)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert error_code(response) == "UNSUPPORTED"
    assert client.head(url).content == b""
