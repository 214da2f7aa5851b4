"""end-1: GET /v2/ tells clients this is a v2 registry."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_it_answers_200_with_the_api_version_header(client) -> None:
    response = client.get("/v2/")
    assert response.status_code == 200
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"
    assert response.json() == {}


def test_it_accepts_the_path_without_a_trailing_slash(client) -> None:
    response = client.get("/v2")
    assert response.status_code == 200
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"


def test_it_answers_head_with_headers_and_no_body(client) -> None:
    response = client.head("/v2/")
    assert response.status_code == 200
    assert response.content == b""
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"


def test_it_refuses_post_with_405_and_allow(client) -> None:
    response = client.post("/v2/")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert response.json()["errors"][0]["code"] == "UNSUPPORTED"
