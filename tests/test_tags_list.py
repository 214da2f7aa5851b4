"""end-8a/8b: the tags list, in byte order, paged with n, last and Link."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from registry.services import tags as tag_service
from tests.support.registry_client import error_code, push_image, push_manifest

pytestmark = pytest.mark.django_db

NAME = "team/app"
TAGS = ["v9", "v10", "B", "a", "_x", "1.0", "latest"]


@pytest.fixture
def tagged(client) -> list[str]:
    body, _ = push_image(client, NAME, TAGS[0])
    for tag in TAGS[1:]:
        push_manifest(client, NAME, tag, body)
    return sorted(TAGS)


def _tags(client, query: str = ""):
    response = client.get(f"/v2/{NAME}/tags/list{query}")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == NAME
    return response, response.json()["tags"]


def _next_query(response) -> str:
    link = response["Link"]
    assert link.endswith('>; rel="next"')
    url = urlsplit(link[1 : link.index(">")])
    assert url.path == f"/v2/{NAME}/tags/list"
    return f"?{url.query}"


def test_it_lists_every_tag_in_byte_order(client, tagged) -> None:
    response, tags = _tags(client)
    assert tags == tagged == ["1.0", "B", "_x", "a", "latest", "v10", "v9"]
    assert "Link" not in response


def test_it_pages_with_n_and_a_link_to_the_next_page(client, tagged) -> None:
    response, tags = _tags(client, "?n=3")
    assert tags == tagged[:3]
    assert parse_qs(urlsplit(response["Link"][1:-13]).query) == {"n": ["3"], "last": [tagged[2]]}
    collected, query = list(tags), _next_query(response)
    while True:
        response, tags = _tags(client, query)
        collected += tags
        if "Link" not in response:
            break
        query = _next_query(response)
    assert collected == tagged


def test_it_sends_no_link_when_the_page_holds_the_rest(client, tagged) -> None:
    response, tags = _tags(client, f"?n={len(tagged)}")
    assert tags == tagged
    assert "Link" not in response


def test_it_starts_after_last_exclusively(client, tagged) -> None:
    _, tags = _tags(client, "?last=a")
    assert tags == ["latest", "v10", "v9"]
    _, tags = _tags(client, "?n=1&last=a")
    assert tags == ["latest"]


def test_it_starts_after_a_last_that_is_not_a_tag(client, tagged) -> None:
    _, tags = _tags(client, "?last=b")
    assert tags == ["latest", "v10", "v9"]


def test_it_answers_an_empty_list_and_no_link_for_n_zero(client, tagged) -> None:
    response, tags = _tags(client, "?n=0")
    assert tags == []
    assert "Link" not in response


def test_it_caps_a_large_n_and_sends_a_link(client, tagged, monkeypatch) -> None:
    monkeypatch.setattr(tag_service, "MAX_TAGS", 2)
    response, tags = _tags(client, "?n=50")
    assert tags == tagged[:2]
    assert "n=2" in response["Link"]


def test_it_lists_no_tags_for_a_repository_with_only_untagged_content(client) -> None:
    body, digest = push_image(client, NAME, "v1")
    client.delete(f"/v2/{NAME}/manifests/v1")
    _, tags = _tags(client)
    assert tags == []


def test_it_answers_404_name_unknown_for_an_unknown_repository(client) -> None:
    response = client.get("/v2/no/such/tags/list")
    assert response.status_code == 404
    assert error_code(response) == "NAME_UNKNOWN"


def test_it_refuses_an_invalid_name_with_name_invalid(client) -> None:
    response = client.get("/v2/No/Such/tags/list")
    assert response.status_code == 400
    assert error_code(response) == "NAME_INVALID"


@pytest.mark.parametrize("n", ["-1", "abc", "1.5"])
def test_it_refuses_a_malformed_n_with_pagination_number_invalid(client, tagged, n) -> None:
    response = client.get(f"/v2/{NAME}/tags/list?n={n}")
    assert response.status_code == 400
    assert error_code(response) == "PAGINATION_NUMBER_INVALID"
