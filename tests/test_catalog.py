"""The catalog: repositories holding a manifest, in byte order, paged with n, last and Link."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from registry.models import Manifest, Repository
from tests.support.registry_client import error_code, push_blob, push_image, start_upload

pytestmark = pytest.mark.django_db

NAMES = ["ab", "a_b", "a/b", "a.b", "a-b", "team/app/api", "z"]


@pytest.fixture
def repositories(client) -> list[str]:
    body, _ = push_image(client, NAMES[0], "v1")
    for name in NAMES[1:]:
        push_image(client, name, "v1")
    return sorted(NAMES)


def _catalog(client, query: str = ""):
    response = client.get(f"/v2/_catalog{query}")
    assert response.status_code == 200, response.content
    return response, response.json()["repositories"]


def _link_query(response) -> dict[str, list[str]]:
    link = response["Link"]
    assert link.startswith("</v2/_catalog?") and link.endswith('>; rel="next"')
    return parse_qs(urlsplit(link[1 : link.index(">")]).query)


def test_it_lists_repositories_in_byte_order(client, repositories) -> None:
    response, names = _catalog(client)
    assert names == repositories == ["a-b", "a.b", "a/b", "a_b", "ab", "team/app/api", "z"]
    assert "Link" not in response


def test_it_hides_repositories_without_manifests(client) -> None:
    push_blob(client, "only/blobs", b"data")
    start_upload(client, "only/uploads")
    push_image(client, "has/manifest", "v1")
    _, names = _catalog(client)
    assert names == ["has/manifest"]


def test_it_answers_an_empty_catalog(client) -> None:
    _, names = _catalog(client)
    assert names == []


def test_it_pages_with_n_last_and_link(client, repositories) -> None:
    response, names = _catalog(client, "?n=3")
    assert names == repositories[:3]
    assert _link_query(response) == {"n": ["3"], "last": [repositories[2]]}
    collected = list(names)
    while "Link" in response:
        query = _link_query(response)
        response, names = _catalog(client, f"?n={query['n'][0]}&last={query['last'][0]}")
        collected += names
    assert collected == repositories


def test_it_starts_after_last_exclusively(client, repositories) -> None:
    _, names = _catalog(client, "?last=a/b")
    assert names == ["a_b", "ab", "team/app/api", "z"]


def test_it_answers_an_empty_list_and_no_link_for_n_zero(client, repositories) -> None:
    response, names = _catalog(client, "?n=0")
    assert names == []
    assert "Link" not in response


def test_it_returns_100_entries_by_default_with_a_link(client) -> None:
    for i in range(101):
        repo = Repository.objects.create(name=f"repo{i:03d}")
        Manifest.objects.create(repository=repo, digest=f"sha256:{i:064x}", media_type="x", size=0, body=b"")
    response, names = _catalog(client)
    assert names == [f"repo{i:03d}" for i in range(100)]
    assert _link_query(response) == {"n": ["100"], "last": ["repo099"]}


@pytest.mark.parametrize("n", ["1001", "-1", "many"])
def test_it_refuses_a_bad_n_with_pagination_number_invalid(client, n) -> None:
    response = client.get(f"/v2/_catalog?n={n}")
    assert response.status_code == 400
    assert error_code(response) == "PAGINATION_NUMBER_INVALID"


def test_it_accepts_n_at_the_maximum(client, repositories) -> None:
    _, names = _catalog(client, "?n=1000")
    assert names == repositories


@pytest.mark.parametrize("last, code", [("a\x00b", "UNSUPPORTED"), ("x" * 1025, "PAGINATION_NUMBER_INVALID")])
def test_it_refuses_a_last_no_database_can_compare(client, last, code) -> None:
    # A NUL anywhere in a query string is refused before any view (regsite.text).
    for path in ("/v2/_catalog", "/v2/team/app/tags/list"):
        response = client.get(path, {"last": last})
        assert response.status_code == 400
        assert response.json()["errors"][0]["code"] == code
