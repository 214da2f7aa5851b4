"""A pull-through cache and [[notifications]]: what the cache fetches, refreshes or evicts is no push
or delete (as CNCF distribution's proxy, whose cache fills bypass its notification listener); a
pull through it is a pull of its local repository name, however the client named it."""
from __future__ import annotations

import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications.models import PendingEvent
from registry.models import Manifest, Tag
from registry.services import gc
from tests.support.notify import entry, queued, summary
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
EVERY_EVENT = ["push", "delete", "pull"]


@pytest.fixture
def endpoint(settings):  # type: ignore[no-untyped-def]
    def configure(events: list[str]) -> None:
        settings.NOTIFICATIONS = [entry(events=events)]

    return configure


def pull(client, path: str, pushed) -> None:  # type: ignore[no-untyped-def]
    """The manifest at ``path`` (/v2/<name>/manifests/<ref>[?query]), then each of its blobs."""
    base, _, query = path.partition("?")
    assert client.get(path, headers=ACCEPT).status_code == 200
    for digest in pushed.blobs:
        blob = base.rsplit("/manifests/", 1)[0] + f"/blobs/{digest}" + (f"?{query}" if query else "")
        assert body_of(client.get(blob)) == pushed.blobs[digest]
    stored()  # the fills finish storing after their responses end


def test_a_cache_fill_writes_pull_events_and_no_push(client, upstream, mirror, endpoint, settings) -> None:
    settings.SERVER_EXTERNAL_URL = "http://registry.example.internal"
    mirror()
    endpoint(EVERY_EVENT)
    pushed = push_image(upstream.url, "library/alpine", "3.20", layers=2)
    pull(client, "/v2/hub/library/alpine/manifests/3.20", pushed)
    events = queued()
    assert summary(events) == [("pull", "hub/library/alpine", "3.20")] + [
        ("pull", "hub/library/alpine", digest) for digest in pushed.blobs]
    assert events[0]["target"]["digest"] == pushed.digest
    assert events[0]["target"]["url"] == f"http://registry.example.internal/v2/hub/library/alpine/manifests/{pushed.digest}"
    # The second pull, from the cache alone, is the same pulls within a minute: no more events.
    pull(client, "/v2/hub/library/alpine/manifests/3.20", pushed)
    assert summary(queued()) == summary(events)


def test_without_pull_events_a_cache_fill_writes_nothing(client, upstream, mirror, endpoint) -> None:
    mirror()
    endpoint(["push", "delete"])
    pushed = push_image(upstream.url, "library/alpine", "3.20", layers=2)
    pull(client, "/v2/hub/library/alpine/manifests/3.20", pushed)
    assert Manifest.objects.filter(repository__name="hub/library/alpine").exists()  # it was cached
    assert not PendingEvent.objects.exists()


def test_a_containerd_pull_by_ns_is_a_pull_of_the_local_name(client, upstream, mirror, endpoint) -> None:
    mirror()
    endpoint(EVERY_EVENT)
    pushed = push_image(upstream.url, "library/alpine", "latest", layers=1)
    pull(client, "/v2/library/alpine/manifests/latest?ns=docker.io", pushed)
    events = queued()
    assert {event["target"]["repository"] for event in events} == {"hub/library/alpine"}
    assert [event["action"] for event in events] == ["pull"] * (1 + len(pushed.blobs))


def test_a_tag_moved_or_deleted_upstream_is_followed_without_events(client, upstream, mirror, endpoint) -> None:
    mirror(tag_ttl_seconds=60)
    endpoint(["push", "delete"])
    tag = "/v2/hub/library/app/manifests/stable"
    push_image(upstream.url, "library/app", "stable", layers=1)
    client.get(tag, headers=ACCEPT)
    second = push_image(upstream.url, "library/app", "stable", layers=1)
    stale = timezone.now() - timedelta(seconds=61)
    Tag.objects.filter(repository__name="hub/library/app").update(checked_at=stale)
    assert client.get(tag, headers=ACCEPT)["Docker-Content-Digest"] == second.digest  # moved here
    request = urllib.request.Request(f"{upstream.url}/v2/library/app/manifests/{second.digest}", method="DELETE")
    assert urllib.request.urlopen(request).status == 202
    Tag.objects.filter(repository__name="hub/library/app").update(checked_at=stale)
    assert client.get(tag, headers=ACCEPT).status_code == 404  # and gone here
    assert not PendingEvent.objects.exists()


def test_eviction_writes_no_delete_events(client, upstream, mirror, endpoint) -> None:
    mirror(evict_after_days=30)
    endpoint(["push", "delete"])
    pushed = push_image(upstream.url, "library/old", "v1", layers=2)
    pull(client, "/v2/hub/library/old/manifests/v1", pushed)
    then = timezone.now() - timedelta(days=31)
    Manifest.objects.filter(repository__name="hub/library/old").update(created_at=then, last_pulled_at=then)
    result = gc.collect(gc.Options(grace=timedelta(0)))
    assert result.manifests == 1 and result.blobs == len(pushed.blobs)
    assert not PendingEvent.objects.exists()
