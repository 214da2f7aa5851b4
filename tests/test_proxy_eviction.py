"""Garbage collection evicts a cache's images not pulled for evict_after_days, and then their blobs as
any other unreferenced blobs; what was pulled recently, and ordinary repositories, stay."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from registry.models import Blob, Manifest, Tag
from registry.services import gc
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_INDEX, OCI_MANIFEST, push_image, push_multiarch

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": ", ".join([OCI_MANIFEST, OCI_INDEX])}
NO_GRACE = gc.Options(grace=timedelta(0))


def pull(client, name: str, tag: str, pushed) -> None:  # type: ignore[no-untyped-def]
    assert client.get(f"/v2/hub/{name}/manifests/{tag}", headers=ACCEPT).status_code == 200
    for digest in pushed.blobs:
        body_of(client.get(f"/v2/hub/{name}/blobs/{digest}"))
    stored()


def age(name: str, days: int, digest: str | None = None) -> None:
    """As if the manifests of ``name`` (or the one ``digest``) were cached and last pulled ``days`` ago."""
    then = timezone.now() - timedelta(days=days)
    manifests = Manifest.objects.filter(repository__name=name)
    if digest:
        manifests = manifests.filter(digest=digest)
    manifests.update(created_at=then, last_pulled_at=then)


def blob_files(root: Path) -> int:
    return sum(1 for p in (root / "blobs").rglob("data"))


def test_an_image_not_pulled_for_evict_after_days_is_collected(client, upstream, mirror, storage_root) -> None:
    mirror(evict_after_days=30)
    old = push_image(upstream.url, "library/old", "v1", layers=2)
    recent = push_image(upstream.url, "library/recent", "v1", layers=2)
    pull(client, "library/old", "v1", old)
    pull(client, "library/recent", "v1", recent)
    age("hub/library/old", 31)
    age("hub/library/recent", 29)
    lines: list[str] = []
    result = gc.collect(NO_GRACE, report=lines.append)
    assert f"removed cached manifest hub/library/old@{old.digest} (not pulled for 30 days)" in lines
    assert result.manifests == 1 and result.blobs == len(old.blobs)
    assert not Manifest.objects.filter(repository__name="hub/library/old").exists()
    assert not Tag.objects.filter(repository__name="hub/library/old").exists()
    assert not Blob.objects.filter(digest__in=list(old.blobs)).exists()
    assert Blob.objects.filter(digest__in=list(recent.blobs)).count() == len(recent.blobs)
    assert blob_files(storage_root) == len(recent.blobs)
    # Evicted is not lost: the next pull fetches it again.
    pull(client, "library/old", "v1", old)
    assert Blob.objects.filter(digest__in=list(old.blobs)).count() == len(old.blobs)


def test_a_pull_renews_an_image_and_a_dry_run_removes_nothing(client, upstream, mirror) -> None:
    mirror(evict_after_days=30)
    pushed = push_image(upstream.url, "library/app", "v1", layers=1)
    pull(client, "library/app", "v1", pushed)
    age("hub/library/app", 40)
    lines: list[str] = []
    dry = gc.collect(gc.Options(grace=timedelta(0), dry_run=True), report=lines.append)
    assert dry.manifests == 1 and dry.blobs == len(pushed.blobs)
    assert any(line.startswith("would remove cached manifest hub/library/app@") for line in lines)
    assert Manifest.objects.filter(repository__name="hub/library/app").exists()
    pull(client, "library/app", "v1", pushed)  # pulled again: its last pull is now
    assert gc.collect(NO_GRACE).manifests == 0


def test_an_index_kept_keeps_the_platform_images_it_lists(client, upstream, mirror) -> None:
    mirror(evict_after_days=30)
    pushed = push_multiarch(upstream.url, "library/multi", "latest")
    index = json.loads(client.get("/v2/hub/library/multi/manifests/latest", headers=ACCEPT).content)
    for child in index["manifests"]:
        client.get(f"/v2/hub/library/multi/manifests/{child['digest']}", headers=ACCEPT)
    for child in pushed.children:
        age("hub/library/multi", 60, child)
    assert gc.collect(NO_GRACE).manifests == 0
    age("hub/library/multi", 60)
    assert gc.collect(NO_GRACE).manifests == 3


def test_zero_days_never_evicts(client, upstream, mirror) -> None:
    mirror(evict_after_days=0)
    pushed = push_image(upstream.url, "library/kept", "v1", layers=1)
    pull(client, "library/kept", "v1", pushed)
    age("hub/library/kept", 3650)
    assert gc.collect(NO_GRACE).manifests == 0
    assert Blob.objects.filter(digest__in=list(pushed.blobs)).count() == len(pushed.blobs)


def test_ordinary_repositories_are_never_evicted(client, upstream, mirror, live_server) -> None:
    mirror(evict_after_days=1)
    pushed = push_image(live_server.url, "hubby/app", "v1", layers=1)  # a name that only starts alike
    age("hubby/app", 3650)
    assert gc.collect(NO_GRACE).manifests == 0
    assert Tag.objects.filter(repository__name="hubby/app", name="v1").exists()
    assert Manifest.objects.filter(digest=pushed.digest).exists()
