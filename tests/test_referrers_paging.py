"""The referrers list is bounded: pages of at most [registry] referrers_per_page descriptors and
referrers_page_annotation_bytes of annotations, linked with rel="next"; a referrer whose annotations
are over referrer_annotation_bytes is listed without them."""
from __future__ import annotations

import re

import pytest

from tests.support.registry_client import push_image

pytestmark = pytest.mark.django_db
NAME = "team/app"


@pytest.fixture
def subject(client) -> tuple[bytes, str]:
    return push_image(client, NAME, "v1")


def _push_referrers(client, subject_body: bytes, count: int, note_bytes: int) -> list[str]:
    return [push_image(client, NAME, f"r{n:03d}", subject=subject_body,
                       annotations={"note": f"{n}:" + "x" * note_bytes})[1] for n in range(count)]


def _all_pages(client, digest: str, query: str = "") -> tuple[list[dict], int]:
    url, found, pages = f"/v2/{NAME}/referrers/{digest}{query}", [], 0
    while url:
        response = client.get(url)
        assert response.status_code == 200
        found += response.json()["manifests"]
        pages += 1
        link = response.get("Link")
        url = re.match(r'<([^>]+)>; rel="next"', link).group(1) if link else ""
    return found, pages


def test_it_pages_by_count(client, subject, settings) -> None:
    settings.REGISTRY_REFERRERS_PER_PAGE = 4
    pushed = _push_referrers(client, subject[0], 10, 10)
    found, pages = _all_pages(client, subject[1])
    assert [d["digest"] for d in found] == pushed and pages == 3


def test_it_ends_a_page_early_when_its_annotations_add_up(client, subject, settings) -> None:
    settings.REGISTRY_REFERRERS_PAGE_ANNOTATION_BYTES = 50_000
    pushed = _push_referrers(client, subject[0], 6, 20_000)  # two fit in a page
    found, pages = _all_pages(client, subject[1])
    assert [d["digest"] for d in found] == pushed and pages == 3
    assert all(d["annotations"]["note"].endswith("x" * 100) for d in found)


def test_it_lists_a_referrer_with_huge_annotations_without_them(client, subject, settings) -> None:
    [big] = _push_referrers(client, subject[0], 1, 64 * 1024 + 1)  # over the default
    response = client.get(f"/v2/{NAME}/referrers/{subject[1]}")
    [descriptor] = response.json()["manifests"]
    assert descriptor["digest"] == big and "annotations" not in descriptor
    assert len(response.content) < 1000
    assert len(client.get(f"/v2/{NAME}/manifests/{big}").content) > 64 * 1024
    settings.REGISTRY_REFERRER_ANNOTATION_BYTES = 128 * 1024
    [descriptor] = client.get(f"/v2/{NAME}/referrers/{subject[1]}").json()["manifests"]
    assert len(descriptor["annotations"]["note"]) > 64 * 1024
    settings.REGISTRY_REFERRER_ANNOTATION_BYTES = 1000
    _push_referrers(client, subject[0], 1, 2000)
    assert all("annotations" not in d for d in client.get(f"/v2/{NAME}/referrers/{subject[1]}").json()["manifests"])


def test_the_next_link_keeps_the_artifact_type_filter(client, subject, settings) -> None:
    settings.REGISTRY_REFERRERS_PER_PAGE = 1
    for n in range(3):
        push_image(client, NAME, f"sig{n}", subject=subject[0], artifact_type="application/vnd.example.sig")
    push_image(client, NAME, "other", subject=subject[0], artifact_type="application/vnd.example.other")
    found, pages = _all_pages(client, subject[1], "?artifactType=application/vnd.example.sig")
    assert len(found) == 3 and pages == 3
    assert {d["artifactType"] for d in found} == {"application/vnd.example.sig"}


def test_an_unknown_or_malformed_last_is_an_empty_page_or_an_error(client, subject) -> None:
    _push_referrers(client, subject[0], 2, 10)
    gone = "sha256:" + "0" * 64
    assert client.get(f"/v2/{NAME}/referrers/{subject[1]}?last={gone}").json()["manifests"] == []
    assert client.get(f"/v2/{NAME}/referrers/{subject[1]}?last=nonsense").status_code == 400
