"""The tag and repository lists page by keyset: a page's links carry the sort key of the row they
continue from (?after= / ?before=), walking them visits every row once in order both ways, and a
link the list could not have made is refused rather than failing."""
from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from ops.ui import queries as ui_queries
from registry.models import Manifest, Repository, Tag
from tests.support.lifecycle import push_image
from tests.support.ui_fixtures import plain_static  # noqa: F401

pytestmark = pytest.mark.django_db
LINK = re.compile(r'href="([^"]*)" rel="(next|prev)"')
# Equal push times, told apart by id; names in byte order (upper case before lower case).
TAGS = {"v1": 0, "v2": 1, "v3": 1, "v4": 1, "V5": 2, "latest": 3, "a": 4, "Z": 5}


@pytest.fixture
def tagged(monkeypatch) -> None:
    monkeypatch.setattr(ui_queries, "PAGE_SIZE", 3)
    push_image("team/app", "seed", [b"layer"])
    manifest = Manifest.objects.get(repository__name="team/app")
    Tag.objects.filter(name="seed").delete()
    start = timezone.now() - timedelta(hours=1)
    for name, minutes in TAGS.items():
        Tag.objects.create(repository=manifest.repository, name=name, manifest=manifest,
                           updated_at=start + timedelta(minutes=minutes))


def _names(body: str) -> list[str]:
    return re.findall(r'class="strong tag-name" href="[^"]*">([^<]+)</a>', body)


def _walk(client: Client, path: str, params: dict[str, str], names=_names) -> tuple[list[str], list[str], str]:
    """Every row's name following rel=next from the first page, then following rel=prev back from
    the last; and the last page's body."""
    forwards, pages, query = [], 0, params
    while True:
        response = client.get(path, query)
        assert response.status_code == 200
        body = response.content.decode()
        forwards += names(body)
        links = {rel: html.unescape(href) for href, rel in LINK.findall(body)}
        pages += 1
        assert pages < 20
        if "next" not in links:
            break
        query = dict(parse_qsl(urlsplit(links["next"]).query))
    last, backwards = body, names(body)
    while "prev" in links:
        query = dict(parse_qsl(urlsplit(links["prev"]).query))
        body = client.get(path, query).content.decode()
        backwards = names(body) + backwards
        links = {rel: html.unescape(href) for href, rel in LINK.findall(body)}
    return forwards, backwards, last


@pytest.mark.parametrize("sort", ["recent", "name"])
def test_it_walks_every_tag_page_forwards_and_back(client: Client, tagged, sort: str) -> None:
    rows = Tag.objects.filter(repository__name="team/app").values_list("name", "updated_at", "id")
    if sort == "recent":
        expected = [name for name, at, pk in sorted(rows, key=lambda row: (row[1], row[2]), reverse=True)]
    else:
        expected = sorted(TAGS, key=lambda name: name.encode())
    forwards, backwards, last = _walk(client, "/ui/r/team/app/", {"sort": sort})
    assert forwards == expected
    assert backwards == expected  # back to the first page, which is full again
    first = client.get("/ui/r/team/app/", {"sort": sort}).content.decode()
    assert "1–3 of 8" in first and 'rel="prev"' not in first
    assert "2 shown of 8" in last and ">First</a>" in last


def test_a_repository_list_is_walked_by_name_and_by_push_with_those_never_pushed_last(client: Client,
                                                                                      monkeypatch) -> None:
    monkeypatch.setattr(ui_queries, "PAGE_SIZE", 2)
    for name in ["team/b", "team/a", "infra/c", "team/never", "infra/d"]:
        push_image(name, "v1", [name.encode()])
    Repository.objects.filter(name="team/never").update(pushed_at=None)  # stored before pushes kept it
    Repository.objects.filter(name="infra/d").update(pushed_at=timezone.now() - timedelta(days=1))

    def names(body: str) -> list[str]:
        return re.findall(r'<a class="strong" href="/ui/r/([^"]+)/">', body)

    assert _walk(client, "/ui/repositories/", {}, names)[0] == ["infra/c", "infra/d", "team/a", "team/b", "team/never"]
    recent = ["infra/c", "team/a", "team/b", "infra/d", "team/never"]
    forwards, backwards, _ = _walk(client, "/ui/repositories/", {"sort": "recent"}, names)
    assert forwards == recent and backwards == recent
    forwards, _, _ = _walk(client, "/ui/repositories/", {"q": "team/", "sort": "name"}, names)
    assert forwards == ["team/a", "team/b", "team/never"]


@pytest.mark.parametrize("path, params", [
    ("/ui/r/team/app/", {"after": "yesterday"}),
    ("/ui/r/team/app/", {"before": "12.x"}),
    ("/ui/r/team/app/", {"after": "9" * 19 + ".1"}),  # past a 64-bit number
    ("/ui/r/team/app/", {"after": "9" * 18 + ".1"}),  # past the last moment a date can hold
    ("/ui/r/team/app/", {"after": "١٢.٣"}),  # digits, but not ASCII ones
    ("/ui/r/team/app/", {"sort": "name", "after": "a b"}),
    ("/ui/r/team/app/", {"sort": "name", "before": "x" * 301}),
    ("/ui/repositories/", {"after": "Team/Upper"}),
    ("/ui/repositories/", {"sort": "recent", "before": "none.x"}),
])
def test_a_page_link_the_list_could_not_have_made_is_refused(client: Client, tagged, path: str,
                                                            params: dict[str, str]) -> None:
    response = client.get(path, params)
    assert response.status_code == 400
    assert "This page link is not valid" in response.content.decode()


def test_a_cursor_past_the_end_shows_the_last_page(client: Client, tagged) -> None:
    body = client.get("/ui/r/team/app/", {"sort": "name", "after": "zzz"}).content.decode()
    assert _names(body) == ["latest", "v1", "v2", "v3", "v4"][-3:] and 'rel="next"' not in body
    assert 'rel="prev"' in body


def test_a_numbered_page_link_goes_to_the_first_page(client: Client, tagged) -> None:
    response = client.get("/ui/r/team/app/", {"sort": "name", "page": "7"})
    assert response.status_code == 302 and response["Location"] == "/ui/r/team/app/?sort=name"
    assert client.get("/ui/repositories/", {"page": "2"})["Location"] == "/ui/repositories/"
