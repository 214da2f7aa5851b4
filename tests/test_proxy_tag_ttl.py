"""A cached tag is trusted for tag_ttl_seconds; then one HEAD upstream confirms it or moves it."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry.models import Tag
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, upstream  # noqa: F401
from tests.support.registry_client import error_code
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
TAG = "/v2/hub/library/app/manifests/stable"


def age_tag(seconds: int) -> None:
    """As if the upstream had last confirmed the tag ``seconds`` ago."""
    Tag.objects.filter(repository__name="hub/library/app", name="stable").update(
        checked_at=timezone.now() - timedelta(seconds=seconds))


def test_a_moved_tag_is_seen_after_the_ttl_and_not_before(client, upstream, mirror) -> None:
    mirror(tag_ttl_seconds=60)
    first = push_image(upstream.url, "library/app", "stable", layers=1)
    assert client.get(TAG, headers=ACCEPT)["Docker-Content-Digest"] == first.digest
    second = push_image(upstream.url, "library/app", "stable", layers=1)

    age_tag(50)
    assert client.get(TAG, headers=ACCEPT)["Docker-Content-Digest"] == first.digest
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 0

    age_tag(61)
    assert client.get(TAG, headers=ACCEPT)["Docker-Content-Digest"] == second.digest
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 1
    # Both stay cached by digest; the tag's pushed time is when it moved here.
    assert client.get(f"/v2/hub/library/app/manifests/{first.digest}", headers=ACCEPT).status_code == 200


def test_an_unchanged_tag_costs_one_head_and_no_get(client, upstream, mirror) -> None:
    mirror(tag_ttl_seconds=60)
    pushed = push_image(upstream.url, "library/app", "stable", layers=1)
    client.get(TAG, headers=ACCEPT)
    age_tag(61)
    assert client.get(TAG, headers=ACCEPT)["Docker-Content-Digest"] == pushed.digest
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 1
    assert upstream.served("GET", "/v2/library/app/manifests/stable") == 1  # the first pull only
    tag = Tag.objects.get(repository__name="hub/library/app", name="stable")
    assert timezone.now() - tag.checked_at < timedelta(seconds=10)


def test_a_tag_deleted_upstream_is_gone_once_revalidated(client, upstream, mirror) -> None:
    import urllib.request

    mirror(tag_ttl_seconds=60)
    pushed = push_image(upstream.url, "library/app", "stable", layers=1)
    client.get(TAG, headers=ACCEPT)
    request = urllib.request.Request(f"{upstream.url}/v2/library/app/manifests/{pushed.digest}", method="DELETE")
    assert urllib.request.urlopen(request).status == 202
    age_tag(61)
    assert error_code(client.get(TAG, headers=ACCEPT)) == "MANIFEST_UNKNOWN"
    assert not Tag.objects.filter(repository__name="hub/library/app", name="stable").exists()


def test_a_ttl_of_zero_asks_the_upstream_every_time(client, upstream, mirror) -> None:
    mirror(tag_ttl_seconds=0)
    push_image(upstream.url, "library/app", "stable", layers=1)
    for _ in range(3):
        assert client.get(TAG, headers=ACCEPT).status_code == 200
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 2
